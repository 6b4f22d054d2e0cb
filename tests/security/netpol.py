"""Kubernetes NetworkPolicy (networking.k8s.io/v1) egress, evaluated offline as the spec
defines it (https://kubernetes.io/docs/concepts/services-networking/network-policies/ and
the API reference of NetworkPolicySpec, NetworkPolicyEgressRule, NetworkPolicyPeer, IPBlock
and NetworkPolicyPort, kubernetes staging/src/k8s.io/api/networking/v1/types.go):

- a pod is isolated for egress when a policy of its namespace selects it (podSelector; {}
  selects every pod) and lists Egress in policyTypes (or, without policyTypes, has egress
  rules); an isolated pod's connection is allowed when some rule of some selecting policy
  allows it, otherwise refused (policies add up; there is no deny);
- a rule allows a destination that matches one of its `to` peers (none: every destination)
  on one of its ports (none: every port and protocol);
- an ipBlock peer matches an address inside `cidr` and inside none of its `except` CIDRs;
  pod and namespace selectors match pods by labels (an ipBlock also matches a pod's
  address: kubernetes test/e2e/network/netpol/network_policy.go, "should allow egress
  access to server in CIDR block");
- a port matches its protocol (default TCP) and number, or the range up to endPort.

The destination is the one after a Service's DNAT, where the CNIs evaluate it
(components/access/storage_egress.py)."""

import ipaddress
from dataclasses import dataclass, field

from tests.rbac import selector_matches


@dataclass(frozen=True)
class Destination:
    address: str
    port: int
    protocol: str = "TCP"
    # A pod's namespace labels and labels, when the address is a pod's.
    namespace_labels: dict = field(default_factory=dict)
    pod_labels: dict = field(default_factory=dict)
    is_pod: bool = False


def _peer_matches(peer: dict, destination: Destination) -> bool:
    if "ipBlock" in peer:
        address = ipaddress.ip_address(destination.address)
        block = peer["ipBlock"]
        network = ipaddress.ip_network(block["cidr"])
        if address.version != network.version or address not in network:
            return False
        return not any(address in ipaddress.ip_network(cidr)
                       for cidr in block.get("except") or []
                       if ipaddress.ip_network(cidr).version == address.version)
    if not destination.is_pod:
        return False
    if "namespaceSelector" in peer and not selector_matches(peer["namespaceSelector"],
                                                    destination.namespace_labels):
        return False
    return "podSelector" not in peer or selector_matches(peer["podSelector"], destination.pod_labels)


def _port_matches(port: dict, destination: Destination) -> bool:
    if port.get("protocol", "TCP") != destination.protocol:
        return False
    if "port" not in port:
        return True
    start = int(port["port"])
    return start <= destination.port <= int(port.get("endPort", start))


def _rule_allows(rule: dict, destination: Destination) -> bool:
    peers, ports = rule.get("to") or [], rule.get("ports") or []
    return ((not peers or any(_peer_matches(p, destination) for p in peers))
            and (not ports or any(_port_matches(p, destination) for p in ports)))


def egress_allowed(policies: list[dict], pod_labels: dict, destination: Destination) -> bool:
    """Whether a pod of the policies' namespace with `pod_labels` may open this connection."""
    selecting = []
    for policy in policies:
        spec = policy["spec"]
        types = spec.get("policyTypes") or (["Ingress", "Egress"] if spec.get("egress")
                                            else ["Ingress"])
        if "Egress" in types and selector_matches(spec.get("podSelector") or {}, pod_labels):
            selecting.append(spec)
    if not selecting:
        return True
    return any(_rule_allows(rule, destination)
               for spec in selecting for rule in spec.get("egress") or [])
