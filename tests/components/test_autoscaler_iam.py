"""Who may resize the pools' groups, evaluated (tests/iam_evaluator.py, AWS's documented
logic) on the roles and policies a cloud stack's plan gives them: the controllers' roles may
set the size of, and terminate instances in, this cluster's groups only; the pools' roles
may not; and the policy is the recommended one of cluster-autoscaler's AWS provider
(cloudprovider/aws/README.md at cluster-autoscaler-1.36.1)."""

import functools
import json
import re

import pytest

from components.aws.autoscaler_policy import DESCRIBE_ACTIONS, SCALE_ACTIONS
from config import versions
from config.pool_tags import cluster_tag
from tests.builders import PROJECT_DIR, cloud_config, example_plan, preview
from tests.components.test_iam_evaluation import ACCOUNT, Stack
from tests.iam_evaluator import ALLOW, IMPLICIT_DENY, Request, evaluate

REGION = "us-west-2"


def group_arn(name: str, region: str = REGION) -> str:
    return (f"arn:aws:autoscaling:{region}:{ACCOUNT}:autoScalingGroup:"
            f"0c1e7a9e-1111-2222-3333-444455556666:autoScalingGroupName/{name}")


def tagged(cluster: str) -> dict:
    return {f"autoscaling:ResourceTag/{cluster_tag(cluster)}": "owned",
            "autoscaling:ResourceTag/k8s.io/cluster-autoscaler/enabled": "true"}


@functools.cache
def stack(distribution: str = "rke2", controllers: int = 1) -> Stack:
    values = cloud_config()
    values["kubernetes"] = {"distribution": distribution}
    values["pools"].append({"name": "big", "instanceType": "p4d.24xlarge", "count": 1,
                            "gpus": 8})
    if controllers > 1:
        values["aws"]["vpc"] = {"availabilityZones": controllers}
        values["kubernetes"]["controlPlane"] = {"replicas": controllers}
    return Stack(preview(values))


def controllers(found: Stack) -> list:
    return [p for name, p in found.roles.items() if "control-plane-host" in name
            and name.endswith("-role")]


def pool_nodes(found: Stack) -> list:
    return [p for name, p in found.roles.items() if name.endswith("-node")]


@pytest.mark.parametrize("distribution, replicas", [("rke2", 1), ("rke2", 3), ("k0s", 1)])
def test_the_controllers_resize_this_cluster_s_groups_only(distribution, replicas):
    found = stack(distribution, replicas)
    roles = controllers(found)
    assert len(roles) == replicas
    for role in roles:
        for action in SCALE_ACTIONS:
            assert evaluate(role, Request(action, group_arn("test-gpu"), tagged("test"))) \
                == ALLOW, (role.name, action)
            # Another cluster's group, an untagged one, one of another region.
            assert evaluate(role, Request(action, group_arn("prod-gpu"), tagged("prod"))) \
                == IMPLICIT_DENY
            assert evaluate(role, Request(action, group_arn("web"), {})) == IMPLICIT_DENY
            assert evaluate(role, Request(action, group_arn("test-gpu", "eu-west-1"),
                                          tagged("test"))) == IMPLICIT_DENY
        for action in DESCRIBE_ACTIONS:
            assert evaluate(role, Request(action, "*")) == ALLOW
        # Nothing else of a group: not its size limits, not its deletion, not its tags.
        for action in ("autoscaling:UpdateAutoScalingGroup",
                       "autoscaling:DeleteAutoScalingGroup", "autoscaling:CreateOrUpdateTags",
                       "ec2:TerminateInstances"):
            assert evaluate(role, Request(action, group_arn("test-gpu"), tagged("test"))) \
                == IMPLICIT_DENY, action


@pytest.mark.parametrize("distribution", ["rke2", "k0s"])
def test_the_pools_roles_may_not_resize_any_group(distribution):
    found = stack(distribution)
    nodes = pool_nodes(found)
    assert len(nodes) == 2
    for node in nodes:
        for action in (*SCALE_ACTIONS, "autoscaling:DescribeAutoScalingGroups"):
            assert evaluate(node, Request(action, group_arn("test-gpu"), tagged("test"))) \
                == IMPLICIT_DENY, (node.name, action)


def test_no_role_gets_it_where_no_autoscaler_runs():
    """Without pools (the example hybrid stack) no cluster-autoscaler and no grant."""
    plan = example_plan("prod")
    found = Stack(plan)
    for role in found.roles.values():
        assert evaluate(role, Request(SCALE_ACTIONS[0], group_arn("prod-gpu"), tagged("prod"))) \
            == IMPLICIT_DENY, role.name
    assert not [r for r in plan.resources if "cluster-autoscaler" in r.name]


def test_the_policy_is_the_readme_s_recommended_one():
    """README.md "Full Cluster Autoscaler Features Policy (Recommended)": the first statement's
    actions but eks:DescribeNodegroup (EKS managed node groups only), the second's exactly."""
    readme = (PROJECT_DIR / versions.CLUSTER_AUTOSCALER_SOURCE /
              "cluster-autoscaler/cloudprovider/aws/README.md").read_text()
    section = readme.split("#### Full Cluster Autoscaler Features Policy (Recommended)")[1]
    document = json.loads(re.search(r"```json\n(.*?)```", section, re.S)[1])
    describe, scale = document["Statement"]
    assert set(describe["Action"]) - {"eks:DescribeNodegroup"} == set(DESCRIBE_ACTIONS)
    assert set(scale["Action"]) == set(SCALE_ACTIONS)
