"""A newcomer's first hour, as a script: a fresh `git clone` of this repository (its
committed HEAD), `make` (the list of targets), `make preview`, `gpu-cluster init` against two
fake hosts (real sshd and sudo on loopback, each a fake host root: tests/cli/fake_hosts.py),
`gpu-cluster preview` of the stack init wrote, `gpu-cluster policy` of it: each step green.

The clone's venv is a view of the project's (pyvenv.cfg and `bin/python` and `lib/` linked to
it, made ready with `.program`), given to make as `VENV=`: nothing is pip-installed, the
shared venv's files are not written, and make writes the view's own `bin/gpu-cluster`, which
runs the clone's code."""

import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.builders import PROJECT_DIR
from tests.cli.fake_hosts import FakeHost, build, readable_root
from tests.cli.run import run
from tests.hosts.loopback import loopback_host

pytestmark = pytest.mark.tools

HOSTS = {
    "ctl": FakeHost("ctl", {"eno1": "192.168.7.10/24"}),
    "gpu01": FakeHost("gpu01", {"eno1": "192.168.7.11/24"}, gpus=4),
}


def _venv_view(folder: Path) -> Path:
    """A venv whose interpreter and packages are the project's, its bin/ of its own."""
    shared = Path(sys.prefix)
    (folder / "bin").mkdir(parents=True)
    shutil.copyfile(shared / "pyvenv.cfg", folder / "pyvenv.cfg")
    (folder / "lib").symlink_to(shared / "lib")
    (folder / "bin" / "python").symlink_to(shared / "bin" / "python")
    return folder


def test_a_newcomer_s_first_hour(tmp_path, tmp_path_factory):
    if shutil.which("make") is None or shutil.which("git") is None:
        pytest.skip("make and git are needed")
    started = time.monotonic()
    clone = tmp_path / "gpu-cluster"
    run(["git", "clone", "--quiet", PROJECT_DIR, clone], cwd=tmp_path)
    venv = _venv_view(tmp_path / "venv")
    (venv / ".program").touch()  # newer than the clone's requirements.txt: set up already
    make = ["make", "--no-print-directory", "-C", clone, f"VENV={venv}"]

    assert "make preview " in run(make).stdout  # `make` alone: the targets
    first = run(make + ["preview"], timeout=600)
    assert " install " not in first.stdout
    assert f"{venv}/bin/gpu-cluster preview prod" in first.stdout
    assert (clone / "build" / "prod" / "summary.md").exists()
    command = venv / "bin" / "gpu-cluster"
    assert f"sys.path.insert(0, {str(clone)!r})" in command.read_text()

    with readable_root() as ctl_root, readable_root() as gpu_root, \
            loopback_host(tmp_path_factory.mktemp("ctl"),
                          set_env=build(ctl_root, HOSTS["ctl"])) as ctl, \
            loopback_host(tmp_path_factory.mktemp("gpu01"),
                          set_env=build(gpu_root, HOSTS["gpu01"])) as gpu01:
        key = tmp_path / "id_ed25519"
        shutil.copyfile(ctl.private_key, key)
        key.chmod(0o600)
        init = run([command, "init", "first", f"127.0.0.1:{ctl.port}", f"127.0.0.1:{gpu01.port}",
                    "--user", ctl.user, "--key", key], cwd=tmp_path)
        keys = {"ctl": ctl.host_public_key, "gpu01": gpu01.host_public_key}
    written = clone / "Pulumi.first.yaml"
    assert f"wrote {written}" in init.stdout and "to decide" not in init.stdout
    hosts = yaml.safe_load(written.read_text())["config"]["gpu-cluster:hosts"]
    assert {h["name"]: h["sshHostKey"] for h in hosts} == keys

    preview = run([command, "preview", "first", "--json"], cwd=tmp_path)
    assert '"exitCode": 0' in preview.stdout and "gpu01" in preview.stderr
    assert (clone / "build" / "first" / "summary.md").exists()
    policy = run([command, "policy", "first"], cwd=tmp_path)
    assert "stack first:" in policy.stdout and "0 violations" in policy.stdout
    print(f"walkthrough: {time.monotonic() - started:.0f} s")
