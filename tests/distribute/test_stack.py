"""`--stack`: the outputs through the Pulumi CLI (a stand-in `pulumi` on PATH that answers
as the CLI does), and `users`."""

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_DIR
from tests.distribute.conftest import CLUSTER, assert_verifies, kubectl_view

FAKE_PULUMI = """#!{python}
import json, os, sys
with open({record!r}, "a") as record:
    record.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(),
                              "stdin": sys.stdin.read()}}) + "\\n")
if {fail!r}:
    sys.stderr.write({fail!r})
    sys.exit(255)
with open({answer!r}) as answer:
    sys.stdout.write(answer.read())
"""


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
                                             answer=str(answer), fail=fail))
        script.chmod(0o755)

        def calls() -> list[dict]:
            return [json.loads(line) for line in record.read_text().splitlines()]

        return {"PATH": str(folder)}, calls

    return install


def test_stack_outputs_through_the_cli(run, fake_pulumi, tmp_path, kubectl, cluster):
    env, calls = fake_pulumi()
    target = tmp_path / "config"
    # Run from another folder, the package found through PYTHONPATH.
    run("write", "--user", "bob", "--stack", "prod", "--merge-into", str(target),
        env={**env, "PYTHONPATH": str(PROJECT_DIR)}, cwd=tmp_path)
    [call] = calls()
    assert call["argv"] == ["stack", "output", "--json", "--show-secrets", "--non-interactive",
                            "--stack", "prod"]
    # The CLI runs in this project (where Pulumi.yaml is), not where the command ran.
    assert Path(call["cwd"]) == PROJECT_DIR and call["stdin"] == ""
    view = kubectl_view(kubectl, target, "--minify", "--raw")
    assert view["current-context"] == f"{CLUSTER}-bob"
    assert_verifies(view, f"{CLUSTER}-bob", cluster.ca)


def test_cwd_is_passed_on(run, fake_pulumi, tmp_path):
    env, calls = fake_pulumi()
    project = tmp_path / "elsewhere"
    project.mkdir()
    run("write", "--admin", "--stack", "dev", "--cwd", str(project), "--output",
        str(tmp_path / "admin.yaml"), env=env)
    assert Path(calls()[0]["cwd"]) == project
    done = run("write", "--admin", "--stack", "dev", "--cwd", str(tmp_path / "missing"),
               "--output", str(tmp_path / "x.yaml"), env=env, expect=2)
    assert "is not a directory" in done.stderr


def test_cli_error_is_reported_in_one_line(run, fake_pulumi, tmp_path):
    env, _ = fake_pulumi(fail="warning: A new version of Pulumi is available.\n"
                              "error: no stack named 'nope' found\n")
    done = run("write", "--user", "alice", "--stack", "nope", "--output",
               str(tmp_path / "a.yaml"), env=env, expect=1)
    assert done.stderr.strip() == ("error: `pulumi stack output` failed for stack 'nope': "
                                   "error: no stack named 'nope' found")


def test_missing_cli_says_what_to_do_instead(run, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run("write", "--user", "alice", "--stack", "prod", "--output",
               str(tmp_path / "a.yaml"), env={"PATH": str(empty)}, expect=2)
    assert "the Pulumi CLI (pulumi) is not on PATH" in done.stderr
    assert "pulumi stack output --json --show-secrets --stack prod > outputs.json" in done.stderr
    assert "--outputs outputs.json" in done.stderr


def test_unknown_user_through_the_cli(run, fake_pulumi, tmp_path):
    env, _ = fake_pulumi()
    done = run("write", "--user", "mallory", "--stack", "prod", "--output",
               str(tmp_path / "m.yaml"), env=env, expect=2)
    assert done.stderr.strip() == ("error: no user 'mallory' in output 'userKubeconfigs' of "
                                   "stack 'prod'; known users: alice, bob")


def test_users_lists_names_and_parameters(run, fake_pulumi, outputs_file, tmp_path):
    env, _ = fake_pulumi()
    expected = "".join(f"{user}\t/gpu-cluster/{CLUSTER}/users/{user}/kubeconfig\n"
                       for user in ("alice", "bob"))
    assert run("users", "--stack", "prod", env=env).stdout == expected
    assert run("users", "--outputs", str(outputs_file)).stdout == expected
    # Bare-metal stacks have no parameters.
    values = json.loads(outputs_file.read_text())
    del values["userKubeconfigParameters"]
    assert run("users", "--outputs", "-", stdin=json.dumps(values)).stdout == "alice\nbob\n"
