"""RKE2's CNI, Canal: the HelmChartConfig that sets its interface and MTU (rke2.py's
default_canal_config decides them)."""

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


def address_regex(addresses: Sequence[str]) -> str:
    """An anchored regular expression matching exactly these IPv4 addresses."""
    return "^(" + "|".join(re.escape(a) for a in sorted(set(addresses))) + ")$"
