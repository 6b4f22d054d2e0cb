"""Which stacks a change previews and updates: table-driven over changed paths, and once
through git the way the workflows call it."""

import importlib.util
import json
import subprocess

import pytest

from tests.builders import PROJECT_DIR

_SPEC = importlib.util.spec_from_file_location(
    "affected_stacks", PROJECT_DIR / ".github" / "scripts" / "affected_stacks.py")
affected_stacks = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(affected_stacks)

# Every example stack: a change to the program previews (and updates) them all.
EVERY = ["dev", "lab", "prod", "rke2"]
CASES = [
    (["README.md"], []),
    (["tests/policy/test_rules.py", "preview/report.py", "Makefile"], []),
    (["Pulumi.dev.yaml"], ["dev"]),
    (["Pulumi.dev.yaml", "Pulumi.prod.yaml", "docs/x.md"], ["dev", "prod"]),
    (["Pulumi.gone.yaml"], []),
    (["components/addons/gpu_support.py"], EVERY),
    (["config/model.py"], EVERY),
    (["__main__.py"], EVERY),
    (["requirements.txt"], EVERY),
    (["requirements-dev.txt"], []),
    (["policy/rules.py"], EVERY),
    (["components.md"], []),
    ([".github/workflows/up.yml"], EVERY),
]


@pytest.mark.parametrize("changed, expected", CASES, ids=[", ".join(c) for c, _ in CASES])
def test_affected(changed, expected):
    assert affected_stacks.affected(changed, PROJECT_DIR) == expected


def test_layouts_decide_aws_credentials_and_region():
    described = {s: affected_stacks.describe(s, PROJECT_DIR) for s in EVERY}
    assert described["lab"]["aws"] is False
    assert described["prod"] == {"stack": "prod", "aws": True, "region": "us-east-1"}
    assert described["dev"] == {"stack": "dev", "aws": True, "region": "us-west-2"}
    assert described["rke2"] == {"stack": "rke2", "aws": True, "region": "ap-northeast-2"}


def _outputs(capsys, argv, project_dir=PROJECT_DIR) -> dict:
    assert affected_stacks.main(argv, project_dir) == 0
    lines = capsys.readouterr().out.splitlines()
    return {name: json.loads(value) for name, _, value in (line.partition("=") for line in lines)}


def test_prod_is_apart_from_the_other_stacks(capsys):
    found = _outputs(capsys, ["--all"])
    assert [i["stack"] for i in found["stacks"]] == ["dev", "lab", "rke2"]
    assert [i["stack"] for i in found["prod"]] == ["prod"]
    assert [i["stack"] for i in found["all"]] == EVERY
    assert _outputs(capsys, ["--stack", "lab"])["prod"] == []
    # A first push has no commit before it: every stack.
    assert len(_outputs(capsys, ["--base", "0" * 40])["all"]) == len(EVERY)
    assert affected_stacks.main(["--stack", "nope"], PROJECT_DIR) == 2


def test_changes_between_two_commits(tmp_path, capsys):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    for name in ("Pulumi.lab.yaml", "Pulumi.prod.yaml", "Pulumi.dev.yaml", "README.md"):
        (tmp_path / name).write_text((PROJECT_DIR / name).read_text())
    git("init", "-q", "-b", "main")
    git("add", ".")
    git("commit", "-q", "-m", "base")
    (tmp_path / "Pulumi.lab.yaml").write_text((tmp_path / "Pulumi.lab.yaml").read_text() + "# x\n")
    (tmp_path / "README.md").write_text("changed\n")
    git("commit", "-q", "-am", "change")
    found = _outputs(capsys, ["--base", "HEAD~1", "--head", "HEAD"], tmp_path)
    assert found == {"stacks": [{"stack": "lab", "aws": False, "region": "us-east-1"}],
                     "prod": [], "all": [{"stack": "lab", "aws": False, "region": "us-east-1"}]}
