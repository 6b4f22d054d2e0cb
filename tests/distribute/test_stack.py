"""`--stack`: the outputs through the Pulumi CLI, a stand-in `pulumi` on PATH that answers
the commands the Automation API runs as the CLI does, and `users`."""

import json
import sys
from pathlib import Path

import pytest

from tests.builders import PROJECT_DIR
from tests.distribute.conftest import CLUSTER, assert_verifies, kubectl_view

# The CLI's side of what contract/outputs.py runs, for pulumi 3.272.0: `pulumi version`
# prints "v3.272.0"; `--non-interactive` is a global flag, accepted before the command (the
# Automation API puts it there, pulumi/automation/_cmd.py run) or after it; `stack output
# --json` shows each secret output as "[secret]" unless --show-secrets (the SDK compares
# both runs, _local_workspace.py stack_outputs); a missing stack is "error: no stack named
# 'X' found", exit 255 (the SDK's errors.py matches "no stack named.*found"). Anything else
# is refused, so a command the code should not run (`stack select`) fails the test.
FAKE_PULUMI = """#!{python}
import json, os, sys
argv = sys.argv[1:]
with open({record!r}, "a") as record:
    record.write(json.dumps({{"argv": argv, "cwd": os.getcwd(), "stdin": sys.stdin.read(),
                              "automation": os.environ.get("PULUMI_AUTOMATION_API")}}) + "\\n")
args = [arg for arg in argv if arg != "--non-interactive"]
if args == ["version"]:
    print("v3.272.0")
    sys.exit(0)
if {fail!r}:
    sys.stderr.write({fail!r})
    sys.exit(255)
show = "--show-secrets" in args
args = [arg for arg in args if arg != "--show-secrets"]
if args[:3] != ["stack", "output", "--json"] or len(args) != 5 or args[3] != "--stack":
    sys.stderr.write("error: the stand-in CLI does not know " + " ".join(argv) + "\\n")
    sys.exit(255)
if args[4] not in {stacks!r}:
    sys.stderr.write("error: no stack named '" + args[4] + "' found\\n")
    sys.exit(255)
with open({answer!r}) as answer:
    outputs = json.load(answer)
if not show:
    outputs = {{name: "[secret]" if name in {secret!r} else value
               for name, value in outputs.items()}}
print(json.dumps(outputs, indent=4))
"""
SECRET_OUTPUTS = ("kubeconfig", "userKubeconfigs")
STACKS = ("prod", "dev")


@pytest.fixture
def fake_pulumi(tmp_path, cluster):
    """Installs `pulumi` in a PATH folder; returns (env, calls) where calls() reads what it
    was run with."""

    def install(fail: str = "") -> tuple[dict, callable]:
        folder = tmp_path / "bin"
        folder.mkdir(exist_ok=True)
        record, answer = tmp_path / "calls.jsonl", tmp_path / "answer.json"
        answer.write_text(json.dumps(cluster.outputs(), indent=2))
        script = folder / "pulumi"
        script.write_text(FAKE_PULUMI.format(python=sys.executable, record=str(record),
                                             answer=str(answer), fail=fail, stacks=STACKS,
                                             secret=SECRET_OUTPUTS))
        script.chmod(0o755)

        def calls() -> list[dict]:
            return [json.loads(line) for line in record.read_text().splitlines()]

        return {"PATH": str(folder)}, calls

    return install


def automation_calls(stack: str) -> list[list[str]]:
    return [["version"],
            ["--non-interactive", "stack", "output", "--json", "--stack", stack],
            ["--non-interactive", "stack", "output", "--json", "--show-secrets", "--stack", stack]]


def test_stack_outputs_through_the_cli(run, fake_pulumi, tmp_path, kubectl, cluster):
    env, calls = fake_pulumi()
    target = tmp_path / "config"
    # Run from another folder, the package found through PYTHONPATH.
    run("write", "--user", "bob", "prod", "--merge-into", str(target),
        env={**env, "PYTHONPATH": str(PROJECT_DIR)}, cwd=tmp_path)
    found = calls()
    assert [call["argv"] for call in found] == automation_calls("prod")
    # The outputs are read in this project (where Pulumi.yaml is), not where the command ran.
    assert all(Path(call["cwd"]) == PROJECT_DIR for call in found[1:])
    assert [call["automation"] for call in found[1:]] == ["true", "true"]
    view = kubectl_view(kubectl, target, "--minify", "--raw")
    assert view["current-context"] == f"{CLUSTER}-bob"
    assert_verifies(view, f"{CLUSTER}-bob", cluster.ca)


