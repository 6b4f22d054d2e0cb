"""The ports each distribution's hosts answer the nodes only on (host_firewall_ports), by
role and CNI, against upstream's lists:
- RKE2: rancher/rke2-docs docs/install/requirements.md, "Inbound Network Rules" (6443 and
  9345 on servers from all nodes; 10250 between all nodes; 2379-2381 between servers) and
  its Canal tab (8472/udp, 9099; WireGuard 51820/51821 only with that backend).
- k0s: docs/networking.md at v1.36.3+k0s.2, "Required ports and protocols" (2380, 9443 and
  8132 on controllers; 10250 on every worker; 179/tcp for kube-router, 4789/udp for Calico).
The API's port (users reach it) and NodePorts are never among them."""

import copy

import pytest

from components.common.step_text import step_inputs, whole_text
from components.distributions import distribution_for, distribution_settings
from config.hosts import Host
from preview.engine import unwrap_secrets
from tests.components.conftest import settings_for
from tests.builders import bare_metal_config, shared_preview


def _distribution(name: str, cni: str = "calico"):
    values = copy.deepcopy(bare_metal_config())
    values["kubernetes"] = {"distribution": name}
    values["network"]["cni"] = cni
    return distribution_for(distribution_settings(settings_for(values)))


def _host(role: str) -> Host:
    return Host(name="h", address="192.168.2.9", role=role)


def _ports(distribution, role: str) -> set[tuple[int, str]]:
    return set(distribution.host_firewall_ports(_host(role)).values())


@pytest.mark.parametrize("role, expected", [
    ("worker", {(10250, "tcp"), (8472, "udp"), (9099, "tcp")}),
    ("controller", {(9345, "tcp"), (2379, "tcp"), (2380, "tcp"), (2381, "tcp"),
                    (10250, "tcp"), (8472, "udp"), (9099, "tcp")}),
])
def test_rke2_hosts_answer_the_nodes_only_on_its_inbound_rules(role, expected):
    assert _ports(_distribution("rke2"), role) == expected


@pytest.mark.parametrize("cni, role, expected", [
    ("calico", "worker", {(10250, "tcp"), (4789, "udp")}),
    ("kuberouter", "worker", {(10250, "tcp"), (179, "tcp")}),
    ("calico", "controller", {(2380, "tcp"), (9443, "tcp"), (8132, "tcp")}),
    ("kuberouter", "controller+worker", {(2380, "tcp"), (9443, "tcp"), (8132, "tcp"),
                                          (10250, "tcp"), (179, "tcp")}),
])
def test_k0s_hosts_answer_the_nodes_only_on_its_required_ports(cni, role, expected):
    assert _ports(_distribution("k0s", cni), role) == expected


@pytest.mark.parametrize("name", ["k0s", "rke2"])
def test_the_api_and_nodeports_stay_open_to_users(name):
    for role in ("worker", "controller", "controller+worker"):
        ports = {port for port, _ in _ports(_distribution(name), role)}
        assert 6443 not in ports and not any(30000 <= port <= 32767 for port in ports)


def test_preflight_names_the_same_ports_in_its_refusal_of_firewalld():
    values = bare_metal_config()
    plan = shared_preview(values)
    distribution = _distribution("k0s")
    for host in values["hosts"]:
        stdin = whole_text(unwrap_secrets(plan.named(f"{host['name']}-preflight").inputs["stdin"]))
        wanted = set(distribution.host_firewall_ports(Host(**host)).values())
        given = step_inputs(stdin)["CLUSTER_PORTS"].split()
        assert {(int(port), protocol) for port, protocol in (w.split("/") for w in given)} == wanted
        assert given == sorted(given, key=lambda word: int(word.split("/")[0]))
