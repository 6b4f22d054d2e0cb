"""Config rules of the EC2 pools that scale, on spot and reserved capacity: size bounds,
capacity keys, extra instance types held to the pinned GPU table, capacity reservation ids
and the tags cluster-autoscaler reads, within AWS's limits. All problems at once, by key."""

import pytest

from config.pool_tags import autoscaler_tags
from tests.builders import cloud_config
from tests.config.loading import loads, problems_of


def pool(**keys) -> dict:
    values = cloud_config()
    values["pools"][0].update(keys)
    return values


def test_a_pool_is_fixed_at_count_unless_told_otherwise():
    [gpu] = loads(cloud_config()).pools
    assert (gpu.min_size, gpu.count, gpu.max_size, gpu.scales) == (2, 2, 2, False)
    assert gpu.capacity == "on-demand" and gpu.capacity_reservation is None


def test_min_count_max_out_of_order_are_all_named():
    assert problems_of(pool(min=3, max=1)) == [
        ("pools[0] (gpu).max", "1 is less than count 2, the size the group starts at"),
        ("pools[0] (gpu).min", "3 is more than count 2, the size the group starts at")]


def test_a_pool_may_scale_from_zero():
    [gpu] = loads(pool(min=0, max=8)).pools
    assert (gpu.min_size, gpu.max_size, gpu.scales) == (0, 8, True)


def test_capacity_keys_belong_to_their_capacity():
    assert problems_of(pool(instanceTypes=["g5.24xlarge"], onDemandBase=1,
                            onDemandPercentage=20, capacityBlock=True)) == [
        ("pools[0] (gpu).capacityBlock", "needs capacityReservation: the Capacity Block's "
                                         "reservation id"),
        ("pools[0] (gpu).instanceTypes", "is only used with capacity spot or mixed (an "
                                         "on-demand pool runs instanceType)"),
        ("pools[0] (gpu).onDemandBase", "is only used with capacity mixed"),
        ("pools[0] (gpu).onDemandPercentage", "is only used with capacity mixed")]


def test_mixed_defaults_to_the_minimum_on_demand_and_the_rest_spot():
    [gpu] = loads(pool(capacity="mixed", min=1, max=6)).pools
    assert (gpu.on_demand_base_size, gpu.on_demand_percentage) == (1, 0)


def test_extra_types_have_the_gpus_of_instance_type():
    # g5.12xlarge: 4 A10G. g5.24xlarge: 4 A10G (fits); g6.12xlarge: 4 L4; g5.48xlarge: 8;
    # g5.12xlarge twice.
    problems = problems_of(pool(capacity="spot", instanceTypes=[
        "g5.24xlarge", "g6.12xlarge", "g5.48xlarge", "g5.12xlarge"]))
    assert [path for path, _ in problems] == [
        "pools[0] (gpu).instanceTypes[1]", "pools[0] (gpu).instanceTypes[2]", "pools[0] (gpu).instanceTypes[3]"]
    assert problems[0][1] == ("'g6.12xlarge' does not have the GPUs of 'g5.12xlarge' (4 A10G, "
                              "amd64) in the pinned table (config/instance_types.py)")


def test_a_named_gpu_model_keeps_the_family():
    # p4d and p4de both have 8 A100s, of 40 and 80 GB: the product label would lie.
    values = pool(instanceType="p4d.24xlarge", gpus=8, gpuModel="NVIDIA-A100-SXM4-40GB",
                  capacity="spot", instanceTypes=["p4de.24xlarge"])
    assert problems_of(values) == [(
        "pools[0] (gpu).instanceTypes[0]", "'p4de.24xlarge' is not of family p4d, and gpuModel "
        "'NVIDIA-A100-SXM4-40GB' labels every node of the pool")]


def test_a_cpu_pool_takes_no_gpu_types():
    values = pool(instanceType="m6i.2xlarge", gpus=0, capacity="spot",
                  instanceTypes=["m5.2xlarge", "g5.2xlarge"])
    assert problems_of(values) == [("pools[0] (gpu).instanceTypes[1]",
                                    "'g5.2xlarge' has NVIDIA GPUs and the pool none")]


