"""Rules of `kubernetes.controlPlane` across keys: how many controllers (hosts with a
controller role on bare metal, `replicas` EC2 instances on hybrid and cloud), the stable
address in front of several, and a VIP's place on the LAN."""

import ipaddress
from typing import Optional

from config.cloud import api_load_balancer_addresses, controller_names, subnet_cidrs
from config.kubernetes import CONTROLLER_COUNTS, ETCD_MAJORITY
from config.partial import PartialConfig
from config.problems import Problem

KEY = "kubernetes.controlPlane"
AWS_LAYOUTS = ("hybrid", "cloud")


def controller_count(layout: Optional[str], hosts, replicas: Optional[int]) -> int:
    """Controllers of the stack: on bare metal its hosts with a controller role; on hybrid
    and cloud kubernetes.controlPlane.replicas EC2 instances (unset: one)."""
    if layout == "bare-metal":
        return sum(1 for host in hosts if host.runs_control_plane)
    return replicas or 1


def control_plane_checks(cfg: PartialConfig) -> list[Problem]:
    if cfg.kubernetes is None:
        return []
    plane = cfg.kubernetes.control_plane
    if cfg.layout == "bare-metal":
        return _on_prem(cfg, plane) + _address(plane) + _vip(cfg, plane)
    if cfg.layout in AWS_LAYOUTS:
        return _on_aws(cfg, plane)
    return []


def _on_prem(cfg: PartialConfig, plane) -> list[Problem]:
    if not cfg.complete("hosts"):
        return []
    controllers = [(index, host) for index, host in cfg.hosts if host.runs_control_plane]
    count = len(controllers)
    named = ", ".join(f"gpu-cluster:hosts[{index}]" for index, _ in controllers)
    problems = []
    if count and count not in CONTROLLER_COUNTS:
        # etcd.io/docs/v3.6/faq: more members mean slower writes (each is replicated to a
        # majority), and the program builds at most 5.
        reason = ETCD_MAJORITY if count < max(CONTROLLER_COUNTS) else \
            "at most 5: every etcd member beyond slows each write"
        problems.append(Problem("hosts", f"{count} hosts have a controller role ({named}): "
                                f"{reason}; give 1, 3 or 5 hosts a controller role"))
    if plane.replicas is not None and plane.replicas != count:
        problems.append(Problem(f"{KEY}.replicas", f"is {plane.replicas} but {count} hosts have "
                                "a controller role: on bare metal the hosts decide; leave it "
                                "unset"))
    if count in CONTROLLER_COUNTS and count > 1 and plane.address is None:
        problems.append(Problem(f"{KEY}.address", f"is required with {count} controllers: the "
                                "one address nodes and users reach the API at whichever "
                                "controller is up (a free LAN address for the VIP, or your "
                                "load balancer's)"))
    return problems


def _address(plane) -> list[Problem]:
    """An address every node dials: IPv4 like the cluster's networks (node URLs carry it
    unbracketed), never an address no machine answers at; k0s refuses 0.0.0.0 as
    externalAddress (pkg/apis/k0s/v1beta1/api.go:139-169 at v1.36.3+k0s.2)."""
    try:
        address = ipaddress.ip_address(plane.address or "")
    except ValueError:
        return []  # unset, or a DNS name
    if address.version != 4 or address.is_unspecified or address.is_loopback \
            or address.is_multicast:
        return [Problem(f"{KEY}.address", f"{address} is not an IPv4 address every node can "
                        "reach the controllers at")]
    return []


def _vip(cfg: PartialConfig, plane) -> list[Problem]:
    """A VIP is a free address of the LAN the controllers are on: VRRP moves it between
    them with ARP, inside one broadcast domain (RFC 5798 section 1)."""
    if plane.load_balancer != "vip":
        if "vip" in plane.model_fields_set:
            return [Problem(f"{KEY}.vip", "is read only with loadBalancer: vip")]
        return []
    if plane.address is None:
        return []
    key = f"{KEY}.address"
    controllers = sum(1 for _, host in cfg.hosts if host.runs_control_plane)
    if cfg.complete("hosts") and controllers == 1:
        return [Problem(key, "is a VIP, and a VIP needs several controllers to move between; "
                        "with one controller leave it unset, or set "
                        f"{KEY}.loadBalancer: external for a load balancer of yours")]
    try:
        vip = ipaddress.ip_address(plane.address)
    except ValueError:
        return [Problem(key, f"'{plane.address}' is a name; with loadBalancer: vip it must be "
                        "a free IPv4 address of gpu-cluster:network.lanCidr")]
    if vip.version != 4 or cfg.network is None or cfg.network.lan_cidr is None:
        return []  # IPv6: _address
    lan = ipaddress.ip_network(cfg.network.lan_cidr)
    if vip not in lan:
        return [Problem(key, f"VIP {vip} is outside gpu-cluster:network.lanCidr {lan}: the "
                        "controllers hold it on their LAN interface")]
    if lan.prefixlen < 31 and vip in (lan.network_address, lan.broadcast_address):
        return [Problem(key, f"VIP {vip} is a reserved address of gpu-cluster:network.lanCidr "
                        f"{lan}; give a free host address")]
    return [Problem(key, f"VIP {vip} is the address of gpu-cluster:hosts[{index}]; give a free "
                    "address of the LAN no machine has")
            for index, host in cfg.hosts if host.address == plane.address]


