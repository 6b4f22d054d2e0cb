"""The VPC side of the hybrid and cloud layouts: a VPC with a public subnet per
availability zone and its route table, or an existing VPC adopted by id; with egress
`nat`, also a private subnet per zone for the pools, behind a NAT gateway, with an
interface endpoint for SSM."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from config.cloud import AwsSettings, private_subnet_cidrs, subnet_cidrs

HTTPS_PORT = 443
# IP in IP, an IP protocol number (IANA "Assigned Internet Protocol Numbers": 4), for EC2
# rules a protocol without ports: kube-router's overlay between nodes.
IP_IN_IP = "4"


def port_range(port: int, protocol: str) -> dict:
    """A rule's from_port and to_port: none for IP in IP, whose rules take no ports."""
    return {} if protocol == IP_IN_IP else {"from_port": port, "to_port": port}

# AWS's default quota of inbound (and of outbound) rules per security group, which an
# account may raise (Service Quotas, Amazon VPC, "Inbound or outbound rules per security
# group", L-0EA8095F: docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html).
RULES_PER_GROUP_QUOTA = 60
RULES_QUOTA_WARNING = (
    "security group {group} gets {count} inbound rules, above AWS's default quota of "
    f"{RULES_PER_GROUP_QUOTA} per group: `pulumi up` fails creating them unless the "
    "account's quota (Service Quotas, Amazon VPC, L-0EA8095F) was raised; they grow with "
    "gpu-cluster:hosts (each on-prem node's address is a source of its own)")


def warn_over_rules_quota(group: str, count: int, resource: pulumi.Resource) -> None:
    """The preview's warning when a security group gets more inbound rules than AWS's
    default quota allows."""
    if count > RULES_PER_GROUP_QUOTA:
        pulumi.log.warn(RULES_QUOTA_WARNING.format(group=group, count=count),
                        resource=resource)


@dataclass(frozen=True, kw_only=True)
class AwsNetworkArgs:
    settings: AwsSettings
    cluster_name: str
    # A security group for EC2 nodes (cloud pools).
    node_security_group: bool = False
    # What the nodes' group opens to the controllers besides: name -> (port, protocol), the
    # ports the distribution's control plane reaches nodes at, from `node_port_sources`
    # (the controllers' fixed private addresses).
    node_ports: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    node_port_sources: Sequence[str] = ()
    # Hybrid with pools: the on-prem nodes' addresses (and the VPN gateway's tunnel
    # address), which reach the pools' nodes on `onprem_ports` (name -> (port, protocol);
    # protocol "4" is IP in IP, no port) through the tunnel.
    onprem_sources: Sequence[str] = ()
    onprem_ports: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    # Hybrid with pools: the VPN server's address, whose "fragmentation needed" replies
    # the pools' nodes must get (path MTU discovery through the tunnel).
    path_mtu_sources: Sequence[str] = ()


