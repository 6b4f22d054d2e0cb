"""The host firewall of an on-prem host, as an nftables ruleset (plain values, no Pulumi):
the ports the distribution's nodes reach each other at answer only the cluster's sources,
and nothing else changes.

- Its own table, `inet gpu_cluster`, replaced whole in one transaction: the file first
  declares the table, then deletes it, then defines it, and `nft -f` applies a file as one
  transaction ("the flushing and the load of the new rules happens in one single shot",
  https://wiki.nftables.org/wiki-nftables/index.php/Atomic_rule_replacement).
- No drop policy and no rule for any other port: kube-proxy, Calico, flannel and
  kube-router keep their own tables in the same hooks, and a drop in any base chain drops
  the packet, while an accept only ends that chain: "An accept verdict ... ends the
  evaluation of the current base chain ... The packet advances to the next base chain";
  "A drop verdict (including an implict one via the base chain's policy) immediately ends
  the evaluation of the whole ruleset" (nftables doc/nft.txt, "OVERALL EVALUATION OF THE
  RULESET", git.netfilter.org nftables commit 2c6363fb; the wiki's Configuring chains:
  "drops are instant, there is no re-evaluation by other hooks"). So it only drops, and
  only packets to the listed ports from elsewhere.
- Sources: the nodes' addresses (and the control plane's, the VPN server's tunnel address,
  hostFirewall.extraSources), the pod and service networks, which k0s asks worker
  firewalls to accept all traffic from (docs/networking.md at v1.36.3+k0s.2, line 67; pods
  reaching a kubelet, e.g. metrics-server), and loopback. IPv6 reaches none of the ports:
  the cluster is IPv4 only (config/types.py IPv4).
- VRRP (IP protocol 112) of the controllers' virtual IP (host keepalived, k0s's CPLB), when
  there are peers: only from the other controllers, so no other machine on the LAN can
  take the address by advertising a higher priority (RFC 3768 5.2.4: VRRP is IP protocol 112).
  A single controller's table has no such rule.
"""

import ipaddress
from collections.abc import Iterable, Mapping

TABLE = "gpu_cluster"
HEADER = "# Managed by gpu-cluster (host-firewall); changes are overwritten."


def _networks(cidrs: Iterable[str]) -> list[str]:
    """The networks as nftables elements: merged (an interval set refuses overlaps),
    sorted, a /32 written as its address."""
    merged = ipaddress.collapse_addresses(ipaddress.IPv4Network(c, strict=True) for c in cidrs)
    return [str(n.network_address) if n.prefixlen == 32 else str(n) for n in merged]


def _ports(ports: Mapping[str, tuple[int, str]], protocol: str) -> list[str]:
    return [str(port) for port in sorted({p for p, proto in ports.values() if proto == protocol})]


def _set(name: str, kind: str, elements: list[str], comment: str) -> list[str]:
    lines = [f"\t# {comment}", f"\tset {name} {{", f"\t\ttype {kind}", "\t\tflags interval"]
    if elements:
        lines.append(f"\t\telements = {{ {', '.join(elements)} }}")
    return lines + ["\t}", ""]


def _vrrp(peers: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The set, the input rule and the chain that take VRRP from `peers` only; nothing
    without peers."""
    if not peers:
        return [], [], []
    return (_set("vrrp_peers", "ipv4_addr", peers, "the other controllers (VRRP)"),
            ["\tip protocol 112 jump vrrp_peers_only"],
            ["", "\t# VRRP (IP protocol 112) of the virtual IP, from the other controllers only.",
             "\tchain vrrp_peers_only {", "\t\tip saddr @vrrp_peers accept",
             "\t\tcounter drop", "\t}"])


def ruleset(host: str, ports: Mapping[str, tuple[int, str]], node_sources: Iterable[str],
            cluster_networks: Iterable[str], vrrp_peers: Iterable[str] = ()) -> str:
    """The file host-firewall.sh loads on `host`: `ports` (name -> (port, "tcp"/"udp"))
    answer only `node_sources` and `cluster_networks` (IPv4 CIDRs) and loopback; VRRP only
    `vrrp_peers` (the other controllers' addresses, when the controllers share a virtual
    IP)."""
    names = ", ".join(f"{name} {port}/{proto}" for name, (port, proto) in sorted(
        ports.items(), key=lambda item: (item[1][1], item[1][0])))
    vrrp_set, vrrp_rule, vrrp_chain = _vrrp(_networks(vrrp_peers))
    lines = [
        HEADER,
        f"# {host}: {names} answer the cluster's nodes only.",
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        *_set("node_sources", "ipv4_addr", _networks(node_sources),
              "the nodes' addresses and the control plane's"),
        *_set("cluster_networks", "ipv4_addr", _networks(cluster_networks),
              "the pod and service networks"),
        *vrrp_set,
        *_set("node_tcp_ports", "inet_service", _ports(ports, "tcp"), "TCP ports for them only"),
        *_set("node_udp_ports", "inet_service", _ports(ports, "udp"), "UDP ports for them only"),
        "\t# Accept policy: other traffic is left to the host's other tables.",
        "\tchain input {",
        "\t\ttype filter hook input priority filter; policy accept;",
        '\t\tiif "lo" accept',
        "\t\ttcp dport @node_tcp_ports jump nodes_only",
        "\t\tudp dport @node_udp_ports jump nodes_only",
        *vrrp_rule,
        "\t}",
        "",
        "\t# An accept ends this table's chain only; the drop is final.",
        "\tchain nodes_only {",
        "\t\tip saddr @node_sources accept",
        "\t\tip saddr @cluster_networks accept",
        "\t\tcounter drop",
        "\t}",
        *vrrp_chain,
        "}",
    ]
    return "\n".join(lines) + "\n"