def _on_aws(cfg: PartialConfig, plane) -> list[Problem]:
    problems = [Problem(f"{KEY}.{key}", f"is for on-prem controllers (bare-metal); the "
                        f"{cfg.layout} layout's controllers are EC2 instances")
                for field, key in (("address", "address"), ("load_balancer", "loadBalancer"),
                                   ("vip", "vip")) if field in plane.model_fields_set]
    if cfg.aws is not None:
        problems += _generations(cfg.aws, plane.replicas or 1)
    if cfg.aws is None or not plane.replicas or plane.replicas == 1:
        return problems
    vpc = cfg.aws.vpc
    zones, zones_key = ((len(vpc.subnet_ids), "aws.vpc.subnetIds") if vpc.id is not None
                        else (vpc.availability_zones, "aws.vpc.availabilityZones"))
    if plane.replicas > zones:
        # One controller per zone: a zone that holds two of three takes the majority down
        # with it when it fails.
        problems.append(Problem(f"{KEY}.replicas", f"{plane.replicas} controllers in {zones} "
                                f"availability zones ({zones_key}): a zone holding two of them "
                                "takes etcd's majority with it when it fails; give each its "
                                "own zone"))
    if vpc.id is not None:
        problems.append(Problem(f"{KEY}.replicas", f"{plane.replicas} controllers in an adopted "
                                f"VPC ({vpc.id}) are not built yet: their fixed addresses and "
                                "the load balancer's come from subnets the program creates; "
                                "use one controller there for now"))
    names = controller_names(cfg.aws, plane.replicas)
    if len(names[-1]) > 63:
        problems.append(Problem("aws.controlPlane.name", f"'{cfg.aws.control_plane.name}' is "
                                f"too long for the name of controller {plane.replicas}, "
                                f"'{names[-1]}' (a DNS label: at most 63 characters)"))
    if cfg.complete("hosts"):
        taken = {host.name: index for index, host in cfg.hosts}
        problems += [Problem(f"{KEY}.replicas", f"controller {position} would be named "
                             f"'{name}', the name of gpu-cluster:hosts[{taken[name]}]")
                     for position, name in enumerate(names[1:], start=2) if name in taken]
    private_ip = cfg.aws.control_plane.private_ip
    # Subnets too small for the fixed addresses have their own problem (aws_checks.py).
    if private_ip is not None and vpc.id is None and \
            all(ipaddress.ip_network(cidr).prefixlen <= 27 for cidr in subnet_cidrs(vpc)) and \
            private_ip in api_load_balancer_addresses(cfg.aws, plane.replicas):
        problems.append(Problem("aws.controlPlane.privateIp", f"{private_ip} is the API load "
                                "balancer's address in the first subnet (its .11); give the "
                                "controller another"))
    return problems


def _generations(aws, replicas: int) -> list[Problem]:
    """aws.controlPlane.generations names controllers after the first: the first initialised
    the cluster, and a new instance under its name would start another one."""
    first, *others = controller_names(aws, replicas)
    key = "aws.controlPlane.generations"
    problems = []
    for name in aws.control_plane.generations:
        if name == first:
            problems.append(Problem(f"{key}.{name}", "the first controller initialised the "
                                    "cluster, and a new instance under its name is not built "
                                    "yet: it would start another cluster (docs/day-2.md, "
                                    "\"Losing the first EC2 controller\")"))
        elif name not in others:
            problems.append(Problem(f"{key}.{name}", "is not one of the EC2 controllers after "
                                    f"the first ({', '.join(others) or 'there are none'})"))
    return problems
