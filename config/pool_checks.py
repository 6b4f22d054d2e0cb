"""Rules across the keys of one EC2 worker pool (hybrid and cloud layouts): its size bounds,
its capacity (spot, mixed, reserved) and its instance types, and the tags cluster-autoscaler reads of its
group, measured against AWS's limits. ec2_pool_checks (config/aws_checks.py) calls it."""

from config.cloud import NVIDIA_GPU_FAMILIES, instance_family
from config.hosts import WorkerPool
from config.instance_types import GPU_INSTANCE_TYPES
from config.partial import PartialConfig
from config.pool_tags import (
    GROUP_TAGS_MAX,
    LABEL_TAG_PREFIX,
    TAG_KEY_MAX,
    TAG_VALUE_MAX,
    TAINT_TAG_PREFIX,
    autoscaler_tags,
)
from config.problems import Problem
from contract.names import POOL_LABEL, PROGRAM_NODE_LABELS

# Tags a pool's group carries besides aws.tags and cluster-autoscaler's
# (components/aws/gpu_worker_pool.py _tags, components/aws/tags.py CLUSTER_TAG).
OWN_GROUP_TAGS = ("Name", POOL_LABEL, "gpu-cluster/cluster")


def pool_checks(cfg: PartialConfig) -> list[Problem]:
    problems = []
    for index, pool in cfg.pools:
        key = f"pools[{index}]"
        problems += _size(key, pool)
        problems += _capacity(key, pool)
        problems += _instance_types(key, pool)
        problems += _tags(cfg, key, pool)
        # The program's own labels say what the pool is; Kueue's flavors and cluster-
        # autoscaler select by them, so a pool's labels may not say otherwise.
        problems += [Problem(f"{key}.labels.{label}", "is the program's own label of a pool's "
                             "nodes (its name, its capacity); remove it")
                     for label in PROGRAM_NODE_LABELS if label in pool.labels]
    return problems


def _size(key: str, pool: WorkerPool) -> list[Problem]:
    """0 <= min <= count <= max: count is the size the group starts at."""
    problems = []
    if pool.min_size > pool.count:
        problems.append(Problem(f"{key}.min", f"{pool.min_size} is more than count "
                                f"{pool.count}, the size the group starts at"))
    if pool.max_size < pool.count:
        problems.append(Problem(f"{key}.max", f"{pool.max_size} is less than count "
                                f"{pool.count}, the size the group starts at"))
    return problems


def _capacity(key: str, pool: WorkerPool) -> list[Problem]:
    problems = []
    if pool.capacity != "mixed":
        for name, field in (("onDemandBase", "on_demand_base"),
                            ("onDemandPercentage", "on_demand_percentage")):
            if field in pool.model_fields_set:
                problems.append(Problem(f"{key}.{name}", "is only used with capacity mixed"))
    if pool.capacity == "on-demand" and pool.instance_types:
        problems.append(Problem(f"{key}.instanceTypes", "is only used with capacity spot or "
                                "mixed (an on-demand pool runs instanceType)"))
    if pool.capacity_block and pool.capacity_reservation is None:
        problems.append(Problem(f"{key}.capacityBlock", "needs capacityReservation: the "
                                "Capacity Block's reservation id"))
    # Reservations and Capacity Blocks hold instances of one type, bought on-demand or as
    # the block: a spot request cannot use them (EC2 User Guide, "Capacity Reservations":
    # they are On-Demand capacity; Auto Scaling User Guide, "Use Capacity Blocks for machine
    # learning workloads": the launch template names the block's id and instance type).
    if pool.capacity_reservation is not None and pool.capacity != "on-demand":
        problems.append(Problem(f"{key}.capacity", f"is {pool.capacity}, but a capacity "
                                "reservation or Capacity Block holds on-demand instances of "
                                "one type: use on-demand with capacityReservation"))
    return problems


