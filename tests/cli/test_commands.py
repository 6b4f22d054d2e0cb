"""One convention for every subcommand, as `gpu-cluster NAME` and as `python -m TOOL`: the
stack first (`--stack NAME` still accepted, with a deprecation line), `--json` the report on
stdout and the human text on stderr, `--json FILE.json` the report in that file, exit codes
0/1/2 (contract/command.py), and a report also when nothing could be read or checked.

The doctor and validate read a stack's outputs through a stand-in `pulumi` on PATH (the one
tests/distribute/test_stack.py holds to the CLI's behaviour) whose kubeconfig names an API on
a loopback port nobody listens on: the could-not-check path, end to end."""

import json
import re
import os
import socket
import sys

import pytest

from components.kubernetes.kubeconfig import client_kubeconfig
from tests.distribute.test_stack import FAKE_PULUMI, SECRET_OUTPUTS
from tests.pki import Authority, pem
from tests.cli.run import run

FORMS = {"gpu-cluster": lambda name: [sys.executable, "-m", "cli", name],
         "python -m": lambda name: [sys.executable, "-m", {"policy": "policy.offline"}.get(
             name, name)]}


@pytest.fixture(params=sorted(FORMS))
def form(request):
    return FORMS[request.param]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def stack_env(tmp_path):
    """(env, outputs file): stack 'prod' answered by the stand-in CLI; its API unreachable."""
    authority = Authority.create()
    cert, key = authority.client(days=30)
    server = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = client_kubeconfig("prod", server, pem(authority.cert), "prod-admin", pem(cert),
                                   key)
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({
        "kubeconfig": kubeconfig, "apiEndpoint": server,
        "nodes": [{"name": "gpu01", "address": "192.168.2.11", "role": "worker", "gpus": 4}],
        "userKubeconfigs": {}}))
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "pulumi"
    script.write_text(FAKE_PULUMI.format(python=sys.executable, record=str(tmp_path / "calls"),
                                         answer=str(outputs), fail="", stacks=("prod",),
                                         secret=SECRET_OUTPUTS))
    script.chmod(0o755)
    env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}
    return env, outputs, server


@pytest.mark.parametrize("tool", ["doctor", "validate"])
def test_the_stack_first_and_the_report_on_stdout_when_the_api_cannot_be_read(
        form, tool, stack_env):
    env, _, server = stack_env
    done = run(form(tool) + ["prod", "--json"], env=env, expect=2)
    report = json.loads(done.stdout)
    assert (report["exitCode"], report["source"], report["server"]) == (2, "stack 'prod'", server)
    assert f"cannot reach {server}" in json.dumps(report)
    assert f"error: the cluster's API: cannot reach {server}" in done.stderr


@pytest.mark.parametrize("tool", ["doctor", "validate"])
def test_the_report_in_a_file_when_the_outputs_cannot_be_read(form, tool, tmp_path):
    target = tmp_path / "report.json"
    done = run(form(tool) + ["--outputs", str(tmp_path / "missing.json"), "--json",
                             str(target)], expect=2)
    report = json.loads(target.read_text())
    assert report["exitCode"] == 2 and "missing.json' does not exist" in json.dumps(report)
    assert "does not exist" in done.stderr and not done.stdout.startswith("{")


@pytest.mark.parametrize("tool", ["doctor", "validate"])
def test_the_old_stack_option_still_works_and_says_it_is_deprecated(form, tool, stack_env):
    env, _, server = stack_env
    done = run(form(tool) + ["--stack", "prod", "--json"], env=env, expect=2)
    assert json.loads(done.stdout)["source"] == "stack 'prod'"
    assert "warning: --stack NAME is deprecated" in done.stderr


def test_a_word_after_json_is_not_taken_for_its_file(form, tmp_path):
    done = run(form("doctor") + ["--json", "prod"], expect=2)
    assert "'prod' is not a FILE.json; give STACK before --json" in done.stderr
    lost = tmp_path / "missing" / "report.json"
    done = run(form("validate") + ["prod", "--json", str(lost)], expect=2)
    assert f"{lost}: its folder is missing or not writable" in done.stderr


def test_distribute_takes_the_stack_first(form, stack_env, tmp_path):
    env, _, server = stack_env
    target = tmp_path / "admin.yaml"
    done = run(form("distribute") + ["write", "prod", "--admin", "--output", str(target),
                                     "--json"], env=env)
    report = json.loads(done.stdout)
    assert report == {"command": "distribute write", "exitCode": 0, "written": [str(target)],
                      "notes": report["notes"]}
    assert server in target.read_text() and report["notes"][0].startswith("wrote context")
    old = run(form("distribute") + ["users", "--stack", "prod", "--json", str(tmp_path / "u.json")],
              env=env)
    assert "warning: --stack NAME is deprecated" in old.stderr
    assert json.loads((tmp_path / "u.json").read_text())["users"] == []


