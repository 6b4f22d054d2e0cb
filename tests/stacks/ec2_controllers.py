"""What the tests of three EC2 controllers share (test_ha_hybrid.py, test_ha_cloud.py):
their names and addresses, the load balancer's, a stack of them, and readers of the plan."""

import yaml

from contract import ports
from preview import aws_mocks
from preview.engine import unwrap_secrets as unwrap

DISTRIBUTIONS = ("k0s", "rke2")
CONTROLLERS = ("control-plane", "control-plane-2", "control-plane-3")
# .10 of each zone's subnet (config.cloud.controller_addresses), the load balancer's .11.
ADDRESSES = ("10.20.0.10", "10.20.1.10", "10.20.2.10")
BALANCER = ("10.20.0.11", "10.20.1.11", "10.20.2.11")
ENDPOINT = BALANCER[0]
BALANCED = {"k0s": {ports.KUBERNETES_API, ports.K0S_JOIN_API, ports.KONNECTIVITY},
            "rke2": {ports.KUBERNETES_API, ports.RKE2_SUPERVISOR}}


def three_controllers(values: dict, distribution: str) -> dict:
    """The AWS stack `values` with three controllers, one per zone, of `distribution`, and
    a user (whose kubeconfig names the endpoint)."""
    values["kubernetes"] = {"distribution": distribution, "controlPlane": {"replicas": 3}}
    values["aws"]["vpc"] = {"availabilityZones": 3}
    values["access"] = {"teams": [{"name": "vision"}],
                        "users": [{"name": "alice", "namespaces": ["vision"]}]}
    return values


def outputs(plan, name: str) -> dict:
    """What the preview's AWS answered for the resource `name` (preview/aws_mocks.py)."""
    record = plan.named(name)
    return aws_mocks.resource(record.type, record.name, record.inputs)[1]


def runs_on(plan, name: str) -> str:
    return unwrap(plan.named(name).inputs["connection"])["host"]


def apiserver_targets(plan) -> list[list[str]]:
    """The targets of each Prometheus job that scrapes the API servers."""
    configs = [yaml.safe_load(text) for r in plan.of_type("kubernetes:core/v1:ConfigMap")
               for name, text in (r.inputs.get("data") or {}).items()
               if name == "prometheus.yml"]
    return [sorted(t for s in job["static_configs"] for t in s["targets"])
            for config in configs for job in config["scrape_configs"]
            if job["job_name"] == "kubernetes-apiservers"]


def attached(plan) -> dict[str, set[str]]:
    """The instance ids in each target group of the load balancer, by group name."""
    return {group.name: {r.inputs["targetId"] for r in plan.of_type(
        "aws:lb/targetGroupAttachment:TargetGroupAttachment")
        if r.inputs["targetGroupArn"] == outputs(plan, group.name)["arn"]}
        for group in plan.of_type("aws:lb/targetGroup:TargetGroup")}
