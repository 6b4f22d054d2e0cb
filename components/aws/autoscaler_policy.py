"""The controllers' permission to resize the pools for cluster-autoscaler
(components/addons/cluster_autoscaler.py), which runs on a controller with its instance's
role: the recommended policy of CA's AWS provider (cluster-autoscaler/cloudprovider/aws/
README.md:34-69 at cluster-autoscaler-1.36.1, "Full Cluster Autoscaler Features Policy
(Recommended)"), its second statement restricted as the README asks (:29-32, :37-38): to
groups in the stack's region that carry this cluster's tag. The pools' roles never get it."""

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from config.pool_tags import cluster_tag

# The README's first statement, read-only, on every resource (Describe* calls accept no
# resource-level restriction). Without eks:DescribeNodegroup: CA calls it only for EKS
# managed node groups (README.md:110), and these are plain groups.
DESCRIBE_ACTIONS = ("autoscaling:DescribeAutoScalingGroups",
                    "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations",
                    "autoscaling:DescribeScalingActivities",
                    "ec2:DescribeImages", "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplateVersions",
                    "ec2:GetInstanceTypesFromInstanceRequirements")
# The second: what changes a group.
SCALE_ACTIONS = ("autoscaling:SetDesiredCapacity",
                 "autoscaling:TerminateInstanceInAutoScalingGroup")


def autoscaler_policy(cluster_name: str, region: str) -> dict:
    """The policy document. The condition is the group's tag that names the cluster
    (autoscaling:ResourceTag/<key>, https://docs.aws.amazon.com/autoscaling/ec2/userguide/
    tag-security.html), the tag CA itself discovers the groups by; any value, as discovery
    takes any (README.md "Auto-Discovery Setup")."""
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "DescribeGroups", "Effect": "Allow", "Action": list(DESCRIBE_ACTIONS),
         "Resource": "*"},
        {"Sid": "ResizeThisClustersGroups", "Effect": "Allow", "Action": list(SCALE_ACTIONS),
         "Resource": f"arn:aws:autoscaling:{region}:*:autoScalingGroup:*:autoScalingGroupName/*",
         "Condition": {"StringLike": {
             f"autoscaling:ResourceTag/{cluster_tag(cluster_name)}": "*"}}},
    ]}


def allow_autoscaling(name: str, controller_roles: Sequence[pulumi.Input[str]],
                      cluster_name: str, region: str,
                      opts: pulumi.ResourceOptions) -> list[aws.iam.RolePolicy]:
    """The policy on each controller's role (CA runs on any of them, one at a time)."""
    policy = json.dumps(autoscaler_policy(cluster_name, region))
    return [aws.iam.RolePolicy(f"{name}-{index + 1}" if index else name, role=role,
                               policy=policy, opts=opts)
            for index, role in enumerate(controller_roles)]
