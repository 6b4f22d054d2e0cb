"""The AWS cloud controller manager in whole stacks, through the offline preview: installed
on RKE2's AWS layouts through the nodes' provider (nothing waits for all nodes before it),
its IAM policy on every controller's role and on no pool node's (tests/iam_evaluator.py),
the EC2 nodes' kubelets with cloud provider external and the on-prem ones without; on k0s
too, whose EC2 controllers there run a tainted kubelet for it."""

import pytest
import yaml

from components.aws import cloud_controller
from components.common.step_text import step_inputs
from components.distributions.k0s import CONTROLLER_LABEL
from preview.engine import unwrap_secrets as unwrap
from tests.builders import cloud_config, example_plan, preview
from tests.components.test_iam_evaluation import Stack
from tests.iam_evaluator import ALLOW, IMPLICIT_DENY, Request, evaluate
from tests.stacks.steps import boot_step

CHART = "kubernetes:helm.sh/v4:Chart"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


@pytest.fixture(scope="module")
def cloud():
    values = cloud_config()
    values.setdefault("kubernetes", {})["distribution"] = "rke2"
    return preview(values)


@pytest.fixture(scope="module")
def hybrid():
    return example_plan("rke2")


def steps(plan) -> dict[str, dict]:
    return {r.name: step_inputs(unwrap(r.inputs["stdin"]))
            for r in plan.of_type("command:remote:Command")}


@pytest.mark.parametrize("layout", ["cloud", "hybrid"])
def test_it_is_installed_through_the_nodes_provider(layout, request):
    plan = request.getfixturevalue(layout)
    [chart] = [c for c in plan.of_type(CHART) if c.name.endswith("-cloud-controller-chart")]
    assert chart.inputs["chart"].endswith("charts/aws-cloud-controller-manager")
    [config_map] = [r for r in plan.of_type("kubernetes:core/v1:ConfigMap")
                    if r.inputs["metadata"]["name"] == cloud_controller.CLOUD_CONFIG_MAP]
    for resource in (chart, config_map):
        assert resource.provider.split("::")[-2].endswith("-kubernetes-nodes"), resource.name
        # Every node waits for... nothing of it, and it for no node: no deadlock.
        assert not any(name.endswith("-nodes-ready")
                       for name in plan.all_dependencies(resource)), resource.name
    cluster = plan.named(chart.name).inputs["values"]
    assert cluster["hostNetworking"] is True


def test_every_controller_role_may_describe_instances_and_no_pool_role(cloud):
    stack = Stack(cloud)
    controllers = [p for name, p in stack.roles.items() if "control-plane-host" in name]
    pools = [p for name, p in stack.roles.items() if name.endswith("-node")]
    assert controllers and pools
    for action in cloud_controller.EC2_ACTIONS:
        for who in controllers:
            assert evaluate(who, Request(action, "*")) == ALLOW, (who.name, action)
    for who in pools:
        assert not [st for doc in who.policies for st in doc["Statement"]
                    if st.get("Sid") == "CloudControllerDescribesInstances"], who.name
        # (ec2:DescribeAvailabilityZones they have for EFS's mount helper, components/aws/efs.py.)
        for action in ("ec2:DescribeInstances", "ec2:DescribeInstanceTopology"):
            assert evaluate(who, Request(action, "*")) == IMPLICIT_DENY, (who.name, action)
    # No load balancer for anyone's Service of type LoadBalancer, no volume, no route.
    for action in ("elasticloadbalancing:CreateLoadBalancer", "ec2:CreateRoute",
                   "ec2:CreateSecurityGroup", "ec2:CreateTags"):
        for who in controllers:
            assert evaluate(who, Request(action, "*")) == IMPLICIT_DENY, (who.name, action)


def test_on_hybrid_the_controller_role_gets_the_same_grant_alone(hybrid):
    stack = Stack(hybrid)
    granted = {name for name, who in stack.roles.items()
               if evaluate(who, Request("ec2:DescribeInstanceTopology", "*")) == ALLOW}
    assert granted and all("control-plane-host" in name for name in granted), granted


def test_the_ec2_nodes_run_an_external_cloud_provider_and_the_on_prem_ones_do_not(hybrid):
    rendered = steps(hybrid)
    [install] = [s for name, s in rendered.items() if name.endswith("-install-controller")]
    assert install["RKE2_CLOUD_PROVIDER"] == "aws" and install["SSM_READER"]
    joins = {name: s for name, s in rendered.items() if name.endswith("-join-worker")}
    assert joins
    for name, join in joins.items():
        # On-prem: no providerID from EC2, no uninitialized taint, nothing for the cloud
        # node controller to take up (components/aws/cloud_controller.py).
        assert "RKE2_CLOUD_PROVIDER" not in join, name
        assert "cloud-provider-name" not in join["RKE2_CONFIG"], name


def test_a_pool_instance_joins_with_its_provider_id(cloud):
    [template] = cloud.of_type(TEMPLATE)
    join = boot_step(cloud, template, "join-worker")
    assert join["RKE2_CLOUD_PROVIDER"] == "aws" and join["SSM_READER"]
    assert "cloud-provider-name" not in yaml.safe_load(join["RKE2_CONFIG"])


def test_on_k0s_the_ec2_controllers_are_tainted_nodes_it_alone_runs_on():
    """k0s's EC2 controllers install with `--enable-worker` and k0s's control-plane taint,
    their kubelets and the pools' with cloud provider external; each controller labels its
    own node with a label no kubelet may set on itself, which the chart selects
    (components/distributions/k0s.py CONTROLLER_LABEL; k0s/install-controller.sh)."""
    plan = example_plan("dev")
    [chart] = [c for c in plan.of_type(CHART) if c.name.endswith("-cloud-controller-chart")]
    assert chart.inputs["values"]["nodeSelector"] == {CONTROLLER_LABEL: "true"}
    assert CONTROLLER_LABEL.startswith("node-restriction.kubernetes.io/")
    [instance] = plan.of_type("aws:ec2/instance:Instance")
    install = boot_step(plan, instance, "install-controller")
    assert install["K0S_ENABLE_WORKER"] == "true" and install["K0S_CONTROL_PLANE_TAINT"] == "true"
    assert install["K0S_CLOUD_PROVIDER"] == "aws" and install["SSM_READER"]
    assert install["CONTROLLER_NODE_LABEL"] == f"{CONTROLLER_LABEL}=true"
    assert install["NODE_NAME"] == "control-plane"
    templates = plan.of_type(TEMPLATE)
    assert templates
    for template in templates:
        join = boot_step(plan, template, "join-worker")
        assert join["K0S_CLOUD_PROVIDER"] == "aws" and join["SSM_READER"], template.name
        assert "CONTROLLER_NODE_LABEL" not in join


def test_on_k0s_hybrid_the_controller_s_ssh_install_is_the_same_and_on_prem_kubelets_keep_none():
    rendered = steps(example_plan("prod"))
    [install] = [s for name, s in rendered.items() if name.endswith("-install-controller")]
    assert install["K0S_CLOUD_PROVIDER"] == "aws" and install["K0S_CONTROL_PLANE_TAINT"] == "true"
    joins = {name: s for name, s in rendered.items() if name.endswith("-join-worker")}
    assert joins
    for name, join in joins.items():
        assert "K0S_CLOUD_PROVIDER" not in join, name
