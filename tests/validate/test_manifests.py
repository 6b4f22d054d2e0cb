"""Everything `python -m validate` creates passes kubernetes-validate --strict, and the
package runs without the program's own dependencies."""

import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from config import versions
from tests.builders import PROJECT_DIR, require_tool
from tests.imports import top_level_imports
from tests.validate import cluster
from validate import manifests

RUN = "0a1b2c3d"
NS = "gpu-validate-0a1b2c3d"


def every_object() -> list[dict]:
    gpu, other = cluster.node("gpu000", 8), cluster.node("gpu001", 8)
    with tempfile.TemporaryDirectory() as folder:
        rendered = list(yaml.safe_load_all(
            (cluster.write_acceptance(Path(folder)) / "mpijob-benchmark.yaml").read_text()))
    mpijob = next(d for d in rendered if d and d["kind"] == "MPIJob")
    return [
        manifests.namespace(NS, RUN),
        manifests.cuda_smoke("cuda-smoke-gpu000", NS, RUN, gpu, 8, 900),
        manifests.dcgm_diag("dcgm-diag-gpu000", NS, RUN, gpu, 8, 1, 900),
        manifests.nccl_node("nccl-gpu000", NS, RUN, gpu, 8, 900),
        manifests.iperf3_server("iperf3-s-gpu000", NS, RUN, gpu, 900),
        manifests.iperf3_client("iperf3-c-gpu001", NS, RUN, other, "192.168.2.2", 900),
        manifests.claim("rwx", NS, RUN, "nfs", "ReadWriteMany"),
        manifests.rwx_pod("rwx-a", NS, RUN, "a", "b", "rwx", gpu, 900),
        manifests.fio_pod("fio", NS, RUN, "fio", 1024, gpu, 900),
        manifests.mpijob(mpijob, NS, RUN),
    ]


def test_every_object_passes_kubernetes_validate_strict(tmp_path):
    validate = require_tool("kubernetes-validate")
    objects = [o for o in every_object() if o["kind"] != "MPIJob"]  # a CR: no schema here
    paths = []
    for index, obj in enumerate(objects):
        path = tmp_path / f"{index:02d}-{obj['kind'].lower()}.yaml"
        path.write_text(yaml.safe_dump(obj))
        paths.append(str(path))
    version = ".".join(versions.K0S.lstrip("v").split(".")[:2]) + ".0"
    result = subprocess.run([validate, "--strict", "-k", version, *paths],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_object_carries_the_run_label_and_pods_are_bounded():
    for obj in every_object():
        assert obj["metadata"]["labels"]["gpu-cluster/validate-run"] == RUN, obj["metadata"]
        if obj["kind"] == "Pod":
            spec = obj["spec"]
            assert spec["restartPolicy"] == "Never" and spec["activeDeadlineSeconds"] == 900
            assert spec["automountServiceAccountToken"] is False
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            (container,) = spec["containers"]
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    mpijob = every_object()[-1]
    for replica in mpijob["spec"]["mpiReplicaSpecs"].values():
        assert replica["template"]["metadata"]["labels"]["gpu-cluster/validate-run"] == RUN
    assert mpijob["metadata"]["namespace"] == NS


def test_validate_needs_none_of_the_programs_packages():
    root = Path(PROJECT_DIR)
    used = {name for path in (root / "validate").rglob("*.py") for name in top_level_imports(path)}
    assert used & {"components", "config", "preview", "pulumi", "pulumi_kubernetes",
                   "pydantic"} == set()
    program = [root / "__main__.py", *(root / "components").rglob("*.py"),
               *(root / "config").rglob("*.py"), *(root / "preview").rglob("*.py")]
    assert [str(p) for p in program if "validate" in top_level_imports(p)] == []
    # In a fresh interpreter: the command loads neither pydantic nor the Pulumi SDK.
    probe = ("import sys, validate.__main__; "
             "print(sorted({'pydantic', 'pulumi', 'config'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_DIR,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
