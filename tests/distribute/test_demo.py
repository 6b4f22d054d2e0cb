"""`demo`: a newcomer's first try, with no network at all (a network namespace of its own,
as tests/preview/test_offline.py builds it): the demo outputs, then the very commands it
prints, run as printed; kubectl reads the kubeconfig they write."""

import json
import os
import shlex
import stat
import subprocess
import sys

import yaml

from cli.launcher import script as launcher_script
from tests.builders import PROJECT_DIR
from tests.preview.test_offline import _isolated

# What distribute (and the doctor) read from the outputs.
READ = {"kubeconfig", "userKubeconfigs", "userVpnProfiles", "vpnAdminProfile",
        "userKubeconfigParameters", "nodes"}


def offline(command: list, cwd, expect: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([*_isolated(), *command], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(PROJECT_DIR)})
    assert "Traceback" not in done.stderr
    assert done.returncode == expect, done.stderr[-2000:]
    return done


def printed_steps(stderr: str) -> list[list[str]]:
    lines = stderr.split("try (offline; files beside the outputs):\n", 1)[1].splitlines()
    return [shlex.split(line) for line in lines]


def test_the_printed_steps_work_offline(tmp_path, kubectl):
    done = offline([sys.executable, "-m", "distribute", "demo", "--outputs",
                    "demo/outputs.json"], tmp_path)
    outputs = tmp_path / "demo" / "outputs.json"
    assert stat.S_IMODE(outputs.stat().st_mode) == 0o600
    values = json.loads(outputs.read_text())
    assert READ <= set(values) and "[secret]" not in json.dumps(values)
    steps = printed_steps(done.stderr)
    assert [step[:2] for step in steps] == [["gpu-cluster", "distribute"]] * 3 \
        + [["kubectl", "config"]]
    # The command as `make` writes it into the venv, with this interpreter.
    command = tmp_path / "gpu-cluster"
    command.write_text(launcher_script(sys.executable, PROJECT_DIR))
    command.chmod(0o755)
    for step in steps:
        program = command if step[0] == "gpu-cluster" else kubectl
        done = offline([str(program), *step[1:]], tmp_path)
    view = yaml.safe_load(done.stdout)
    assert view["current-context"] == "prod-carol"
    assert view["clusters"][0]["cluster"]["server"] == "https://10.20.0.10:6443"
    kube = tmp_path / "demo" / "kube"
    assert (kube / "prod-carol.ovpn").read_text() == values["userVpnProfiles"]["carol"]
    assert yaml.safe_load((kube / "admin.yaml").read_text())["current-context"] == "prod-admin"
    # Again: the outputs are kept, so the same contexts merge again without a clash.
    done = offline([sys.executable, "-m", "distribute", "demo", "--outputs",
                    "demo/outputs.json"], tmp_path)
    assert done.stderr.startswith("kept demo/outputs.json from an earlier demo")
    assert json.loads(outputs.read_text()) == values
    done = offline([str(command), *printed_steps(done.stderr)[2][1:]], tmp_path)
    assert "already up to date" in done.stderr and "already holds VPN profile" in done.stderr


def test_only_example_stacks(tmp_path):
    done = offline([sys.executable, "-m", "distribute", "demo", "mycluster",
                    "--outputs", "o.json"], tmp_path, expect=2)
    assert done.stderr.strip() == ("error: stack 'mycluster' is not an example stack of the "
                                   "project (dev, lab, prod, rke2)")
    assert not (tmp_path / "o.json").exists()
