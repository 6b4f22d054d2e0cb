"""The tags of a pool's auto scaling group that cluster-autoscaler's AWS provider reads
(kubernetes/autoscaler cluster-autoscaler-1.36.1, cluster-autoscaler/cloudprovider/aws/):
auto-discovery, and the node template it scales a group up from, even from zero instances.
Built from config/node_labels.py, which also gives the kubelet its labels and taints."""

from config.hosts import WorkerPool
from config.node_labels import node_labels, node_taints

# `--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-
# autoscaler/<cluster-name>` finds the groups that have both keys; their values are not
# compared (README.md:167-172, "Auto-Discovery Setup"). Only pools that can scale carry them.
ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
CLUSTER_TAG_PREFIX = "k8s.io/cluster-autoscaler/"
# The node template (aws_manager.go buildNodeFromTemplate, 268-342): labels from
# extractLabelsFromAsg (404-424: the key after the prefix, the tag's value), taints from
# extractTaintsFromAsg (484-507: value `<value>:<effect>`, split at its first colon, so a
# taint is keyed by its key alone), resources from extractAllocatableResourcesFromAsg
# (441-461: a quantity, overriding the instance type table's nvidia.com/gpu, 285-293).
LABEL_TAG_PREFIX = "k8s.io/cluster-autoscaler/node-template/label/"
TAINT_TAG_PREFIX = "k8s.io/cluster-autoscaler/node-template/taint/"
GPU_RESOURCE_TAG = "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"

# AWS's limits (Auto Scaling API reference, Tag: Key 1-128, Value 0-256 characters; Amazon EC2
# Auto Scaling quotas: 50 tags per Auto Scaling group).
TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256
GROUP_TAGS_MAX = 50


def cluster_tag(cluster_name: str) -> str:
    return f"{CLUSTER_TAG_PREFIX}{cluster_name}"


def autoscaler_tags(cluster_name: str, pool: WorkerPool) -> dict[str, str]:
    """The group's tags for cluster-autoscaler: none for a fixed pool (min = max), which it
    leaves alone; for one that scales, auto-discovery and its nodes' labels, taints and GPUs
    as they register."""
    if not pool.scales:
        return {}
    tags = {ENABLED_TAG: "true", cluster_tag(cluster_name): "owned"}
    tags.update({f"{LABEL_TAG_PREFIX}{key}": value for key, value in node_labels(pool).items()})
    tags.update({f"{TAINT_TAG_PREFIX}{taint.key}": f"{taint.value}:{taint.effect}"
                 for taint in node_taints(pool)})
    tags[GPU_RESOURCE_TAG] = str(pool.gpus)
    return tags
