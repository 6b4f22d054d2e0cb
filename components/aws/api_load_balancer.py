"""The network load balancer in front of several EC2 controllers: internal, one fixed
address in each controller's zone (config.cloud.api_load_balancer_addresses; the first is
the endpoint every node and user dials), a TCP listener for the API and for each port the
distribution's nodes and joining controllers reach (`Distribution.load_balanced_ports`),
each forwarding to every controller that passes its health check.

Client addresses are not preserved: with them, a controller that is also a node could not
reach itself through the load balancer (AWS: "Connections time out for requests from a
target to its load balancer", docs.aws.amazon.com/elasticloadbalancing/latest/network/
load-balancer-troubleshooting.html). The controllers therefore see the load balancer's own
group as the source, and the load balancer's security group is where the clients are
filtered: the API from the cluster's networks, the other ports from the nodes' addresses
only (docs.aws.amazon.com/elasticloadbalancing/latest/network/load-balancer-security-
groups.html)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aws.network import warn_over_rules_quota

# Seconds between health checks and how many in a row decide: a controller that stops
# answering leaves the targets within half a minute, and one that comes back, or joins,
# takes new connections after three answers.
HEALTH_CHECK_INTERVAL = 10
HEALTH_CHECK_THRESHOLD = 3


@dataclass(frozen=True, kw_only=True)
class ApiLoadBalancerArgs:
    cluster_name: str
    vpc_id: pulumi.Input[str]
    # The controllers' subnets, one per zone, and the load balancer's address in each
    # (none: public, at the addresses AWS gives it).
    subnet_ids: Sequence[pulumi.Input[str]]
    addresses: Sequence[str] = ()
    # The controllers' fixed private addresses, the only place it sends to.
    controller_addresses: Sequence[str]
    # The API's port, and the distribution's other load-balanced ports: name -> (port,
    # protocol).
    api_port: int
    ports: Mapping[str, tuple[int, str]]
    # Who reaches the API (the cluster's networks; public: aws.adminCidrs) and the other
    # ports (the nodes' and controllers' addresses).
    api_sources: Sequence[str]
    node_sources: Sequence[str] = ()
    public: bool = False


class ApiLoadBalancer(pulumi.ComponentResource):
    """Its security group (the controllers admit its traffic by group), a target group
    and listener per port; `attach` puts each controller in once it exists."""

    def __init__(self, name: str, args: ApiLoadBalancerArgs,
                 opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:ApiLoadBalancer", name, None, opts)
        self._name, self._args = name, args
        self._opts = pulumi.ResourceOptions(parent=self)
        self.ports = {"kubernetes-api": (args.api_port, "tcp"), **args.ports}
        self.security_group = self._create_security_group()
        self.load_balancer = aws.lb.LoadBalancer(
            f"{name}-nlb", name_prefix="gcpub-" if args.public else "gcapi-",
            load_balancer_type="network", internal=not args.public,
            subnet_mappings=[aws.lb.LoadBalancerSubnetMappingArgs(
                subnet_id=subnet, private_ipv4_address=address)
                for subnet, address in zip(args.subnet_ids, args.addresses)]
            if not args.public else [aws.lb.LoadBalancerSubnetMappingArgs(subnet_id=subnet)
                                     for subnet in args.subnet_ids],
            # A zone's address reaches the controllers of every zone.
            enable_cross_zone_load_balancing=True,
            security_groups=[self.security_group.id],
            tags=self._tags(), opts=self._opts)
        self._forward()
        self.dns_name: pulumi.Output[str] = self.load_balancer.dns_name
        self.register_outputs({"dnsName": self.dns_name})

    def _tags(self) -> dict:
        # The stack's and the cluster's tags are the provider's default_tags.
        return {"Name": f"{self._args.cluster_name}-{'public-' if self._args.public else ''}api"}

    def _create_security_group(self) -> aws.ec2.SecurityGroup:
        args = self._args
        group = aws.ec2.SecurityGroup(
            f"{self._name}-sg", vpc_id=args.vpc_id,
            description=f"{args.cluster_name} {'public ' if args.public else ''}API load balancer",
            tags=self._tags(),
            opts=self._opts)
        sources_of = {name: list(dict.fromkeys(
            args.api_sources if port == args.api_port else args.node_sources))
            for name, (port, _) in self.ports.items()}
        warn_over_rules_quota(f"{self._name}-sg",
                              sum(len(sources) for sources in sources_of.values()), self)
        for name, (port, protocol) in self.ports.items():
            for index, cidr in enumerate(sources_of[name]):
                aws.vpc.SecurityGroupIngressRule(
                    f"{self._name}-{name}-{index}", security_group_id=group.id,
                    ip_protocol=protocol, from_port=port, to_port=port, cidr_ipv4=cidr,
                    description=name, opts=self._opts)
            # To the controllers only: what it forwards, and its health checks.
            for index, address in enumerate(args.controller_addresses):
                aws.vpc.SecurityGroupEgressRule(
                    f"{self._name}-{name}-to-{index}", security_group_id=group.id,
                    ip_protocol=protocol, from_port=port, to_port=port,
                    cidr_ipv4=f"{address}/32", description=name, opts=self._opts)
        return group

    def _forward(self) -> None:
        """A target group per port, and its listener."""
        self._target_groups = {}
        for name, (port, protocol) in self.ports.items():
            group = self._target_groups[name] = aws.lb.TargetGroup(
                f"{self._name}-{name}", name_prefix=f"p{port}-"[:6], port=port,
                protocol=protocol.upper(), vpc_id=self._args.vpc_id, target_type="instance",
                preserve_client_ip="false",
                health_check=aws.lb.TargetGroupHealthCheckArgs(
                    protocol="TCP", port="traffic-port", interval=HEALTH_CHECK_INTERVAL,
                    healthy_threshold=HEALTH_CHECK_THRESHOLD,
                    unhealthy_threshold=HEALTH_CHECK_THRESHOLD),
                tags=self._tags(), opts=self._opts)
            aws.lb.Listener(
                f"{self._name}-{name}", load_balancer_arn=self.load_balancer.arn, port=port,
                protocol=protocol.upper(), default_actions=[aws.lb.ListenerDefaultActionArgs(
                    type="forward", target_group_arn=group.arn)],
                tags=self._tags(), opts=self._opts)

    def attach(self, index: int, instance: aws.ec2.Instance) -> None:
        """Controller `index` (0 is the first) in every target group, once it exists (the
        ones that join at boot are launched one after the other)."""
        for name, (port, _) in self.ports.items():
            aws.lb.TargetGroupAttachment(
                f"{self._name}-{name}-{index}", target_group_arn=self._target_groups[name].arn,
                target_id=instance.id, port=port, opts=self._opts)
