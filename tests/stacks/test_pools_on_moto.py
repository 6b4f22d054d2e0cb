"""The pools of tests/stacks/test_pool_scaling.py as `pulumi up` would ask AWS for them: each
pool's launch template and auto scaling group, from the preview's inputs, sent through boto3
to moto's EC2 and Auto Scaling on loopback, then read back as AWS describes them. botocore
checks the calls against the APIs' shapes (the mixed instances policy, the tags, the launch
template's capacity reservation and market options); moto (5.2) keeps them and launches the
desired capacity, propagating the tags marked so. Nothing here leaves 127.0.0.1."""

import pytest

from tests.builders import shared_preview
from tests.components.aws_fakes import SETUP, boto3_client, moto_on_loopback
from tests.stacks.test_pool_scaling import GROUP, RESERVATION, TEMPLATE, of_pool, values

pytestmark = pytest.mark.tools

# moto's stand-in image (moto/ec2/resources/amis.json).
IMAGE = "ami-12c6146b"


@pytest.fixture(scope="module")
def made():
    """Each pool's group and launch template data as moto describes them, and the tags of
    the instances it launched."""
    plan = shared_preview(values())
    with moto_on_loopback() as endpoint:
        ec2 = boto3_client("ec2", endpoint, SETUP)
        autoscaling = boto3_client("autoscaling", endpoint, SETUP)
        vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.0.0/24",
                                   AvailabilityZone="us-west-2a")["Subnet"]["SubnetId"]
        found = {}
        for pool in ("gpu", "block", "cpu"):
            template, group = of_pool(plan, TEMPLATE, pool), of_pool(plan, GROUP, pool)
            template_id = ec2.create_launch_template(
                LaunchTemplateName=f"test-{pool}", LaunchTemplateData=template_data(
                    template.inputs))["LaunchTemplate"]["LaunchTemplateId"]
            autoscaling.create_auto_scaling_group(**group_request(
                f"test-{pool}", group.inputs, template_id, subnet))
            [described] = autoscaling.describe_auto_scaling_groups(
                AutoScalingGroupNames=[f"test-{pool}"])["AutoScalingGroups"]
            [version] = ec2.describe_launch_template_versions(
                LaunchTemplateId=template_id)["LaunchTemplateVersions"]
            instances = [instance["InstanceId"] for instance in described["Instances"]]
            tags = [{t["Key"]: t["Value"] for t in reservation["Instances"][0].get("Tags", [])}
                    for reservation in ec2.describe_instances(InstanceIds=instances)[
                        "Reservations"]] if instances else []
            found[pool] = (described, version["LaunchTemplateData"], tags)
        yield found


def template_data(inputs: dict) -> dict:
    """The launch template's inputs that say what and how it buys, in the EC2 API's shape."""
    data = {"ImageId": IMAGE, "InstanceType": inputs["instanceType"]}
    if "capacityReservationSpecification" in inputs:
        target = inputs["capacityReservationSpecification"]["capacityReservationTarget"]
        data["CapacityReservationSpecification"] = {
            "CapacityReservationTarget": {"CapacityReservationId":
                                          target["capacityReservationId"]}}
    if "instanceMarketOptions" in inputs:
        data["InstanceMarketOptions"] = {
            "MarketType": inputs["instanceMarketOptions"]["marketType"]}
    return data


def whole(number: float) -> int:
    assert number == int(number), number
    return int(number)


def group_request(name: str, inputs: dict, template_id: str, subnet: str) -> dict:
    """CreateAutoScalingGroup from the group's inputs (the plan's template id is the mocks',
    so moto's is put in its place)."""
    request = {"AutoScalingGroupName": name, "MinSize": whole(inputs["minSize"]),
               "MaxSize": whole(inputs["maxSize"]),
               "DesiredCapacity": whole(inputs["desiredCapacity"]),
               "VPCZoneIdentifier": subnet,
               "Tags": [{"Key": t["key"], "Value": t["value"],
                         "PropagateAtLaunch": t["propagateAtLaunch"]} for t in inputs["tags"]]}
    if "launchTemplate" in inputs:
        request["LaunchTemplate"] = {"LaunchTemplateId": template_id, "Version": "$Latest"}
    if "mixedInstancesPolicy" in inputs:
        policy = inputs["mixedInstancesPolicy"]
        distribution = policy["instancesDistribution"]
        request["MixedInstancesPolicy"] = {
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template_id,
                                                "Version": "$Latest"},
                "Overrides": [{"InstanceType": o["instanceType"]}
                              for o in policy["launchTemplate"]["overrides"]]},
            "InstancesDistribution": {
                "OnDemandAllocationStrategy": distribution["onDemandAllocationStrategy"],
                "OnDemandBaseCapacity": whole(distribution["onDemandBaseCapacity"]),
                "OnDemandPercentageAboveBaseCapacity":
                    whole(distribution["onDemandPercentageAboveBaseCapacity"]),
                "SpotAllocationStrategy": distribution["spotAllocationStrategy"]}}
    return request


def test_a_mixed_pool_is_a_mixed_instances_group(made):
    group, _, _ = made["gpu"]
    assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (0, 4, 1)
    policy = group["MixedInstancesPolicy"]
    assert [o["InstanceType"] for o in policy["LaunchTemplate"]["Overrides"]] == \
        ["g5.12xlarge", "g5.24xlarge"]
    assert policy["InstancesDistribution"] == {
        "OnDemandAllocationStrategy": "prioritized", "OnDemandBaseCapacity": 1,
        "OnDemandPercentageAboveBaseCapacity": 25,
        "SpotAllocationStrategy": "price-capacity-optimized"}


def test_cluster_autoscaler_finds_the_tags_on_the_group_and_not_on_instances(made):
    group, _, instance_tags = made["gpu"]
    tags = {t["Key"]: (t["Value"], t["PropagateAtLaunch"]) for t in group["Tags"]}
    assert tags["k8s.io/cluster-autoscaler/enabled"] == ("true", False)
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/example.com/batch"] == \
        (":NoExecute", False)
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == \
        ("4", False)
    assert tags["k8s.io/cluster-autoscaler/node-template/label/gpu-cluster/capacity"] == \
        ("spot", False)
    # The one instance of count 1, tagged with what propagates only.
    [launched] = instance_tags
    assert launched["gpu-cluster/pool"] == "gpu"
    assert not [key for key in launched if key.startswith("k8s.io/cluster-autoscaler/")]


def test_a_capacity_block_pool_launches_into_its_block(made):
    group, data, _ = made["block"]
    assert "MixedInstancesPolicy" not in group and group["DesiredCapacity"] == 0
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": RESERVATION}}
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}


def test_a_fixed_spot_pool_is_not_discovered(made):
    group, data, _ = made["cpu"]
    assert (group["MinSize"], group["MaxSize"]) == (1, 1)
    assert not [t for t in group["Tags"] if t["Key"].startswith("k8s.io/cluster-autoscaler/")]
    assert "InstanceMarketOptions" not in data
    assert group["MixedInstancesPolicy"]["InstancesDistribution"][
        "OnDemandPercentageAboveBaseCapacity"] == 0
