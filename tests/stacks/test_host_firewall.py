"""The host firewall of on-prem hosts through the offline preview: every on-prem host gets
its host-firewall step (the EC2 control plane none: its security group), whose ruleset
admits the nodes' /32s (and on hybrid the control plane's fixed addresses), never the LAN;
the real nft accepts every example stack's ruleset; the opt-out and the sources config
cannot know are explicit keys the preview warns about."""

import copy
import ipaddress

import pytest

from components.distributions import distribution_for, distribution_settings
from components.layouts.over_ssh import host_firewall_ruleset, host_firewall_sources
from config.firewall import firewall_warnings
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.config.loading import loads, problem_lines
from tests.stacks.nft import nft_check
from tests.builders import (PROJECT_DIR, bare_metal_config, cloud_config, example_plan,
                            hybrid_config, own_warnings, shared_preview)
from config.loader import load
from preview import vpn_placeholder

STEP = "-host-firewall"


def _settings(stack: str):
    stack_file = read_stack(PROJECT_DIR, stack)
    return load(stack_file.config, stack_file.secret_keys, stack)


def _steps(plan) -> dict[str, str]:
    return {r.name[:-len(STEP)]: r.inputs["stdin"] for r in plan.resources
            if r.name.endswith(STEP) and "stdin" in r.inputs}


@pytest.mark.parametrize("stack", ["lab", "prod", "rke2"])
def test_every_on_prem_host_gets_its_firewall_and_the_control_plane_instance_none(stack):
    settings = _settings(stack)
    steps = _steps(example_plan(stack))
    assert set(steps) == {host.name for host in settings.hosts}, sorted(steps)
    for stdin in steps.values():
        assert "HOST_FIREWALL_RULESET" in stdin and "table inet gpu_cluster {" in stdin


def test_the_cloud_layout_has_no_host_firewall():
    assert _steps(example_plan("dev")) == {}


@pytest.mark.parametrize("stack, expected", [
    # Bare metal: the four hosts.
    ("lab", {"192.168.2.1/32", "192.168.2.2/32", "192.168.2.3/32", "192.168.2.4/32"}),
    # Hybrid with the program's VPN server: the hosts, the control plane's private address
    # and the server's tunnel address (10.8.0.1 of vpn.tunnelCidr's default 10.8.0.0/24).
    ("prod", {"192.168.10.2/32", "192.168.10.11/32", "192.168.10.12/32", "10.20.0.10/32",
              "10.8.0.1/32"}),
    # client-to-existing: the hosts and the control plane's private address; neither the
    # existing server (192.168.30.5: all of its VPN users behind it) nor a tunnel range.
    ("rke2", {"192.168.30.11/32", "192.168.30.12/32", "192.168.30.21/32", "10.30.0.10/32"}),
])
def test_node_ports_admit_the_nodes_addresses_and_never_the_lan(stack, expected):
    settings = _settings(stack)
    sources = host_firewall_sources(settings)
    assert set(sources) == expected
    lan = ipaddress.ip_network(settings.network.lan_cidr)
    assert all(ipaddress.ip_network(s).num_addresses == 1 for s in sources)
    assert str(lan) not in sources


@pytest.mark.parametrize("stack", [s for s in EXAMPLE_STACKS if s != "dev"])
def test_nft_accepts_every_hosts_ruleset(stack):
    """The real consumer: `nft -c -f` (tests/stacks/nft.py)."""
    settings = _settings(stack)
    distribution = distribution_for(distribution_settings(settings))
    for host in settings.hosts:
        text = host_firewall_ruleset(settings, distribution, host)
        complaint = nft_check(text)
        assert not complaint, f"{stack} {host.name}: {complaint}\n{text}"


