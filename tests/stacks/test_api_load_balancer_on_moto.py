"""The API load balancer of a hybrid stack with three controllers, and the cloud layout's
public one, as `pulumi up` would ask AWS for them: the preview's inputs of the load
balancer, its target groups, their attachments and its listeners sent through boto3 to
moto's ELBv2 on loopback, in a VPC laid out as the plan's (its subnets at their CIDRs, the
controllers at their fixed addresses),
then read back as AWS describes them. botocore checks the calls against the ELBv2 API's
shapes and moto (5.2) the values it models (scheme, a subnet per zone, protocols, health
checks, attributes, target registrations); moto neither keeps a subnet mapping's private
address (moto/elbv2/models.py:763-768 reads its SubnetId only) nor routes traffic.
Nothing here leaves 127.0.0.1."""

import pytest

from contract import ports
from tests.builders import cloud_config, hybrid_config, shared_preview
from tests.components.aws_fakes import SETUP, boto3_client, moto_on_loopback
from tests.stacks.ec2_controllers import (ADDRESSES, BALANCED, BALANCER, outputs,
                                          three_controllers)

pytestmark = pytest.mark.tools

# moto's stand-in image (moto/ec2/resources/amis.json) and its region's zones.
IMAGE = "ami-12c6146b"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")


@pytest.fixture(scope="module")
def moto():
    with moto_on_loopback() as endpoint:
        yield endpoint


def whole(number: float) -> int:
    """A number of the plan (Pulumi's wire format has only floats) as the provider's schema
    types it, an integer."""
    assert number == int(number), number
    return int(number)


def health_check(inputs: dict) -> dict:
    check = inputs["healthCheck"]
    return {"HealthCheckProtocol": check["protocol"], "HealthCheckPort": check["port"],
            "HealthCheckIntervalSeconds": whole(check["interval"]),
            "HealthyThresholdCount": whole(check["healthyThreshold"]),
            "UnhealthyThresholdCount": whole(check["unhealthyThreshold"])}


def on_moto(moto, plan, nlb, suffix: str) -> tuple:
    """The load balancer `nlb` of `plan`, with its target groups, attachments and listeners,
    made in moto as `pulumi up` would ask AWS for them, in a VPC laid out as the plan's.
    Returns its ARN, the plan's instance ids by moto's, and moto's subnet by the plan's."""
    ec2, elb = boto3_client("ec2", moto, SETUP), boto3_client("elbv2", moto, SETUP)
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnets = {}  # the plan's subnet id -> moto's
    for record, zone in zip(plan.of_type_in_tree_order("aws:ec2/subnet:Subnet"), ZONES):
        subnets[outputs(plan, record.name)["id"]] = ec2.create_subnet(
            VpcId=vpc, CidrBlock=record.inputs["cidrBlock"], AvailabilityZone=zone)[
                "Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"{suffix}-api", Description="api",
                                      VpcId=vpc)["GroupId"]
    instances = {}  # the plan's instance id -> moto's
    for record in plan.of_type("aws:ec2/instance:Instance"):
        [instance] = ec2.run_instances(
            ImageId=IMAGE, MinCount=1, MaxCount=1, SubnetId=subnets[record.inputs["subnetId"]],
            PrivateIpAddress=record.inputs["privateIp"])["Instances"]
        instances[outputs(plan, record.name)["id"]] = instance["InstanceId"]
    arn = elb.create_load_balancer(
        Name=f"{nlb.inputs['namePrefix']}{suffix}", Type=nlb.inputs["loadBalancerType"],
        Scheme="internal" if nlb.inputs["internal"] else "internet-facing",
        SecurityGroups=[group],
        SubnetMappings=[{"SubnetId": subnets[m["subnetId"]], **(
            {"PrivateIPv4Address": m["privateIpv4Address"]} if "privateIpv4Address" in m else {})}
                        for m in nlb.inputs["subnetMappings"]])["LoadBalancers"][0][
                             "LoadBalancerArn"]
    elb.modify_load_balancer_attributes(LoadBalancerArn=arn, Attributes=[{
        "Key": "load_balancing.cross_zone.enabled",
        "Value": str(nlb.inputs["enableCrossZoneLoadBalancing"]).lower()}])
    listeners = [r for r in plan.of_type("aws:lb/listener:Listener")
                 if r.inputs["loadBalancerArn"] == outputs(plan, nlb.name)["arn"]]
    forwarded = {action["targetGroupArn"] for r in listeners for action in r.inputs["defaultActions"]}
    groups = {}  # the plan's target group arn -> moto's
    for record in plan.of_type("aws:lb/targetGroup:TargetGroup"):
        inputs = record.inputs
        if outputs(plan, record.name)["arn"] not in forwarded:
            continue
        made = elb.create_target_group(
            Name=f"{inputs['namePrefix']}{suffix}", Protocol=inputs["protocol"],
            Port=whole(inputs["port"]), VpcId=vpc, TargetType=inputs["targetType"],
            **health_check(inputs))["TargetGroups"][0]["TargetGroupArn"]
        elb.modify_target_group_attributes(TargetGroupArn=made, Attributes=[{
            "Key": "preserve_client_ip.enabled", "Value": inputs["preserveClientIp"]}])
        groups[outputs(plan, record.name)["arn"]] = made
    for record in plan.of_type("aws:lb/targetGroupAttachment:TargetGroupAttachment"):
        if record.inputs["targetGroupArn"] in groups:
            elb.register_targets(TargetGroupArn=groups[record.inputs["targetGroupArn"]], Targets=[
                {"Id": instances[record.inputs["targetId"]], "Port": whole(record.inputs["port"])}])
    for record in listeners:
        [action] = record.inputs["defaultActions"]
        elb.create_listener(LoadBalancerArn=arn, Protocol=record.inputs["protocol"],
                            Port=whole(record.inputs["port"]), DefaultActions=[{
                                "Type": action["type"],
                                "TargetGroupArn": groups[action["targetGroupArn"]]}])
    return arn, instances, subnets