def _instance_types(key: str, pool: WorkerPool) -> list[Problem]:
    """Every type of a pool gives its nodes the same labels and cluster-autoscaler the same
    template (it reads the first type, aws_wrapper.go:767-768): the same GPUs, count, model
    and architecture, as the pinned table says; with gpuModel set, the same family (p4d and
    p4de differ in memory, which nvidia.com/gpu.product names)."""
    problems = []
    family = instance_family(pool.instance_type)
    base = GPU_INSTANCE_TYPES.get(pool.instance_type)
    seen = {pool.instance_type}
    for number, other in enumerate(pool.instance_types):
        where = f"{key}.instanceTypes[{number}]"
        if other in seen:
            problems.append(Problem(where, f"'{other}' is listed already (instanceType comes "
                                    "first by itself)"))
            continue
        seen.add(other)
        if not pool.gpus:
            if instance_family(other) in NVIDIA_GPU_FAMILIES:
                problems.append(Problem(where, f"'{other}' has NVIDIA GPUs and the pool none"))
            continue
        if base is None:
            problems.append(Problem(where, f"the pinned table (config/instance_types.py) does "
                                    f"not list instanceType '{pool.instance_type}', so no "
                                    "other type can be held to its GPUs; remove instanceTypes"))
            break
        theirs = GPU_INSTANCE_TYPES.get(other)
        same_gpu = NVIDIA_GPU_FAMILIES.get(instance_family(other)) == NVIDIA_GPU_FAMILIES[family]
        if theirs != base or not same_gpu:
            problems.append(Problem(where, f"'{other}' does not have the GPUs of "
                                    f"'{pool.instance_type}' ({base[0]} "
                                    f"{NVIDIA_GPU_FAMILIES[family]}, {base[1]}) in the pinned "
                                    "table (config/instance_types.py)"))
        elif pool.gpu_model and instance_family(other) != family:
            problems.append(Problem(where, f"'{other}' is not of family {family}, and gpuModel "
                                    f"'{pool.gpu_model}' labels every node of the pool"))
    return problems


def _tags(cfg: PartialConfig, key: str, pool: WorkerPool) -> list[Problem]:
    """The group's tags within AWS's limits (config/pool_tags.py), and a taint per key: the
    taint tags are keyed by the taint's key alone."""
    if not pool.scales or cfg.cluster_name is None:
        return []
    problems = []
    keys = [taint.key for taint in pool.taints]
    for number, taint in enumerate(pool.taints):
        if keys.index(taint.key) != number:
            problems.append(Problem(f"{key}.taints[{number}]", f"a second taint with key "
                                    f"'{taint.key}': cluster-autoscaler's node template has "
                                    "one taint per key, so a pool that scales cannot have two"))
    tags = autoscaler_tags(cfg.cluster_name, pool)
    # clusterName has at most 49 characters, so the discovery tags stay within the limits;
    # the label and taint tags grow with the pool's own keys (a label key may have 317).
    for tag, value in tags.items():
        if len(tag) <= TAG_KEY_MAX and len(value) <= TAG_VALUE_MAX:
            continue
        where = f"{key}.labels.{tag[len(LABEL_TAG_PREFIX):]}" \
            if tag.startswith(LABEL_TAG_PREFIX) else f"{key}.taints ({tag[len(TAINT_TAG_PREFIX):]})"
        problems.append(Problem(where, f"makes the group's tag '{tag}' {len(tag)} characters "
                                f"long with a value of {len(value)}; AWS allows {TAG_KEY_MAX} "
                                f"and {TAG_VALUE_MAX}: shorten the key"))
    stack_tags = cfg.aws.tags if cfg.aws is not None else {}
    total = len(set(stack_tags) | set(OWN_GROUP_TAGS) | set(tags))
    if total > GROUP_TAGS_MAX:
        problems.append(Problem(f"{key}.labels", f"the group would carry {total} tags (aws.tags, "
                                "its own, and one per label and taint for cluster-autoscaler); "
                                f"AWS allows {GROUP_TAGS_MAX}: use fewer labels or tags"))
    return problems


def pool_warnings(pools: list[WorkerPool]) -> list[str]:
    """What the program does not do for a pool on spot or reserved capacity."""
    warnings = []
    for index, pool in enumerate(pools):
        key = f"gpu-cluster:pools[{index}] ({pool.name})"
        if pool.capacity != "on-demand":
            warnings.append(
                f"{key}.capacity is {pool.capacity}: EC2 reclaims spot instances with two "
                "minutes' notice, and their pods with them; every node of the pool is labelled "
                "gpu-cluster/capacity=spot (a launch template cannot know an instance's "
                "market), so work that must not be interrupted selects on-demand or reserved")
        if pool.capacity_reservation is None:
            continue
        warnings.append(
            f"{key}.capacityReservation: the program does not read "
            f"{pool.capacity_reservation}: its instance type must be {pool.instance_type}, and "
            f"instances launch only in its Availability Zone and only up to its size (max "
            f"{pool.max_size}); launches elsewhere or beyond it fail and Auto Scaling retries")
        if pool.capacity_block:
            # Auto Scaling User Guide, "Use Capacity Blocks for machine learning workloads":
            # EC2 terminates instances still running 30 minutes before the block's end.
            warnings.append(
                f"{key}.capacityBlock: the program does not follow the block's start or end: "
                "instances launch only while it is active, and EC2 terminates those still "
                "running 30 minutes before it ends; set the pool's min to 0 and let its nodes "
                "drain before then")
    return warnings
