"""The security group rules that let the on-prem side reach a hybrid stack's pools
(tests/stacks/test_hybrid_pools.py), as `pulumi up` would ask EC2 for them: each rule's
inputs sent through boto3 to moto's EC2 on loopback (AuthorizeSecurityGroupIngress), then
read back as EC2 describes them. botocore checks the calls against the API's shape; moto
(5.2) keeps the ICMP type and code (FromPort 3, ToPort 4: "fragmentation needed") and IP
protocol 4. Nothing here leaves 127.0.0.1."""

import pytest

from tests.builders import shared_preview
from tests.components.aws_fakes import SETUP, boto3_client, moto_on_loopback
from tests.stacks.test_hybrid_pools import INGRESS, k0s_values

pytestmark = pytest.mark.tools


def permission(inputs: dict) -> dict:
    """An ingress rule's inputs (aws.vpc.SecurityGroupIngressRule) in the EC2 API's shape."""
    found = {"IpProtocol": inputs["ipProtocol"],
             "IpRanges": [{"CidrIp": inputs["cidrIpv4"], "Description": inputs["description"]}]}
    if "fromPort" in inputs:
        found.update(FromPort=int(inputs["fromPort"]), ToPort=int(inputs["toPort"]))
    else:
        # A protocol without ports (IP in IP): EC2 takes the rule without them; moto 5.2.5
        # needs a number (moto/ec2/models/security_groups.py:64-66, int(from_port) for every
        # protocol but -1), so the test sends -1, "all", as EC2 describes such a rule.
        assert inputs["ipProtocol"] == "4", inputs
        found.update(FromPort=-1, ToPort=-1)
    return found


def test_ec2_takes_the_pools_and_the_controllers_rules_as_the_program_means_them():
    """The pools' group: from on-prem, the VPN server's ICMP, and, from the controllers
    (k0s's are nodes on the AWS layouts), their kubelet and kube-router's BGP and IP in IP;
    the controller's group: the same from the on-prem nodes."""
    plan = shared_preview(k0s_values())
    groups = {"test-network-nodes-": [], "test-control-plane-host-": []}
    for rule in plan.of_type(INGRESS):
        for prefix, wanted in groups.items():
            if rule.name.startswith(prefix) and "cidrIpv4" in rule.inputs:
                wanted.append(permission(rule.inputs))
    assert all(groups.values())
    got = {}
    with moto_on_loopback() as endpoint:
        ec2 = boto3_client("ec2", endpoint, SETUP)
        vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
        for prefix, wanted in groups.items():
            group = ec2.create_security_group(GroupName=prefix, Description=prefix,
                                              VpcId=vpc)["GroupId"]
            for one in wanted:
                ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[one])
            [described] = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
            got[prefix] = {(p["IpProtocol"], p.get("FromPort"), p.get("ToPort"), r["CidrIp"])
                           for p in described["IpPermissions"] for r in p["IpRanges"]}
            assert len(got[prefix]) == len(wanted), prefix
    nodes, controller = got["test-network-nodes-"], got["test-control-plane-host-"]
    assert ("icmp", 3, 4, "10.20.0.10/32") in nodes
    assert ("4", -1, -1, "192.168.2.2/32") in nodes
    assert ("tcp", 179, 179, "192.168.2.3/32") in nodes
    assert {("4", -1, -1, "10.20.0.10/32"), ("tcp", 10250, 10250, "10.20.0.10/32")} <= nodes
    assert {("4", -1, -1, "192.168.2.2/32"), ("tcp", 179, 179, "192.168.2.3/32")} <= controller
