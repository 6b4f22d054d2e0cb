"""A node's labels and taints as it registers, from the config: the one place the kubelet's
flags (components/distributions/) and a pool's node template for cluster-autoscaler
(config/pool_tags.py) take them from, so the two cannot disagree."""

from config.hosts import MACHINE_GENERATION_LABEL, Host, Taint, WorkerPool
from config.instance_types import ACCELERATOR_LABEL, accelerator
from contract.names import CAPACITY_KINDS, CAPACITY_LABEL, POOL_LABEL

ON_PREM = CAPACITY_KINDS[0]


def pool_capacity(pool: WorkerPool) -> str:
    """contract.names.CAPACITY_KINDS' value for a pool's nodes. A mixed pool's are `spot`: the
    label is fixed in the launch template, before Auto Scaling picks an instance's market, so
    every node of the pool carries the weakest promise any of them has (a workload that must
    not be interrupted selects `on-demand` or `reserved`)."""
    if pool.capacity_reservation is not None:
        return "reserved"
    return "on-demand" if pool.capacity == "on-demand" else "spot"


def node_labels(node: "Host | WorkerPool") -> dict[str, str]:
    """Labels from config plus the GPU labels the GPU add-ons select nodes by; a pool's nodes
    also carry their pool, their capacity and, with GPUs, cluster-autoscaler's accelerator
    label."""
    labels = {POOL_LABEL: node.name, CAPACITY_LABEL: pool_capacity(node)} \
        if isinstance(node, WorkerPool) else {}
    if isinstance(node, Host) and node.runs_workloads:
        # The on-prem flavor of the teams' Kueue queues selects these nodes by it
        # (components/access/queues.py stack_flavors; config/queues.py ON_PREM_FLAVOR).
        labels[CAPACITY_LABEL] = ON_PREM
    if node.gpus:
        labels["nvidia.com/gpu.present"] = "true"
        if node.gpu_model:
            labels["nvidia.com/gpu.product"] = node.gpu_model
        gpu_type = accelerator(node.instance_type) if isinstance(node, WorkerPool) else None
        if gpu_type is not None:
            labels[ACCELERATOR_LABEL] = gpu_type
    if isinstance(node, Host) and node.generation:
        # retire-node compares it: the node of an old machine does not carry it.
        labels[MACHINE_GENERATION_LABEL] = str(node.generation)
    labels.update(node.labels)
    return labels


def node_taints(node: "Host | WorkerPool") -> list[Taint]:
    """The taints a node registers with: its config's. The program adds none of its own (a GPU
    pod tolerates a GPU node's nvidia.com/gpu:NoSchedule through ExtendedResourceToleration,
    components/distributions/base.py GPU_TOLERATION_PLUGIN, only when the config sets it)."""
    return list(node.taints)
