"""Policy rules over the whole stack: what no single resource shows, such as whether an
instance can reach the internet from where it is placed. Standard library only, like
policy/rules.py; the CLI runs them as stack validation policies (policy/__main__.py) and
`python -m policy.offline` against the offline preview.

A resource refers to another through its property dependencies (which resource an input
property's value comes from): they are known at preview time, when ids are not."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

_INSTANCE = "aws:ec2/instance:Instance"
_GROUP = "aws:autoscaling/group:Group"
_ANYWHERE = "0.0.0.0/0"
_LOAD_BALANCERS = ("aws:lb/loadBalancer:LoadBalancer", "aws:alb/loadBalancer:LoadBalancer")
_LISTENERS = ("aws:lb/listener:Listener", "aws:alb/listener:Listener")
_INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


@dataclass(frozen=True)
class StackResource:
    id: str  # the URN (or, in a plan.json, the name)
    type: str
    name: str
    props: Mapping[str, Any]
    # input property -> ids of the resources its value comes from
    property_dependencies: Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    check: Callable[[Sequence[StackResource]], list]  # -> [(resource name, message)]


class _Stack:
    def __init__(self, resources: Sequence[StackResource]):
        self.resources = resources
        self.by_id = {r.id: r for r in resources}

    def refs(self, resource: StackResource, prop: str) -> list[StackResource]:
        return [self.by_id[i] for i in resource.property_dependencies.get(prop, ())
                if i in self.by_id]

    def of_type(self, type_: str) -> list[StackResource]:
        return [r for r in self.resources if r.type == type_]

    def referring(self, type_: str, prop: str, target: StackResource) -> list[StackResource]:
        return [r for r in self.of_type(type_) if target in self.refs(r, prop)]

    def default_routes(self, subnet: StackResource) -> set[str]:
        """How the subnet's default route leaves the VPC: "internet-gateway", "nat"."""
        found = set()
        for association in self.referring("aws:ec2/routeTableAssociation:RouteTableAssociation",
                                          "subnetId", subnet):
            for table in self.refs(association, "routeTableId"):
                targets = {r.type for r in self.refs(table, "routes")}
                for route in table.props.get("routes") or []:
                    if isinstance(route, Mapping) and route.get("cidrBlock") == _ANYWHERE:
                        found |= _kinds(targets, route)
                for route in self.referring("aws:ec2/route:Route", "routeTableId", table):
                    if route.props.get("destinationCidrBlock") == _ANYWHERE:
                        found |= _kinds({r.type for prop in ("gatewayId", "natGatewayId")
                                         for r in self.refs(route, prop)}, route.props)
        return found


def _kinds(target_types: set, route: Mapping) -> set[str]:
    kinds = set()
    if route.get("gatewayId") and "aws:ec2/internetGateway:InternetGateway" in target_types:
        kinds.add("internet-gateway")
    if route.get("natGatewayId") and "aws:ec2/natGateway:NatGateway" in target_types:
        kinds.add("nat")
    return kinds


def _number(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _machines(stack: _Stack):
    """(name, subnets, has a public address) of each instance and each auto scaling group
    (its launch template says whether its instances get a public address)."""
    for instance in stack.of_type(_INSTANCE):
        public = _true(instance.props.get("associatePublicIpAddress")) or any(
            stack.referring(type_, prop, instance)
            for type_, prop in (("aws:ec2/eip:Eip", "instance"),
                                ("aws:ec2/eipAssociation:EipAssociation", "instanceId")))
        yield instance.name, stack.refs(instance, "subnetId"), public
    for group in stack.of_type(_GROUP):
        interfaces = [i for t in stack.refs(group, "launchTemplate")
                      for i in t.props.get("networkInterfaces") or [] if isinstance(i, Mapping)]
        public = any(_true(i.get("associatePublicIpAddress")) for i in interfaces)
        yield group.name, stack.refs(group, "vpcZoneIdentifiers"), public


def instances_reach_the_internet(resources: Sequence[StackResource]) -> list:
    """Every machine the program starts fetches packages, the distribution's release and images, and
    boots with SSM reads: its subnets must route to a NAT gateway, or to an internet
    gateway while it has a public address (an internet gateway serves no other:
    https://docs.aws.amazon.com/vpc/latest/userguide/VPC_Internet_Gateway.html). Subnets
    the stack does not create (an adopted VPC) are the owner's to route and not judged."""
    stack = _Stack(resources)
    problems = []
    for name, subnets, public in _machines(stack):
        for subnet in subnets:
            routes = stack.default_routes(subnet)
            if "nat" in routes or ("internet-gateway" in routes and public):
                continue
            why = ("it has no public address and the subnet's default route is an internet "
                   "gateway" if routes else "the subnet has no default route out of the VPC")
            problems.append((name, f"{name}: cannot reach the internet from subnet "
                                   f"{subnet.name}: {why}"))
    return problems


def load_balancers_filtered(resources: Sequence[StackResource]) -> list:
    """The internal load balancer forwards the API and the nodes' join ports to the cluster's
    networks; the one that faces the internet (the cloud layout's way in for users and
    `pulumi up`) forwards one port, the API, through security groups that admit named
    networks only (aws.adminCidrs), as the first controller's own group does."""
    stack = _Stack(resources)
    problems = []
    for balancer in (r for type_ in _LOAD_BALANCERS for r in stack.of_type(type_)):
        if _true(balancer.props.get("internal")):
            continue
        name = balancer.name
        # Numbers arrive as floats from the engine's protobuf values.
        ports = sorted({_number(listener.props.get("port")) for type_ in _LISTENERS
                        for listener in stack.referring(type_, "loadBalancerArn", balancer)},
                       key=str)
        if len(ports) > 1:
            problems.append((name, f"{name}: faces the internet with listeners on ports "
                                   f"{', '.join(map(str, ports))}; only the API's may be"))
        groups = stack.refs(balancer, "securityGroups")
        if not groups:
            problems.append((name, f"{name}: faces the internet without a security group "
                                   "to filter its clients"))
        for group in groups:
            for rule in stack.referring(_INGRESS, "securityGroupId", group):
                if rule.props.get("cidrIpv4") == _ANYWHERE or rule.props.get("cidrIpv6") == "::/0":
                    problems.append((name, f"{name}: faces the internet and its group "
                                           f"{group.name} admits everyone ({rule.name})"))
    return problems


STACK_RULES = [
    StackRule("load-balancers-filtered",
              "Every load balancer is internal, or faces the internet with the API alone, "
              "behind security groups that admit named networks only.",
              load_balancers_filtered),
    StackRule("instances-reach-the-internet",
              "Every EC2 instance and auto scaling group the stack creates can reach the "
              "internet (SSM, packages, images) from its subnets.",
              instances_reach_the_internet),
]
