"""What the config knows of EC2 GPU instance types: GPUs per instance and architecture, to
hold a pool's extra instance types (pools[].instanceTypes) to its instanceType, and the GPU
type cluster-autoscaler's AWS provider names for its accelerator label."""

from config.cloud import NVIDIA_GPU_FAMILIES, instance_family

# Instance type -> (NVIDIA GPUs, architecture) for the families of NVIDIA_GPU_FAMILIES, from
# cluster-autoscaler's own static table (kubernetes/autoscaler cluster-autoscaler-1.36.1,
# cluster-autoscaler/cloudprovider/aws/ec2_instance_types.go: InstanceTypes, GPU and
# Architecture; StaticListLastUpdateTime "2026-01-22", line 31), which is also the table its
# node templates take nvidia.com/gpu from when no resources tag says otherwise
# (aws_manager.go:285). p5e.48xlarge is not in it: a pool of it takes no extra types.
GPU_INSTANCE_TYPES: dict[str, tuple[int, str]] = {
    "p3.16xlarge": (8, "amd64"), "p3.2xlarge": (1, "amd64"), "p3.8xlarge": (4, "amd64"),
    "p3dn.24xlarge": (8, "amd64"),
    "p4d.24xlarge": (8, "amd64"),
    "p4de.24xlarge": (8, "amd64"),
    "p5.48xlarge": (8, "amd64"), "p5.4xlarge": (1, "amd64"),
    "p5en.48xlarge": (8, "amd64"),
    "p6-b200.48xlarge": (8, "amd64"),
    "g4dn.12xlarge": (4, "amd64"), "g4dn.16xlarge": (1, "amd64"),
    "g4dn.2xlarge": (1, "amd64"), "g4dn.4xlarge": (1, "amd64"), "g4dn.8xlarge": (1, "amd64"),
    "g4dn.metal": (8, "amd64"), "g4dn.xlarge": (1, "amd64"),
    "g5.12xlarge": (4, "amd64"), "g5.16xlarge": (1, "amd64"), "g5.24xlarge": (4, "amd64"),
    "g5.2xlarge": (1, "amd64"), "g5.48xlarge": (8, "amd64"), "g5.4xlarge": (1, "amd64"),
    "g5.8xlarge": (1, "amd64"), "g5.xlarge": (1, "amd64"),
    "g5g.16xlarge": (2, "arm64"), "g5g.2xlarge": (1, "arm64"), "g5g.4xlarge": (1, "arm64"),
    "g5g.8xlarge": (1, "arm64"), "g5g.metal": (2, "arm64"), "g5g.xlarge": (1, "arm64"),
    "g6.12xlarge": (4, "amd64"), "g6.16xlarge": (1, "amd64"), "g6.24xlarge": (4, "amd64"),
    "g6.2xlarge": (1, "amd64"), "g6.48xlarge": (8, "amd64"), "g6.4xlarge": (1, "amd64"),
    "g6.8xlarge": (1, "amd64"), "g6.xlarge": (1, "amd64"),
    "g6e.12xlarge": (4, "amd64"), "g6e.16xlarge": (1, "amd64"), "g6e.24xlarge": (4, "amd64"),
    "g6e.2xlarge": (1, "amd64"), "g6e.48xlarge": (8, "amd64"), "g6e.4xlarge": (1, "amd64"),
    "g6e.8xlarge": (1, "amd64"), "g6e.xlarge": (1, "amd64"),
    "gr6.4xlarge": (1, "amd64"), "gr6.8xlarge": (1, "amd64"),
}

# cluster-autoscaler's AWS GPULabel (aws_cloud_provider.go:48) and the GPU types it knows
# (availableGPUTypes, aws_cloud_provider.go:54-63), by the GPU of NVIDIA_GPU_FAMILIES; the
# GPUs it does not list get the same form. A node carrying the label but no allocatable
# nvidia.com/gpu yet counts as not ready, so a scale-up waits for the device plugin instead
# of starting more instances (processors/customresources/gpu_processor.go:51-56); a group at
# zero is known for a GPU group by its node-template tag of it (config/pool_tags.py).
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
_ACCELERATORS = {"V100": "nvidia-tesla-v100", "T4": "nvidia-tesla-t4",
                 "A100": "nvidia-tesla-a100", "A10G": "nvidia-a10g", "L4": "nvidia-l4",
                 "L40S": "nvidia-l40s"}


def accelerator(instance_type: str) -> str | None:
    """The accelerator label's value for an instance type with NVIDIA GPUs, else None."""
    gpu = NVIDIA_GPU_FAMILIES.get(instance_family(instance_type))
    return None if gpu is None else _ACCELERATORS.get(gpu, f"nvidia-{gpu.lower()}")
