"""RKE2's CNI, Canal: the HelmChartConfig that sets its interface and MTU (rke2.py's
default_canal_config decides them)."""

import ipaddress
import re
from collections.abc import Sequence
from typing import Optional

import yaml


def canal_config(interface: Optional[str] = None, mtu: int = 0,
                 interface_regex: Optional[str] = None) -> Optional[str]:
    """The HelmChartConfig for /var/lib/rancher/rke2/server/manifests/
    rke2-canal-config.yaml (docs: networking/basic_network_options.md, Canal), or
    None when nothing differs from the chart's defaults. Keys of the rke2-canal
    chart's values.yaml (rancher/rke2-charts packages/rke2-canal/charts/values.yaml):
    flannel.iface / flannel.regexIface (flannel's --iface / --iface-regex, which
    match an interface name or an address: flannel Documentation/configuration.md)
    and calico.vethuMTU (the pods' MTU; the chart's default is 1450)."""
    flannel: dict = {}
    if interface:
        flannel["iface"] = interface
    if interface_regex:
        flannel["regexIface"] = interface_regex
    values: dict = {}
    if flannel:
        values["flannel"] = flannel
    if mtu:
        values["calico"] = {"vethuMTU": mtu}
    if not values:
        return None
    document = {
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChartConfig",
        "metadata": {"name": "rke2-canal", "namespace": "kube-system"},
        "spec": {"valuesContent": yaml.safe_dump(values, sort_keys=False)},
    }
    return yaml.safe_dump(document, sort_keys=False)


def address_regex(addresses: Sequence[str], networks: Sequence[str] = ()) -> str:
    """An anchored regular expression matching exactly these IPv4 addresses and the
    addresses of these networks (network_pattern)."""
    return "^(" + "|".join([*(re.escape(a) for a in sorted(set(addresses))),
                            *(network_pattern(n) for n in dict.fromkeys(networks))]) + ")$"


def network_pattern(cidr: str) -> str:
    """A regular expression (unanchored, no group of its own) matching the dotted-decimal
    text of exactly the addresses of the IPv4 network `cidr`: its whole octets literally,
    the octet the prefix splits as the alternation of the values it allows, then any octet
    (0-255) for the rest."""
    network = ipaddress.IPv4Network(cidr, strict=True)
    octets = network.network_address.packed
    whole, bits = divmod(network.prefixlen, 8)
    parts = [str(octet) for octet in octets[:whole]]
    if whole < 4:
        if bits:
            first = octets[whole]
            parts.append("(?:" + "|".join(str(v) for v in range(first, first + 2 ** (8 - bits)))
                         + ")")
        else:
            parts.append(ANY_OCTET)
        parts += [ANY_OCTET] * (3 - whole)
    return r"\.".join(parts)


# 0-255 in decimal without leading zeros, as Go's net.IP.String writes an octet.
ANY_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