def test_cwd_is_passed_on(run, fake_pulumi, tmp_path):
    env, calls = fake_pulumi()
    project = tmp_path / "elsewhere"
    project.mkdir()
    run("write", "--admin", "dev", "--cwd", str(project), "--output",
        str(tmp_path / "admin.yaml"), env=env)
    assert Path(calls()[-1]["cwd"]) == project
    done = run("write", "--admin", "dev", "--cwd", str(tmp_path / "missing"),
               "--output", str(tmp_path / "x.yaml"), env=env, expect=2)
    assert "is not a directory" in done.stderr


def test_cli_error_is_reported_in_one_line(run, fake_pulumi, tmp_path):
    env, _ = fake_pulumi(fail="warning: A new version of Pulumi is available.\n"
                              "error: no stack named 'nope' found\n")
    done = run("write", "--user", "alice", "nope", "--output",
               str(tmp_path / "a.yaml"), env=env, expect=2)
    assert done.stderr.strip() == ("error: `pulumi stack output` failed for stack 'nope': "
                                   "error: no stack named 'nope' found")


def test_unknown_stack_as_the_cli_reports_it(run, fake_pulumi, tmp_path):
    env, calls = fake_pulumi()
    done = run("users", "staging", env=env, expect=2)
    assert done.stderr.strip() == ("error: `pulumi stack output` failed for stack 'staging': "
                                   "error: no stack named 'staging' found")
    assert [call["argv"] for call in calls()] == automation_calls("staging")[:2]


def test_without_the_sdk_the_cli_is_run_directly(run, fake_pulumi, tmp_path, cluster):
    """An interpreter without the Pulumi SDK (a `pulumi` package with no automation in
    front of the real one): the outputs come from `pulumi stack output` run once."""
    env, calls = fake_pulumi()
    shadow = tmp_path / "no-sdk" / "pulumi"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    target = tmp_path / "bob.yaml"
    run("write", "--user", "bob", "prod", "--output", str(target),
        env={**env, "PYTHONPATH": f"{shadow.parent}:{PROJECT_DIR}"}, cwd=tmp_path)
    [call] = calls()
    assert call["argv"] == ["stack", "output", "--json", "--show-secrets", "--non-interactive",
                            "--stack", "prod"]
    assert Path(call["cwd"]) == PROJECT_DIR and call["stdin"] == "" and call["automation"] is None
    assert target.read_text() == cluster.kubeconfigs["bob"]


def test_the_doctor_reads_the_stack_the_same_way(fake_pulumi, monkeypatch, tmp_path):
    from contract import stack
    env, calls = fake_pulumi()
    monkeypatch.setenv("PATH", env["PATH"])
    found = stack.read("prod", None, str(tmp_path))
    assert found.source == "stack 'prod'" and found.kubeconfig.context_name == f"{CLUSTER}-admin"
    assert [node.name for node in found.nodes] == ["controller"]
    assert [call["argv"] for call in calls()] == automation_calls("prod")
    assert Path(calls()[-1]["cwd"]) == tmp_path


def test_missing_cli_says_what_to_do_instead(run, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run("write", "--user", "alice", "prod", "--output",
               str(tmp_path / "a.yaml"), env={"PATH": str(empty)}, expect=2)
    assert "the Pulumi CLI (pulumi) is not on PATH" in done.stderr
    assert "pulumi stack output --json --show-secrets --stack prod > outputs.json" in done.stderr
    assert "--outputs outputs.json" in done.stderr


def test_unknown_user_through_the_cli(run, fake_pulumi, tmp_path):
    env, _ = fake_pulumi()
    done = run("write", "--user", "mallory", "prod", "--output",
               str(tmp_path / "m.yaml"), env=env, expect=2)
    assert done.stderr.strip() == ("error: no user 'mallory' in output 'userKubeconfigs' of "
                                   "stack 'prod'; known users: alice, bob")


def test_users_lists_names_and_parameters(run, fake_pulumi, outputs_file, tmp_path):
    env, _ = fake_pulumi()
    expected = "".join(f"{user}\t/gpu-cluster/{CLUSTER}/users/{user}/kubeconfig\n"
                       for user in ("alice", "bob"))
    assert run("users", "prod", env=env).stdout == expected
    assert run("users", "--outputs", str(outputs_file)).stdout == expected
    # Bare-metal stacks have no parameters.
    values = json.loads(outputs_file.read_text())
    del values["userKubeconfigParameters"]
    assert run("users", "--outputs", "-", stdin=json.dumps(values)).stdout == "alice\nbob\n"