class AwsNetwork(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    # Public subnets (the control plane, EFS mount targets) and their route tables.
    subnet_ids: list[pulumi.Output[str]]
    route_table_ids: list[pulumi.Output[str]]
    # Where pool instances go, and whether they need a public address to reach the
    # internet (egress public) or go out through the NAT gateway (egress nat).
    node_subnet_ids: list[pulumi.Output[str]]
    nodes_need_public_ip: bool
    # The route tables of node subnets beyond route_table_ids (the private subnets the
    # program creates with egress nat): where hybrid's on-prem routes go too.
    node_route_table_ids: list[pulumi.Output[str]]

    def __init__(self, name: str, args: AwsNetworkArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:Network", name, None, opts)
        self._name, self._args = name, args
        self.cidr = args.settings.vpc.cidr
        if args.settings.vpc.id:
            self._adopt()
        else:
            self._create()
        self.nodes_need_public_ip = args.settings.vpc.egress == "public"
        self.node_subnet_ids = self.subnet_ids
        self.node_route_table_ids = []
        if args.settings.vpc.egress == "nat":
            self.node_subnet_ids = (
                [pulumi.Output.from_input(s) for s in args.settings.vpc.private_subnet_ids]
                if args.settings.vpc.id else self._create_private_subnets())
        self.node_security_group = (self._create_node_security_group()
                                    if args.node_security_group else None)
        self.register_outputs({"vpcId": self.vpc_id})

    def _adopt(self) -> None:
        vpc = self._args.settings.vpc
        self.vpc_id = pulumi.Output.from_input(vpc.id)
        self.subnet_ids = [pulumi.Output.from_input(s) for s in vpc.subnet_ids]
        self.route_table_ids = [pulumi.Output.from_input(r) for r in vpc.route_table_ids]

    def _create(self) -> None:
        settings, name = self._args.settings, self._name
        opts = pulumi.ResourceOptions(parent=self)
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=settings.vpc.cidr,
                          enable_dns_hostnames=True, enable_dns_support=True,
                          tags=self._tags(f"{self._args.cluster_name}"), opts=opts)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id,
                                          tags=self._tags(self._args.cluster_name), opts=opts)
        routes = aws.ec2.RouteTable(
            f"{name}-public", vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags=self._tags(f"{self._args.cluster_name}-public"), opts=opts)
        zones = aws.get_availability_zones_output(
            state="available", opts=pulumi.InvokeOutputOptions(parent=self))
        self.subnet_ids = []
        for index, cidr in enumerate(subnet_cidrs(settings.vpc)):
            subnet = aws.ec2.Subnet(
                f"{name}-subnet-{index}", vpc_id=vpc.id, cidr_block=cidr,
                availability_zone=zones.names[index],
                # Instances get addresses only where asked for (the Elastic IP).
                map_public_ip_on_launch=False,
                tags=self._tags(f"{self._args.cluster_name}-{index}"), opts=opts)
            aws.ec2.RouteTableAssociation(f"{name}-subnet-{index}", subnet_id=subnet.id,
                                          route_table_id=routes.id, opts=opts)
            self.subnet_ids.append(subnet.id)
        self.vpc_id = vpc.id
        self.route_table_ids = [routes.id]
        self._zones = zones

    def _create_private_subnets(self) -> list[pulumi.Output[str]]:
        """A private subnet per zone whose default route is one NAT gateway (in the first
        public subnet), and an SSM interface endpoint there so the instances' parameter
        reads stay in the VPC."""
        settings, name = self._args.settings, self._name
        opts = pulumi.ResourceOptions(parent=self)
        cluster = self._args.cluster_name
        address = aws.ec2.Eip(f"{name}-nat", domain="vpc", tags=self._tags(f"{cluster}-nat"),
                              opts=opts)
        nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=address.allocation_id,
                                 subnet_id=self.subnet_ids[0],
                                 tags=self._tags(f"{cluster}-nat"), opts=opts)
        routes = aws.ec2.RouteTable(
            f"{name}-private", vpc_id=self.vpc_id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=self._tags(f"{cluster}-private"), opts=opts)
        subnets = []
        for index, cidr in enumerate(private_subnet_cidrs(settings.vpc)):
            subnet = aws.ec2.Subnet(
                f"{name}-private-{index}", vpc_id=self.vpc_id, cidr_block=cidr,
                availability_zone=self._zones.names[index], map_public_ip_on_launch=False,
                tags=self._tags(f"{cluster}-private-{index}"), opts=opts)
            aws.ec2.RouteTableAssociation(f"{name}-private-{index}", subnet_id=subnet.id,
                                          route_table_id=routes.id, opts=opts)
            subnets.append(subnet.id)
        self.node_route_table_ids = [routes.id]
        endpoint_group = aws.ec2.SecurityGroup(
            f"{name}-ssm-endpoint", vpc_id=self.vpc_id,
            description=f"{cluster} SSM endpoint (HTTPS from the VPC)",
            tags=self._tags(f"{cluster}-ssm-endpoint"), opts=opts)
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-ssm-endpoint-https", security_group_id=endpoint_group.id,
            ip_protocol="tcp", from_port=HTTPS_PORT, to_port=HTTPS_PORT,
            cidr_ipv4=settings.vpc.cidr, description="https", opts=opts)
        # Private DNS makes ssm.<region>.amazonaws.com resolve to the endpoint inside the
        # VPC (it needs the VPC's DNS support and host names, which the VPC has).
        aws.ec2.VpcEndpoint(
            f"{name}-ssm", vpc_id=self.vpc_id, vpc_endpoint_type="Interface",
            service_name=f"com.amazonaws.{settings.region}.ssm", subnet_ids=subnets,
            security_group_ids=[endpoint_group.id], private_dns_enabled=True,
            tags=self._tags(f"{cluster}-ssm"), opts=opts)
        return subnets

    def _create_node_security_group(self) -> aws.ec2.SecurityGroup:
        """For EC2 nodes: all traffic among themselves (pod network, kubelets), from the
        controllers only the distribution's node_ports (not from the VPC: an adopted VPC's
        other instances could send kube-router's IP in IP or Canal's VXLAN, neither
        authenticated, into the pod network), everything out."""
        opts = pulumi.ResourceOptions(parent=self)
        group = aws.ec2.SecurityGroup(
            f"{self._name}-nodes", vpc_id=self.vpc_id,
            description=f"{self._args.cluster_name} nodes",
            tags=self._tags(f"{self._args.cluster_name}-nodes"), opts=opts)
        aws.vpc.SecurityGroupIngressRule(
            f"{self._name}-nodes-from-nodes", security_group_id=group.id, ip_protocol="-1",
            referenced_security_group_id=group.id, description="nodes", opts=opts)
        args = self._args
        for name, (port, protocol) in args.node_ports.items():
            for index, cidr in enumerate(args.node_port_sources):
                # The first controller's rule keeps the name the VPC's rule had.
                aws.vpc.SecurityGroupIngressRule(
                    f"{self._name}-nodes-{name}" + (f"-{index + 1}" if index else ""),
                    security_group_id=group.id, ip_protocol=protocol, cidr_ipv4=cidr,
                    description=f"{name} from the controllers", opts=opts,
                    **port_range(port, protocol))
        self._admit_onprem(group, opts)
        aws.vpc.SecurityGroupEgressRule(
            f"{self._name}-nodes-egress", security_group_id=group.id, ip_protocol="-1",
            cidr_ipv4="0.0.0.0/0", description="all outbound", opts=opts)
        return group

    def _admit_onprem(self, group: aws.ec2.SecurityGroup, opts: pulumi.ResourceOptions) -> None:
        """Hybrid: the on-prem nodes reach the pools' nodes on their node ports (kubelet,
        the CNI's overlay) from their own addresses, which the tunnel carries unchanged
        (components/network/openvpn_config.py routes the LAN, no NAT); and the VPN server's
        ICMP "fragmentation needed" reaches them: a pool node's packets leave at the VPC's
        MTU (9001) and the server forwards them into a smaller tunnel, so path MTU discovery
        needs that ICMP let in ("Path MTU Discovery", https://docs.aws.amazon.com/AWSEC2/
        latest/UserGuide/network_mtu.html: "you must add the following inbound rule to your
        security group: Custom ICMP Rule - IPv4, Destination Unreachable, fragmentation
        required, and DF flag set")."""
        args, count = self._args, 0
        for name, (port, protocol) in args.onprem_ports.items():
            ports = port_range(port, protocol)
            for index, cidr in enumerate(args.onprem_sources):
                aws.vpc.SecurityGroupIngressRule(
                    f"{self._name}-nodes-{name}-onprem-{index}", security_group_id=group.id,
                    ip_protocol=protocol, cidr_ipv4=cidr, description=f"{name} from on-prem",
                    opts=opts, **ports)
                count += 1
        for index, cidr in enumerate(args.path_mtu_sources):
            # ICMP type 3 (destination unreachable), code 4 (fragmentation needed): EC2
            # takes them as from_port and to_port.
            aws.vpc.SecurityGroupIngressRule(
                f"{self._name}-nodes-path-mtu-{index}", security_group_id=group.id,
                ip_protocol="icmp", from_port=3, to_port=4, cidr_ipv4=cidr,
                description="fragmentation needed from the VPN server", opts=opts)
            count += 1
        warn_over_rules_quota(f"{self._name}-nodes", count + 1 + len(args.node_ports)
                              * len(args.node_port_sources), self)

    @staticmethod
    def _tags(name: str) -> dict:
        # The stack's and the cluster's tags are the provider's default_tags.
        return {"Name": name}


def pinned_image(owner: str, name: str, parent: pulumi.Resource) -> pulumi.Output[str]:
    """The id, in the stack's region, of `owner`'s image named exactly `name` (pinned in
    config/versions.py): the same image on every run, until the pin moves."""
    return aws.ec2.get_ami_output(
        owners=[owner], include_deprecated=True,
        filters=[aws.ec2.GetAmiFilterArgs(name="name", values=[name])],
        opts=pulumi.InvokeOutputOptions(parent=parent)).id
