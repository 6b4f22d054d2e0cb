"""The host firewall of on-prem hosts (`gpu-cluster:hostFirewall`): its keys, the rules
across keys, and the preview's warnings. Which ports and which sources it renders is the
composition's (components/layouts/over_ssh.py host_firewall_sources, components/hosts/firewall.py)."""

from typing import Optional

from pydantic import Field

from config.model_base import Section
from config.partial import PartialConfig
from config.problems import Problem
from config.types import IPv4Cidr

ENABLED_KEY = "hostFirewall.enabled"
EXTRA_SOURCES_KEY = "hostFirewall.extraSources"
# Layouts with on-prem hosts prepared over SSH (cloud's machines have security groups only).
FIREWALL_LAYOUTS = ("bare-metal", "hybrid")


class HostFirewallSettings(Section):
    # nftables rules on each on-prem host: the kubelet's, the CNI's and the control plane's
    # node ports answer the cluster's nodes only (docs/layouts.md, "Host firewall"). false: the
    # program leaves the hosts' firewalls to you and removes its own table (warned).
    enabled: bool = True
    """The `host-firewall` step on on-prem hosts: node ports for the nodes only (see [Host
    firewall](layouts.md#host-firewall)); `false` removes its table and is warned."""
    # Networks beyond the nodes' own addresses that reach those ports: on hybrid
    # client-to-existing, the tunnel address the existing VPN server gives the EC2 instance
    # (a /32). Warned.
    extra_sources: list[IPv4Cidr] = Field(default=[], max_length=32)
    """IPv4 networks (e.g. `172.27.232.2/32`) that reach the node ports besides the nodes: on
    `client-to-existing`, the instance's tunnel address from the existing server; warned when set,
    and when empty on `client-to-existing`."""


def firewall_checks(cfg: PartialConfig) -> list[Problem]:
    layout, firewall = cfg.layout, cfg.host_firewall
    if firewall is None or not firewall.extra_sources:
        return []
    if layout not in FIREWALL_LAYOUTS:
        return [Problem(EXTRA_SOURCES_KEY, "is only used by the bare-metal and hybrid layouts "
                        "(cloud's machines are reached through their security groups)")]
    if not firewall.enabled:
        return [Problem(EXTRA_SOURCES_KEY, f"is only used while {ENABLED_KEY} is true")]
    return []


def firewall_warnings(layout: str, firewall: HostFirewallSettings, vpn_mode: Optional[str],
                      control_plane_address: Optional[str]) -> list[str]:
    """The preview's warnings (pulumi.log.warn): the firewall off, sources beyond the nodes,
    and on client-to-existing the source the config cannot know."""
    if layout not in FIREWALL_LAYOUTS:
        return []
    if not firewall.enabled:
        return [f"gpu-cluster:{ENABLED_KEY} is false: on-prem hosts keep no firewall of the "
                "program's, so every machine on the LAN reaches the kubelet (10250), the CNI's "
                "unauthenticated overlay and the control plane's node ports unless your own "
                "firewall stops it"]
    warnings = []
    if firewall.extra_sources:
        warnings.append(f"gpu-cluster:{EXTRA_SOURCES_KEY}: {', '.join(firewall.extra_sources)} "
                        "reach the on-prem hosts' node ports (the kubelet, the CNI's overlay) "
                        "beside the cluster's nodes")
    elif vpn_mode == "client-to-existing":
        warnings.append(
            f"gpu-cluster:{EXTRA_SOURCES_KEY} is empty on vpn.mode client-to-existing: the "
            f"on-prem hosts' node ports admit the control plane's private address "
            f"{control_plane_address} (its overlay traffic) but not the tunnel address the "
            "existing VPN server gives the instance, which its other packets leave from (pods "
            "on the control plane reaching kubelets); give the instance a static tunnel "
            f"address on that server and list it as a /32 in {EXTRA_SOURCES_KEY}")
    return warnings
