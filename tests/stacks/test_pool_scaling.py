"""Pools that scale, on spot and reserved capacity, through the offline preview: the group
cluster-autoscaler discovers and the node template it reads from the group's tags (read by a
port of its AWS provider's parsers, kubernetes/autoscaler cluster-autoscaler-1.36.1
cluster-autoscaler/cloudprovider/aws/aws_manager.go) is the node the kubelet registers, with
the labels and taints of its join step; the desired capacity is left to cluster-autoscaler;
spot and mixed pools launch through a mixed instances policy; reserved pools target their
reservation or Capacity Block."""

import re

import pytest
import yaml

from tests.builders import cloud_config, shared_preview
from tests.stacks.steps import boot_step

GROUP = "aws:autoscaling/group:Group"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
RESERVATION = "cr-0123456789abcdef0"
TAINT_EFFECT = re.compile("(.*):(?:NoSchedule|NoExecute|PreferNoSchedule)")


def values() -> dict:
    config = cloud_config()
    config["pools"] = [
        {"name": "gpu", "instanceType": "g5.12xlarge", "count": 1, "min": 0, "max": 4,
         "gpus": 4, "gpuModel": "NVIDIA-A10G", "capacity": "mixed",
         "instanceTypes": ["g5.24xlarge"], "onDemandBase": 1, "onDemandPercentage": 25,
         "labels": {"example.com/team": "vision"},
         "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                    {"key": "example.com/batch", "effect": "NoExecute"}]},
        {"name": "block", "instanceType": "p5.48xlarge", "count": 0, "min": 0, "max": 2,
         "gpus": 8, "capacityReservation": RESERVATION, "capacityBlock": True},
        {"name": "cpu", "instanceType": "m6i.2xlarge", "count": 1, "capacity": "spot",
         "instanceTypes": ["m5.2xlarge", "m6a.2xlarge"]},
    ]
    return config


@pytest.fixture(scope="module")
def plan():
    return shared_preview(values())


def of_pool(plan, type_: str, pool: str, cluster: str = "test"):
    [resource] = [r for r in plan.of_type(type_) if r.name.startswith(f"{cluster}-{pool}-")]
    return resource


def tags(group) -> dict[str, tuple[str, bool]]:
    return {t["key"]: (t["value"], t["propagateAtLaunch"]) for t in group.inputs["tags"]}


def template_node(group) -> dict:
    """What cluster-autoscaler 1.36.1 makes of the group's tags for a node it has not seen:
    extractLabelsFromAsg (aws_manager.go:404-424: every key split at the label prefix, the
    part after it), extractTaintsFromAsg (484-507: a value matching the effect pattern,
    split at its first colon), extractAllocatableResourcesFromAsg (441-461)."""
    labels, taints, resources = {}, [], {}
    for key, (value, _) in tags(group).items():
        split = key.split("k8s.io/cluster-autoscaler/node-template/label/")
        if len(split) > 1 and split[1]:
            labels[split[1]] = value
        if TAINT_EFFECT.search(value):  # Go's MatchString: anywhere in the value
            split = key.split("k8s.io/cluster-autoscaler/node-template/taint/")
            if len(split) > 1:
                taint_value, effect = value.split(":", 1)
                taints.append({"key": split[1], "value": taint_value, "effect": effect})
        split = key.split("k8s.io/cluster-autoscaler/node-template/resources/")
        if len(split) > 1 and split[1]:
            resources[split[1]] = value
    return {"labels": labels, "taints": taints, "resources": resources}


def registered_node(plan, pool: str) -> dict:
    """The labels and taints the kubelet registers with: the join step's inputs, in the
    k0s worker's --labels and --taints form (key=value, key=value:effect, key:effect)."""
    join = boot_step(plan, of_pool(plan, TEMPLATE, pool), "join-worker")
    labels = dict(item.split("=", 1) for item in join["NODE_LABELS"].split(","))
    taints = []
    for item in filter(None, join["NODE_TAINTS"].split(",")):
        key_value, effect = item.rsplit(":", 1)
        key, _, value = key_value.partition("=")
        taints.append({"key": key, "value": value, "effect": effect})
    return {"labels": labels, "taints": taints}


def rke2_registered_node(plan, pool: str, cluster: str = "test") -> dict:
    """The same from an RKE2 agent's config.yaml (node-label, node-taint: key=value:effect)."""
    join = boot_step(plan, of_pool(plan, TEMPLATE, pool, cluster), "join-worker")
    config = yaml.safe_load(join["RKE2_CONFIG"])
    taints = []
    for item in config.get("node-taint", []):
        key_value, effect = item.rsplit(":", 1)
        key, _, value = key_value.partition("=")
        taints.append({"key": key, "value": value, "effect": effect})
    return {"labels": dict(item.split("=", 1) for item in config["node-label"]),
            "taints": taints}


def test_an_rke2_pools_template_is_its_agents_node():
    config = values()
    config["kubernetes"] = {"distribution": "rke2"}
    rke2 = shared_preview(config)
    group = of_pool(rke2, GROUP, "gpu")
    template, node = template_node(group), rke2_registered_node(rke2, "gpu")
    assert template["labels"] == node["labels"]
    assert sorted(template["taints"], key=str) == sorted(node["taints"], key=str)
    assert len(node["taints"]) == 2 and node["labels"]["gpu-cluster/capacity"] == "spot"


@pytest.mark.parametrize("pool, gpus", [("gpu", "4"), ("block", "8")])
def test_the_node_template_is_the_node_the_kubelet_registers(plan, pool, gpus):
    group = of_pool(plan, GROUP, pool)
    template, node = template_node(group), registered_node(plan, pool)
    assert template["labels"] == node["labels"]
    assert sorted(template["taints"], key=str) == sorted(node["taints"], key=str)
    assert template["resources"] == {"nvidia.com/gpu": gpus}
    assert node["labels"]["gpu-cluster/pool"] == pool


def test_the_template_names_capacity_gpus_and_taints_as_the_kubelet_gets_them(plan):
    template = template_node(of_pool(plan, GROUP, "gpu"))
    assert template["labels"] == {
        "gpu-cluster/pool": "gpu", "gpu-cluster/capacity": "spot",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A10G",
        "k8s.amazonaws.com/accelerator": "nvidia-a10g", "example.com/team": "vision"}
    assert template["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "example.com/batch", "value": "", "effect": "NoExecute"}]
    assert template_node(of_pool(plan, GROUP, "block"))["labels"]["gpu-cluster/capacity"] \
        == "reserved"


def test_pools_that_scale_are_discovered_and_fixed_ones_are_not(plan):
    for pool in ("gpu", "block"):
        found = tags(of_pool(plan, GROUP, pool))
        # The discovery tags' values are not compared (README.md:167-172).
        assert found["k8s.io/cluster-autoscaler/enabled"] == ("true", False)
        assert found["k8s.io/cluster-autoscaler/test"] == ("owned", False)
        assert all(not propagate for key, (_, propagate) in found.items()
                   if key.startswith("k8s.io/cluster-autoscaler/"))
    fixed = tags(of_pool(plan, GROUP, "cpu"))
    assert not [key for key in fixed if key.startswith("k8s.io/cluster-autoscaler/")]
    assert fixed["gpu-cluster/pool"] == ("cpu", True)


def test_the_desired_capacity_is_cluster_autoscalers_after_creation(plan):
    for pool, sizes in (("gpu", (0, 4, 1)), ("block", (0, 2, 0)), ("cpu", (1, 1, 1))):
        group = of_pool(plan, GROUP, pool)
        assert (group.inputs["minSize"], group.inputs["maxSize"],
                group.inputs["desiredCapacity"]) == sizes
        assert group.ignore_changes == ["desiredCapacity"]


def test_spot_and_mixed_pools_launch_through_a_mixed_instances_policy(plan):
    gpu, cpu = of_pool(plan, GROUP, "gpu"), of_pool(plan, GROUP, "cpu")
    template = of_pool(plan, TEMPLATE, "gpu")
    for group in (gpu, cpu):
        assert "launchTemplate" not in group.inputs
    policy = gpu.inputs["mixedInstancesPolicy"]
    assert policy["instancesDistribution"] == {
        "onDemandAllocationStrategy": "prioritized", "onDemandBaseCapacity": 1,
        "onDemandPercentageAboveBaseCapacity": 25,
        "spotAllocationStrategy": "price-capacity-optimized"}
    assert set(policy["launchTemplate"]["launchTemplateSpecification"]) == \
        {"launchTemplateId", "version"}
    assert template.urn in gpu.property_dependencies["mixedInstancesPolicy"]
    assert [o["instanceType"] for o in policy["launchTemplate"]["overrides"]] == \
        ["g5.12xlarge", "g5.24xlarge"]
    spot = cpu.inputs["mixedInstancesPolicy"]
    assert (spot["instancesDistribution"]["onDemandBaseCapacity"],
            spot["instancesDistribution"]["onDemandPercentageAboveBaseCapacity"]) == (0, 0)
    assert [o["instanceType"] for o in spot["launchTemplate"]["overrides"]] == \
        ["m6i.2xlarge", "m5.2xlarge", "m6a.2xlarge"]
    # The launch template itself buys nothing on the spot market: the group does.
    assert "instanceMarketOptions" not in template.inputs


def test_a_capacity_block_pool_launches_into_its_block_only(plan):
    block = of_pool(plan, TEMPLATE, "block")
    assert block.inputs["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": RESERVATION}}
    assert block.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert block.inputs["instanceType"] == "p5.48xlarge"
    group = of_pool(plan, GROUP, "block")
    assert "mixedInstancesPolicy" not in group.inputs and "launchTemplate" in group.inputs
    for pool in ("gpu", "cpu"):
        assert "capacityReservationSpecification" not in of_pool(plan, TEMPLATE, pool).inputs


def test_the_pools_output_has_their_bounds_and_capacity(plan):
    assert [{k: p[k] for k in ("name", "count", "min", "max", "capacity",
                               "capacityReservation")} for p in plan.outputs["pools"][0]] == [
        {"name": "gpu", "count": 1, "min": 0, "max": 4, "capacity": "mixed",
         "capacityReservation": None},
        {"name": "block", "count": 0, "min": 0, "max": 2, "capacity": "on-demand",
         "capacityReservation": RESERVATION},
        {"name": "cpu", "count": 1, "min": 1, "max": 1, "capacity": "spot",
         "capacityReservation": None}]
