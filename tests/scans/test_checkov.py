"""checkov over what the project renders and ships: the Kubernetes manifests, acceptance
jobs and host scripts of every example stack's build folder (kubernetes and secrets
frameworks), and a secrets scan of every file of the repository. No finding may remain
but those tests/scans/checkov_skips.py lists with their reason. Offline: --skip-download,
no update check, no platform."""

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.builders import PROJECT_DIR
from tests.scans import checkov_skips
from tests.scans.rendered_steps import keep_each_body_once
from preview.stack_file import EXAMPLE_STACKS

STACKS = list(EXAMPLE_STACKS)
# checkov pins packages the program's own pins conflict with: it lives in a virtualenv of
# its own inside ./venv (see the Makefile).
CHECKOV = Path(sys.prefix) / "checkov" / "bin" / "checkov"
OFFLINE = {"CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "BC_SKIP_MAPPING": "TRUE",
           "CKV_GITHUB_CONFIG_FETCH_DATA": "false", "CKV_PARSE_ERROR_FAIL": "true",
           "CKV_IGNORE_HIDDEN_DIRECTORIES": "false"}

HOW_TO_FIX = ("fix these, or accept each in tests/scans/checkov_skips.py with its reason:")


def checkov(folder: Path, frameworks: list) -> list:
    """checkov's reports (one per framework that found something to check)."""
    binary = os.environ.get("CHECKOV") or (str(CHECKOV) if CHECKOV.exists() else shutil.which("checkov"))
    if not binary:
        pytest.skip("checkov is not installed (make installs it into venv/checkov)")
    result = subprocess.run(
        [binary, "--skip-download", "--quiet", "--compact", "-o", "json", "-d", str(folder),
         "--framework", *frameworks, "--enable-secret-scan-all-files"],
        capture_output=True, text=True, timeout=900, env={**os.environ, **OFFLINE})
    assert result.returncode in (0, 1), result.stderr[-3000:]
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    for report in reports:
        assert report.get("summary", {}).get("parsing_errors", 0) == 0, report["summary"]
    return [r for r in reports if "check_type" in r]


def failures(reports: list) -> list:
    return [(report["check_type"], failed) for report in reports
            for failed in report["results"]["failed_checks"]]


@pytest.fixture(scope="module")
def builds(tmp_path_factory, seeded_build):
    """build/<stack>/ of every example stack, as `python -m preview` writes it, under the
    seed the build records use (tests/preview/test_reproducible.py, whose builds these are):
    the scan reads the recorded bytes. Unseeded, the throwaway values differ each run, and
    now and then one has the shape of an AWS key, which the secrets check (CKV_SECRET_2)
    then reports."""
    root = tmp_path_factory.mktemp("builds")
    for stack in STACKS:
        shutil.copytree(seeded_build(stack), root / stack)
        # Upstream's release files (vendor/, byte for byte but two Argo bases' URLs) that
        # the overlays build on: not the program's, and not scanned, as no other upstream
        # manifest is.
        shutil.rmtree(root / stack / "kubeflow" / "upstream", ignore_errors=True)
        # The step scripts share their bodies (tests/scans/rendered_steps.py).
        keep_each_body_once(list((root / stack).glob("hosts/*/*.sh")))
    return root


def assert_accepted(found: list, skips: list, matches: Callable, describe: Callable) -> None:
    """Each finding `found` is accepted by an entry of `skips` that `matches` it, else
    named by `describe`; and every entry accepts one: the table never hides more than it
    says."""
    used, left = [], []
    for finding in found:
        skip = next((skip for skip in skips if matches(skip, finding)), None)
        if skip is None:
            left.append(describe(finding))
        else:
            used.append(skip)
    assert left == [], (f"{HOW_TO_FIX}\n" + "\n".join(left))
    assert [skip for skip in skips if skip not in used] == []


def _kubernetes_key(failed: dict) -> str:
    stack = failed["file_path"].strip("/").split("/")[0]
    return f"{stack}:{failed['resource']}"


def test_rendered_manifests_and_scripts_pass_checkov(builds):
    reports = checkov(builds, ["kubernetes", "secrets"])
    kinds = {report["check_type"] for report in reports}
    assert "kubernetes" in kinds
    checked = sum(r["summary"]["passed"] + r["summary"]["failed"] for r in reports)
    assert checked > 500, "checkov checked almost nothing: were the manifests found?"
    # A patch names a few fields of an object upstream defines (Dex's rollout annotation),
    # not a whole workload; tests/kubeflow checks it merged.
    found = [(check_type, failed) for check_type, failed in failures(reports)
             if not (check_type == "kubernetes" and failed["file_path"].endswith(".patch.yaml"))]
    assert_accepted(
        found, checkov_skips.KUBERNETES,
        lambda skip, found: found[0] == "kubernetes" and skip.check == found[1]["check_id"]
        and fnmatch.fnmatchcase(_kubernetes_key(found[1]), skip.where),
        lambda found: f"{found[1]['check_id']} {found[1]['check_name']}: "
        f"{_kubernetes_key(found[1])} ({found[1]['file_path']})")


def repository_files() -> list:
    """The files the repository holds (tracked, or new and not ignored)."""
    result = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=PROJECT_DIR, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"not a git checkout: {result.stderr.strip()}")
    return [path for path in result.stdout.split("\0") if path and (PROJECT_DIR / path).is_file()]


def test_no_secret_in_any_file_of_the_repository(tmp_path):
    files = repository_files()
    assert "README.md" in files and ".ci/run" in files
    for path in files:
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PROJECT_DIR / path, target)
    assert_accepted(
        [failed for _, failed in failures(checkov(tmp_path, ["secrets"]))], checkov_skips.SECRETS,
        lambda entry, failed: entry[0].check == failed["check_id"]
        and entry[0].where == failed["file_path"].lstrip("/") and entry[1] == failed["resource"],
        lambda failed: f"{failed['check_id']} {failed['check_name']}: "
        f"{failed['file_path'].lstrip('/')} lines {failed['file_line_range']} "
        f"(value sha1 {failed['resource']})")


def test_the_secrets_scan_finds_a_planted_key(tmp_path):
    """In a step as the scan of the builds gets it: on the second of two hosts with the
    same step, whose body the scan leaves out."""
    from components.common.step_text import Script, render_envelope
    from preview import credentials

    for host, key in (("gpu01", "none"), ("gpu02", credentials.ssh_private_key())):
        path = tmp_path / "hosts" / host / "01-preflight.sh"
        path.parent.mkdir(parents=True)
        # authorized-keys.sh takes AUTHORIZED_KEYS: the planted key travels there.
        path.write_text("#!/usr/bin/env bash\n" + render_envelope(
            host, "preflight", Script("authorized-keys.sh"),
            {"SSH_USER": "ops", "AUTHORIZED_KEYS": key}))
    keep_each_body_once(list(tmp_path.glob("hosts/*/*.sh")))
    assert "gpu_cluster_create" not in (tmp_path / "hosts/gpu02/01-preflight.sh").read_text()
    found = [(f["check_id"], f["file_path"]) for _, f in failures(checkov(tmp_path, ["secrets"]))]
    assert ("CKV_SECRET_13", "/hosts/gpu02/01-preflight.sh") in found


def test_every_skip_has_a_reason():
    for skip in checkov_skips.KUBERNETES + [s for s, _ in checkov_skips.SECRETS]:
        assert skip.check.startswith(("CKV_", "CKV2_")) and len(skip.reason) > 20, skip
