"""The control plane's node ports (RKE2: kubelet 10250, Canal's VXLAN 8472/udp and health
9099, the supervisor 9345; k0s: its join API and konnectivity, and on the AWS layouts, where
its controllers are nodes, their kubelet and kube-router's BGP and IP in IP) are open to the
nodes' own addresses only, never to the office LAN or the VPN range as a whole. RKE2's
inbound rules give "All RKE2 nodes" as their source and warn that the VXLAN port "should not
be exposed" (rancher/rke2-docs docs/install/requirements.md, "Inbound Network Rules")."""

import pytest
import yaml

from components.distributions import distribution_for, distribution_settings
from config import load
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR, example_plan

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def _stack(stack: str) -> dict:
    config = yaml.safe_load((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {key.split(":", 1)[1]: value for key, value in config.items()}


def _control_plane_ports(stack: str) -> dict:
    """The control plane's ports of the example stack's own distribution."""
    file = read_stack(PROJECT_DIR, stack)
    settings = load(file.config, file.secret_keys, file.stack)
    return distribution_for(distribution_settings(settings)).control_plane_ports


def _sources(stack: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for rule in example_plan(stack).of_type(INGRESS):
        if "control-plane-host" in rule.name:
            found.setdefault(rule.inputs["description"], set()).add(rule.inputs["cidrIpv4"])
    return found


@pytest.mark.parametrize("stack", ["rke2", "prod"])
def test_hybrid_node_ports_are_open_to_each_on_prem_node_and_not_the_lan(stack):
    config = _stack(stack)
    ports = _control_plane_ports(stack)
    nodes = {f"{host['address']}/32" for host in config["hosts"]}
    sources = _sources(stack)

    for name in ports:
        assert sources[name] == nodes, f"{stack}: {name} is open to {sorted(sources[name])}"
    # The API stays reachable from the LAN (users, kubectl) and the VPC.
    assert config["network"]["lanCidr"] in sources["kubernetes-api"]


def test_rke2_opens_vxlan_and_the_kubelet_to_no_network():
    sources = _sources("rke2")
    for name in ("canal-vxlan", "kubelet"):
        assert all(cidr.endswith("/32") for cidr in sources[name]), sources[name]


def test_cloud_node_ports_are_open_to_the_vpc_its_pools_get_addresses_in():
    config = _stack("dev")
    sources = _sources("dev")
    ports = _control_plane_ports("dev")
    # k0s's controllers are nodes there: the kubelet and its CNI's overlay too (dev: Calico).
    assert {"kubelet", "calico-vxlan"} <= set(ports)
    for name in ports:
        assert sources[name] == {config["aws"]["vpc"]["cidr"]}
