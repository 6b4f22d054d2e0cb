"""The images the checks run, read from the program's one list of pins (config/versions.py).

That module needs nothing beyond the standard library, but importing it as
`config.versions` would load the `config` package (pydantic, the Pulumi SDK), which
`python -m validate` does without: it is loaded on its own, from its file."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "config" / "versions.py"


def _load():
    spec = importlib.util.spec_from_file_location("_gpu_cluster_versions", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


_versions = _load()
CUDA_BASE_IMAGE: str = _versions.CUDA_BASE_IMAGE
CUDA_SAMPLE_IMAGE: str = _versions.CUDA_SAMPLE_IMAGE
NCCL_TESTS_IMAGE: str = _versions.NCCL_TESTS_IMAGE
DCGM_IMAGE: str = _versions.DCGM_IMAGE
FIO_IMAGE: str = _versions.FIO_IMAGE
IPERF3_IMAGE: str = _versions.IPERF3_IMAGE
BUSYBOX_IMAGE: str = _versions.BUSYBOX_IMAGE
