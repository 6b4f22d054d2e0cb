"""vendor/: every file pinned by content in vendor/SHA256SUMS, checked at every run before
anything is registered; a changed or missing file stops the preview with a clear error."""

import hashlib
import shutil
import subprocess
import sys
import time

import pulumi
import pytest

from config import vendored, versions
from tests.builders import PROJECT_DIR, bare_metal_config, preview

VENDOR = PROJECT_DIR / "vendor"
MPI = "mpi-operator-v0.8.0/deploy/v2beta1/mpi-operator.yaml"
ARGO = "argo-workflows-v3.7.3/manifests/base/workflow-controller/workflow-controller-deployment.yaml"


def test_every_vendored_file_is_pinned_and_matches():
    sums = vendored.pinned_sums()
    files = {p.relative_to(VENDOR).as_posix() for p in VENDOR.rglob("*") if p.is_file()}
    assert files - set(sums) == {"SHA256SUMS", "README.md"}
    assert set(sums) <= files
    started = time.perf_counter()
    vendored.verify()
    # Run at every preview and `pulumi up`: hashing the 8 MB costs milliseconds.
    assert time.perf_counter() - started < 1.0
    # Kubeflow's 6 MB, Kueue's chart (2 MB of CRDs), cluster-autoscaler's chart and sources
    # (0.35 MB), and no more than they need.
    assert sum((VENDOR / name).stat().st_size for name in sums) < 9_500_000
    # Each folder keeps upstream's licence.
    assert {name.split("/")[0] for name in sums} == {
        name.split("/")[0] for name in sums if name.endswith("/LICENSE")}


def test_the_mpi_operator_is_the_reviewed_release_file():
    assert vendored.pinned_sums()[MPI] == versions.MPI_OPERATOR_MANIFEST_SHA256
    assert versions.MPI_OPERATOR_MANIFEST == f"vendor/{MPI}"
    assert hashlib.sha256((PROJECT_DIR / versions.MPI_OPERATOR_MANIFEST).read_bytes()) \
        .hexdigest() == versions.MPI_OPERATOR_MANIFEST_SHA256


@pytest.fixture
def tampered(tmp_path, monkeypatch):
    """A copy of vendor/ the program reads instead, with one file changed and one gone."""
    shutil.copytree(VENDOR, tmp_path / "vendor")
    monkeypatch.setattr(vendored, "PROJECT_DIR", tmp_path)
    with (tmp_path / "vendor" / MPI).open("a") as handle:
        handle.write("# one more line\n")
    (tmp_path / "vendor" / ARGO).unlink()
    return tmp_path


def test_a_tampered_vendored_file_stops_the_run_before_anything_is_registered(tampered,
                                                                             monkeypatch):
    registered = []
    register = pulumi.Resource.__init__

    def recording(self, t, name, *args, **kwargs):
        registered.append(f"{t} {name}")
        register(self, t, name, *args, **kwargs)
    monkeypatch.setattr(pulumi.Resource, "__init__", recording)
    with pytest.raises(vendored.VendoredFilesError) as caught:
        preview(bare_metal_config(workers=1))
    message = str(caught.value)
    found = hashlib.sha256((tampered / "vendor" / MPI).read_bytes()).hexdigest()
    assert f"  - vendor/{MPI}: sha256 is {found}, pinned " \
           f"{versions.MPI_OPERATOR_MANIFEST_SHA256}" in message
    assert f"  - vendor/{ARGO}: missing (pinned sha256 " in message
    assert message.startswith("vendored upstream files differ from vendor/SHA256SUMS (2 files)")
    assert "git checkout -- vendor/" in message
    # The engine's own Stack only (a good run registers some 80 resources).
    assert [r.split()[0] for r in registered] == ["pulumi:pulumi:Stack"]


def test_the_offline_preview_prints_the_error_without_a_traceback(tmp_path):
    """The command users run, on a copy of the project whose vendored MPI file changed."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT_DIR, project, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "build", "venv", "__pycache__",
                                                  ".pytest_cache"))
    with (project / "vendor" / MPI).open("a") as handle:
        handle.write("# one more line\n")
    result = subprocess.run([sys.executable, "-m", "preview", "lab"], cwd=project,
                            capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith("Stack 'lab': vendored upstream files differ from "
                                    "vendor/SHA256SUMS (1 file)")
    assert f"vendor/{MPI}: sha256 is " in result.stderr
    assert "Traceback" not in result.stderr
    assert not (project / "build" / "lab").exists()