def test_distribute_reports_what_it_could_not_do(form, tmp_path):
    done = run(form("distribute") + ["users", "--outputs", str(tmp_path / "missing.json"),
                                     "--json"], expect=2)
    report = json.loads(done.stdout)
    assert report["exitCode"] == 2 and "does not exist" in report["error"]
    assert done.stderr.startswith("error: ")


def test_policy_names_violations_and_what_it_could_not_read(form, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"resources": [{
        "type": "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "name": "ssh-in",
        "inputs": {"cidrIpv4": "0.0.0.0/0", "fromPort": 22, "toPort": 22,
                   "ipProtocol": "tcp"}}]}))
    done = run(form("policy") + ["--plan", str(plan), "--json"], expect=1)
    [result] = json.loads(done.stdout)["results"]
    assert [v["rule"] for v in result["violations"]] == ["no-admin-ports-to-the-world"]
    assert "1 violation" in done.stderr
    target = tmp_path / "report.json"
    done = run(form("policy") + ["nope", "--plan", str(tmp_path / "gone.json"), "--json",
                                 str(target)], expect=2)
    report = json.loads(target.read_text())
    assert report["exitCode"] == 2
    assert [r["checked"] for r in report["results"]] == [str(tmp_path / "gone.json"),
                                                         "stack nope"]
    assert "no stack file Pulumi.nope.yaml" in report["results"][1]["couldNotCheck"]


def test_preview_reports_a_stack_it_cannot_read(form, tmp_path):
    target = tmp_path / "report.json"
    run(form("preview") + ["nope", "--json", str(target)], expect=2)
    report = json.loads(target.read_text())
    assert report["exitCode"] == 2 and "Pulumi.nope.yaml" in report["error"]


def test_preview_and_policy_of_a_stack_as_json(tmp_path):
    done = run(FORMS["gpu-cluster"]("preview") + ["dev", "--quiet", "--json", "--build-dir",
                                                  str(tmp_path)])
    report = json.loads(done.stdout)
    assert (report["stack"], report["exitCode"], report["buildDir"]) == (
        "dev", 0, str(tmp_path / "dev"))
    assert report["resources"] > 100 and f"Wrote {report['files']} files" in done.stderr
    done = run(FORMS["gpu-cluster"]("policy") + ["dev", "--json"])
    [result] = json.loads(done.stdout)["results"]
    assert (result["checked"], result["violations"]) == ("stack dev", [])


def test_init_reports_when_no_host_answers(tmp_path):
    target = tmp_path / "Pulumi.none.yaml"
    done = run(FORMS["gpu-cluster"]("init") + ["none", f"127.0.0.1:{_closed_port()}",
                                               "--user", "nobody", "--output", str(target),
                                               "--json"], expect=2)
    report = json.loads(done.stdout)
    assert report["error"] == "no host could be read; nothing written"
    assert len(report["unreached"]) == 1 and report["exitCode"] == 2
    assert not target.exists()


def test_the_command_lists_every_subcommand():
    shown = run([sys.executable, "-m", "cli", "--help"]).stdout
    for name in ("init", "preview", "policy", "doctor", "validate", "distribute"):
        assert re.search(rf"\n    {name}\s", shown), name
    assert "docs/running.md#exit-codes" in shown
    assert run([sys.executable, "-m", "cli", "doctor", "--help"]).stdout.startswith(
        "usage: gpu-cluster doctor")


STAND_IN_SSH = """#!{python}
import sys, time
with open({record!r}, "a") as record:
    record.write(f"start {{time.monotonic()}}\\n")
time.sleep(1.5)
with open({record!r}, "a") as record:
    record.write(f"end {{time.monotonic()}}\\n")
sys.stderr.write("ssh: connect to host 192.0.2.1 port 22: Connection timed out\\n")
sys.exit(255)
"""


def test_init_reads_the_hosts_side_by_side(tmp_path):
    """Four hosts that each take 1.5 s to fail (a stand-in `ssh`): every read starts before
    the first one ends."""
    folder, record = tmp_path / "bin", tmp_path / "record"
    folder.mkdir()
    (folder / "ssh").write_text(STAND_IN_SSH.format(python=sys.executable, record=str(record)))
    (folder / "ssh").chmod(0o755)
    env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}
    hosts = [f"192.0.2.{n}" for n in range(1, 5)]
    done = run(FORMS["gpu-cluster"]("init") + ["four", *hosts, "--user", "admin", "--output",
                                               str(tmp_path / "Pulumi.four.yaml")],
               env=env, expect=2)
    assert done.stderr.count("Connection timed out") == 4
    events = [line.split() for line in record.read_text().splitlines()]
    starts = [float(t) for kind, t in events if kind == "start"]
    ends = [float(t) for kind, t in events if kind == "end"]
    assert len(starts) == 4 and max(starts) < min(ends), events
