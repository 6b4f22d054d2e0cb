"""Team pods may not reach the shared storage's servers themselves. The NFS export and EFS
trust the uid an NFS client sends (AUTH_SYS: exports(5) squashes root only), and a pod's
packets leave its node from the node's address, which the export and EFS's security group
admit: a pod speaking NFS from user space, no mount needed, could read and write every
team's claims as any uid. The volumes themselves are mounted by the kubelet on the node, in
the host's network, which no NetworkPolicy governs.

A NetworkPolicy per team namespace (networking.k8s.io/v1,
https://kubernetes.io/docs/concepts/services-networking/network-policies/) isolates its pods
for egress and allows them every IPv4 destination except the servers' addresses (ipBlock
`except`), and of a server that is also the controller, its API port. NetworkPolicy only
allows (policies add up), so the servers' ports are denied by leaving them out, whatever
port rpcbind, mountd or statd listen on. Each CNI the program runs enforces egress policy
after a Service's DNAT, so a pod's request to the `kubernetes` Service is checked at the API
server's address and port:

- k0s with kube-router (network.cni: kuberouter): k0s runs it with --run-firewall=true
  (k0s v1.36.3+k0s.2 pkg/component/controller/kuberouter.go:114); kube-router v2.10.0 sends a
  pod's packets through its firewall chain from the filter table's INPUT, FORWARD and OUTPUT
  chains (pkg/controllers/netpol/network_policy_controller.go:53-57,
  pod.go interceptPodOutboundTraffic), which netfilter traverses after nat PREROUTING and
  OUTPUT, where kube-proxy's DNAT is; `except` entries are ipset `nomatch` entries
  (pkg/controllers/netpol/policy.go:817-827);
- k0s with Calico, and RKE2's Canal (flannel for the network, Calico's Felix for policy:
  docs.rke2.io/networking/basic_network_options, https://docs.tigera.io/calico/latest/
  getting-started/kubernetes/flannel/install-for-flannel): Calico applies policy after DNAT
  unless a global policy says preDNAT (https://docs.tigera.io/calico/latest/network-policy/
  services/kubernetes-node-ports, "Network policy with preDNAT field").

IPv6: the policy allows no IPv6 destination (the clusters are single-stack IPv4, so this
takes nothing away) and a server's IPv6 address is never reachable from team pods.
A team user may not add a NetworkPolicy of their own, which would allow what this one leaves
out (team_policy.network_policy_guard)."""

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

POLICY_NAME = "gpu-cluster-storage-egress"
ANY_IPV4 = "0.0.0.0/0"


@dataclass(frozen=True)
class StorageEgress:
    """What team pods may not reach, derived by the composition (cluster.py)."""

    # The NFS server's address and the EFS mount targets' (an Output where AWS assigns it).
    servers: Sequence[pulumi.Input[str]]
    # The controller's address and API port: the `kubernetes` Service's endpoint (the API
    # server's --advertise-address and --secure-port), open to pods when it serves NFS too.
    api_address: str
    api_port: int


def egress_spec(servers: Sequence[str], api_address: str, api_port: int) -> dict:
    """The policy's spec: every IPv4 destination but the servers, and the API's port on the
    one that is the controller."""
    denied = sorted({f"{address}/32" for address in servers
                     if address and ipaddress.ip_address(address).version == 4},
                    key=lambda cidr: ipaddress.ip_network(cidr))
    rules: list[dict] = [{"to": [{"ipBlock": {"cidr": ANY_IPV4, **(
        {"except": denied} if denied else {})}}]}]
    if f"{api_address}/32" in denied:
        rules.append({"to": [{"ipBlock": {"cidr": f"{api_address}/32"}}],
                      "ports": [{"protocol": "TCP", "port": api_port}]})
    # Selects every pod of the namespace; Egress alone leaves ingress as it is.
    return {"podSelector": {}, "policyTypes": ["Egress"], "egress": rules}


def storage_egress_policy(namespace: str, labels: dict[str, str],
                          egress: StorageEgress) -> dict:
    """The team namespace's NetworkPolicy; its spec waits for addresses AWS assigns."""
    spec = pulumi.Output.all(*egress.servers).apply(
        lambda servers: egress_spec(servers, egress.api_address, egress.api_port)) \
        if any(isinstance(s, pulumi.Output) for s in egress.servers) \
        else egress_spec(list(egress.servers), egress.api_address, egress.api_port)
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": POLICY_NAME, "namespace": namespace, "labels": dict(labels)},
            "spec": spec}