def test_rke2s_vxlan_and_kubelet_are_for_the_nodes_on_each_host():
    settings = _settings("rke2")
    distribution = distribution_for(distribution_settings(settings))
    for host in settings.hosts:
        text = host_firewall_ruleset(settings, distribution, host)
        assert "elements = { 9099, 10250 }" in text and "elements = { 8472 }" in text, text
        assert "\t\tip saddr @node_sources accept\n\t\tip saddr @cluster_networks accept\n" \
               "\t\tcounter drop\n" in text
        rules = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        assert [line for line in rules if "drop" in line] == ["\t\tcounter drop"]


def test_opting_out_removes_the_step_and_the_preview_warns():
    values = copy.deepcopy(bare_metal_config())
    values["hostFirewall"] = {"enabled": False}
    plan = shared_preview(values)
    assert _steps(plan) == {}
    [warning] = [w for w in own_warnings(plan) if "hostFirewall" in w]
    assert warning.startswith("gpu-cluster:hostFirewall.enabled is false: on-prem hosts keep "
                              "no firewall of the program's")
    on = shared_preview(copy.deepcopy(bare_metal_config()))
    assert set(_steps(on)) == {"controller", "gpu000", "gpu001", "gpu002"}
    assert not [w for w in own_warnings(on) if "hostFirewall" in w]


def test_the_step_has_a_delete_that_removes_the_table():
    plan = shared_preview(copy.deepcopy(bare_metal_config()))
    step = next(r for r in plan.resources if r.name == "gpu000" + STEP)
    assert step.inputs.get("delete"), "no delete command: turning the key off would leave it"


def test_client_to_existing_warns_about_the_source_config_cannot_know():
    values = copy.deepcopy(hybrid_config())
    values["vpn"] = {"mode": "client-to-existing", "existingServerAddress": "192.168.2.254"}
    values["vpnClientProfile"] = vpn_placeholder.client_profile()
    settings = loads(values)
    [warning] = firewall_warnings("hybrid", settings.host_firewall, "client-to-existing",
                                  "10.0.0.10")
    assert warning.startswith("gpu-cluster:hostFirewall.extraSources is empty on vpn.mode "
                              "client-to-existing: the on-prem hosts' node ports admit the "
                              "control plane's private address 10.0.0.10")
    values["hostFirewall"] = {"extraSources": ["172.27.232.2/32"]}
    settings = loads(values)
    assert "172.27.232.2/32" in host_firewall_sources(settings)
    [warning] = firewall_warnings("hybrid", settings.host_firewall, "client-to-existing",
                                  "10.0.0.10")
    assert warning.startswith("gpu-cluster:hostFirewall.extraSources: 172.27.232.2/32 reach "
                              "the on-prem hosts' node ports")


def test_the_rke2_example_preview_warns_about_its_unknown_tunnel_address():
    warnings = [w for w in example_plan("rke2").warnings if "hostFirewall" in w]
    assert len(warnings) == 1 and "client-to-existing" in warnings[0], warnings


@pytest.mark.parametrize("change, line", [
    (lambda v: v.update(hostFirewall={"extraSources": ["192.168.2.0/16"]}),
     "gpu-cluster:hostFirewall.extraSources[0]: '192.168.2.0/16' is not an IPv4 network"),
    (lambda v: v.update(hostFirewall={"enabled": False, "extraSources": ["10.8.0.6/32"]}),
     "gpu-cluster:hostFirewall.extraSources: is only used while hostFirewall.enabled is true"),
    (lambda v: v.update(hostFirewall={"allow": []}),
     "gpu-cluster:hostFirewall.allow:"),
])
def test_bad_firewall_keys_are_refused_naming_the_key(change, line):
    values = copy.deepcopy(bare_metal_config())
    change(values)
    lines = problem_lines(values)
    assert any(text.startswith(line) for text in lines), lines


def test_extra_sources_on_the_cloud_layout_are_refused():
    values = copy.deepcopy(cloud_config())
    values["hostFirewall"] = {"extraSources": ["10.8.0.6/32"]}
    assert "gpu-cluster:hostFirewall.extraSources: is only used by the bare-metal and hybrid " \
           "layouts (cloud's machines are reached through their security groups)" \
           in problem_lines(values)