def check_forwarding(moto, arn: str, instances: dict, ports: set) -> None:
    """Each listener of the load balancer forwards its port over TCP, client addresses not
    preserved, to a target group of every controller."""
    elb = boto3_client("elbv2", moto, SETUP)
    listeners = elb.describe_listeners(LoadBalancerArn=arn)["Listeners"]
    assert {listener["Port"] for listener in listeners} == ports
    by_id = {moto_id: address for moto_id, address in zip(instances.values(), ADDRESSES)}
    for listener in listeners:
        [action] = listener["DefaultActions"]
        [target_group] = elb.describe_target_groups(
            TargetGroupArns=[action["TargetGroupArn"]])["TargetGroups"]
        assert (target_group["Port"], target_group["Protocol"]) == (listener["Port"], "TCP")
        assert target_group["HealthCheckProtocol"] == "TCP"
        attributes = {a["Key"]: a["Value"] for a in elb.describe_target_group_attributes(
            TargetGroupArn=target_group["TargetGroupArn"])["Attributes"]}
        assert attributes["preserve_client_ip.enabled"] == "false"
        health = elb.describe_target_health(TargetGroupArn=target_group["TargetGroupArn"])
        targets = {d["Target"]["Id"] for d in health["TargetHealthDescriptions"]}
        assert {by_id[t] for t in targets} == set(ADDRESSES)


@pytest.mark.parametrize("distribution", ["k0s", "rke2"])
def test_aws_takes_the_load_balancer_and_forwards_each_port_to_every_controller(
        moto, distribution):
    plan = shared_preview(three_controllers(hybrid_config(), distribution))
    nlb = plan.named("test-api-nlb")

    arn, instances, subnets = on_moto(moto, plan, nlb, f"hybrid-{distribution}")

    elb = boto3_client("elbv2", moto, SETUP)
    [described] = elb.describe_load_balancers(LoadBalancerArns=[arn])["LoadBalancers"]
    assert (described["Type"], described["Scheme"]) == ("network", "internal")
    # One zone each (moto keeps a mapping's subnet, not its address: the addresses are
    # held by test_ha_hybrid.py).
    assert sorted((zone["ZoneName"], zone["SubnetId"]) for zone in
                  described["AvailabilityZones"]) == sorted(zip(ZONES, subnets.values()))
    assert [m["privateIpv4Address"] for m in nlb.inputs["subnetMappings"]] == list(BALANCER)
    check_forwarding(moto, arn, instances, BALANCED[distribution])


def test_aws_takes_the_cloud_layouts_public_load_balancer_for_the_api_alone(moto):
    plan = shared_preview(three_controllers(cloud_config(), "k0s"))
    nlb = plan.named("test-public-api-nlb")

    arn, instances, subnets = on_moto(moto, plan, nlb, "cloud-public")

    elb = boto3_client("elbv2", moto, SETUP)
    [described] = elb.describe_load_balancers(LoadBalancerArns=[arn])["LoadBalancers"]
    assert (described["Type"], described["Scheme"]) == ("network", "internet-facing")
    assert sorted((zone["ZoneName"], zone["SubnetId"]) for zone in
                  described["AvailabilityZones"]) == sorted(zip(ZONES, subnets.values()))
    check_forwarding(moto, arn, instances, {ports.KUBERNETES_API})
