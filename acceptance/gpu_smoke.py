"""gpu-smoke.yaml: one Job per GPU host that runs workloads (and per GPU pool of the cloud
layout), pinned to that node (a node of the pool), asking for all of its GPUs: `nvidia-smi` (and a GPU count check), then the CUDA vectorAdd sample."""

from acceptance.common import (
    ANNOTATION_CHECK,
    GPU_RESOURCE,
    NAMESPACE,
    GpuTarget,
    RUNTIME_CLASS,
    bounded_name,
    component_labels,
    gpu_shared,
    job_spec,
    restricted_container,
    tolerations,
)
from config import versions
from config.model import StackConfig


SMOKE_FILE = "gpu-smoke.yaml"


# Init container of a smoke Job: nvidia-smi must work and list the GPUs the pod was given.
# EXPECTED_GPUS is empty when GPUs are shared (time-slicing, MIG): the count is not checked.
SMOKE_SCRIPT = """\
set -eu
nvidia-smi
found=$(nvidia-smi --list-gpus | grep -c '^GPU ' || true)
if [ -z "$EXPECTED_GPUS" ]; then
  echo "nvidia-smi lists $found GPU(s); GPUs are shared here, so the count is not checked"
elif [ "$found" -ne "$EXPECTED_GPUS" ]; then
  echo "FAIL: nvidia-smi lists $found GPU(s) but the pod was given $EXPECTED_GPUS" >&2
  exit 1
else
  echo "PASS: nvidia-smi lists the $found GPU(s) the pod was given"
fi
"""


def smoke_job(settings: StackConfig, host: GpuTarget) -> dict:
    """Job pinned to `host` (a host's node or a pool's) that asks for all its GPUs:
    host.gpus of nvidia.com/gpu, also when time-slicing offers more (the node then lends
    out each GPU several times)."""
    gpus = {GPU_RESOURCE: host.gpus}
    labels = component_labels("gpu-smoke")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": bounded_name(f"gpu-smoke-{host.name}"),
            "namespace": NAMESPACE,
            "labels": labels,
            "annotations": {ANNOTATION_CHECK: (
                f"{host.description}: nvidia-smi lists {host.gpus} GPU(s) and the CUDA vectorAdd "
                "sample passes")},
        },
        "spec": job_spec(labels, {
            "runtimeClassName": RUNTIME_CLASS,
            "nodeSelector": dict(host.node_selector),
            **({"tolerations": tolerations(host.taints)} if host.taints else {}),
            "initContainers": [{
                "name": "nvidia-smi",
                "image": versions.CUDA_BASE_IMAGE,
                "command": ["sh", "-c", SMOKE_SCRIPT],
                "env": [{"name": "EXPECTED_GPUS",
                         "value": "" if gpu_shared(settings) else str(host.gpus)}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                              "limits": {"memory": "256Mi", **gpus}},
                "securityContext": restricted_container(),
            }],
            "containers": [{
                # The image's default command runs the sample; it prints "Test PASSED".
                "name": "vector-add",
                "image": versions.CUDA_SAMPLE_IMAGE,
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                              "limits": {"memory": "512Mi", **gpus}},
                "securityContext": restricted_container(),
            }],
        }),
    }

