"""Who may reach an EC2 controller: the inbound rules of its own security group (admins,
the cluster's networks, the nodes, the VPN's clients), what it admits from the API load
balancers by their groups, and the group every controller of several is in."""

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Optional

import pulumi
import pulumi_aws as aws

from components.aws.boot import EC2_SSH_PORT
from components.aws.network import port_range
from config.cloud import VpnSettings


def admit_balancers(name: str, group: pulumi.Input[str], api_port: int,
                    balanced_ports: Mapping[str, tuple[int, str]],
                    balancer_group: Optional[pulumi.Input[str]],
                    public_balancer_group: Optional[pulumi.Input[str]],
                    opts: pulumi.ResourceOptions) -> int:
    """The controller's `group` admits what the internal load balancer forwards (the API and
    `balanced_ports`) and its health checks from that balancer's group, and the API from
    the public one's; returns how many rules that takes."""
    balanced = ({"kubernetes-api": (api_port, "tcp"), **balanced_ports}
                if balancer_group is not None else {})
    for port_name, (port, protocol) in balanced.items():
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-{port_name}-balanced", security_group_id=group,
            ip_protocol=protocol, from_port=port, to_port=port,
            referenced_security_group_id=balancer_group,
            description=f"{port_name} through the API load balancer", opts=opts)
    if public_balancer_group is not None:
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-kubernetes-api-public", security_group_id=group,
            ip_protocol="tcp", from_port=api_port, to_port=api_port,
            referenced_security_group_id=public_balancer_group,
            description="kubernetes-api through the public API load balancer", opts=opts)
    return len(balanced) + (public_balancer_group is not None)


def controller_peers_group(name: str, vpc_id: pulumi.Input[str], cluster_name: str,
                           ports: Mapping[str, tuple[int, str]],
                           opts: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
    """The group every controller is in when there are several, open on `ports` (etcd's
    peers, joins, their kubelets: name -> (port, protocol)) to its own members only: one
    rule per port whatever the count of controllers, where an address per peer would take
    four rules per port of a controller's quota of 60 (docs.aws.amazon.com/vpc/latest/
    userguide/amazon-vpc-limits.html, "Inbound or outbound rules per security group")."""
    group = aws.ec2.SecurityGroup(name, vpc_id=vpc_id,
                                  description=f"{cluster_name} controllers, to each other",
                                  tags={"Name": f"{cluster_name}-controllers"}, opts=opts)
    for port_name, (port, protocol) in ports.items():
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-{port_name}", security_group_id=group.id, ip_protocol=protocol,
            referenced_security_group_id=group.id,
            description=f"{port_name} from the other controllers", opts=opts,
            **port_range(port, protocol))
    return group


def ingress_rules(admin_cidrs: Sequence[str], api_port: int, cluster_cidrs: Sequence[str],
                  node_cidrs: Sequence[str], control_plane_ports: Mapping[str, tuple[int, str]],
                  vpn: Optional[VpnSettings]) -> list[tuple[str, str, int, list[str]]]:
    """(name, protocol, port, source CIDRs) of every inbound rule; nothing else is open.
    Each (protocol, port, network) appears once: EC2 refuses a second, identical rule
    (InvalidPermission.Duplicate), e.g. when the admins' network is the LAN."""
    cluster_networks = list(cluster_cidrs)
    admins = list(admin_cidrs)
    wanted = [("ssh", "tcp", EC2_SSH_PORT, admins),
              ("kubernetes-api", "tcp", api_port, cluster_networks + admins)]
    # The ports nodes reach the control plane at (RKE2's kubelet and Canal's VXLAN, which
    # is unauthenticated, among them): from the nodes' own addresses only.
    wanted += [(name, protocol, port, list(node_cidrs))
               for name, (port, protocol) in control_plane_ports.items()]
    if vpn is not None and vpn.mode == "server-on-ec2":
        wanted.append(("openvpn", vpn.protocol, vpn.port, list(vpn.client_source_cidrs)))
    seen: set[tuple[str, int, str]] = set()
    rules = []
    for name, protocol, port, cidrs in wanted:
        unique = []
        for cidr in cidrs:
            key = (protocol, port, str(ipaddress.ip_network(cidr)))
            if key not in seen:
                seen.add(key)
                unique.append(cidr)
        rules.append((name, protocol, port, unique))
    return rules