@pytest.mark.parametrize("value", ["cr-0123456789abcdef", "cr-0123456789abcdef01",
                                   "cr-0123456789ABCDEF0", " cr-0123456789abcdef0",
                                   "cr-0123456789abcdef0\n", "cr-0123456789abcdef0;true"])
def test_a_capacity_reservation_id_is_matched_whole(value):
    [(path, message)] = problems_of(pool(capacityReservation=value))
    assert path == "pools[0] (gpu).capacityReservation"
    # A line break is refused first by the rule every text follows (config/model_base.py).
    assert "cr- and 17 hex digits" in message or "single line" in message


def test_a_reservation_holds_on_demand_instances_of_one_type():
    values = pool(capacityReservation="cr-0123456789abcdef0", capacity="spot")
    assert problems_of(values) == [("pools[0] (gpu).capacity", "is spot, but a capacity reservation "
                                    "or Capacity Block holds on-demand instances of one type: "
                                    "use on-demand with capacityReservation")]
    [gpu] = loads(pool(capacityReservation="cr-0123456789abcdef0", capacityBlock=True)).pools
    assert gpu.capacity_block


def test_tag_keys_past_awss_128_are_named_by_the_label():
    # 46 characters of prefix: a label key of 83 (62 of prefix, 20 of name) makes 129.
    long_key = "d" * 50 + ".example.com/" + "k" * 20
    values = pool(min=0, max=4, labels={long_key: "x", "example.com/ok": "y"})
    assert problems_of(values) == [(
        f"pools[0] (gpu).labels.{long_key}", "makes the group's tag 'k8s.io/cluster-autoscaler/"
        f"node-template/label/{long_key}' 129 characters long with a value of 1; AWS allows "
        "128 and 256: shorten the key")]
    # One shorter fits: the limit is AWS's, not a margin of ours.
    [gpu] = loads(pool(min=0, max=4, labels={long_key[:-1]: "x"})).pools
    assert max(len(key) for key in autoscaler_tags("dev", gpu)) == 128


def test_a_fixed_pool_is_not_held_to_the_tag_limits():
    long_key = "d" * 50 + ".example.com/" + "k" * 20
    assert loads(pool(labels={long_key: "x"})).pools[0].labels == {long_key: "x"}


def test_a_scaling_pool_has_one_taint_per_key():
    values = pool(min=0, max=4, taints=[
        {"key": "example.com/batch", "effect": "NoSchedule"},
        {"key": "example.com/batch", "effect": "NoExecute"}])
    assert problems_of(values) == [(
        "pools[0] (gpu).taints[1]", "a second taint with key 'example.com/batch': cluster-"
        "autoscaler's node template has one taint per key, so a pool that scales cannot have "
        "two")]


def test_a_group_carries_at_most_fifty_tags():
    values = pool(min=0, max=4, labels={f"example.com/l{n}": "x" for n in range(40)})
    values["aws"]["tags"] = {f"team{n}": "x" for n in range(5)}
    [(path, message)] = problems_of(values)
    # 5 of aws.tags, 3 of the pool's own, 2 for discovery, 44 labels (the pool's 40, pool,
    # capacity, gpu.present, accelerator), 1 for the GPUs.
    assert path == "pools[0] (gpu).labels" and "would carry 55 tags" in message


def test_a_pool_does_not_relabel_its_capacity_or_name():
    # A spot pool labelled on-demand would draw work that must not be interrupted.
    values = pool(capacity="spot", labels={"gpu-cluster/capacity": "on-demand",
                                           "gpu-cluster/pool": "other"})
    assert problems_of(values) == [
        ("pools[0] (gpu).labels.gpu-cluster/capacity", "is the program's own label of a "
         "pool's nodes (its name, its capacity); remove it"),
        ("pools[0] (gpu).labels.gpu-cluster/pool", "is the program's own label of a pool's "
         "nodes (its name, its capacity); remove it")]
