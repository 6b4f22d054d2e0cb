"""Config of the AWS side (hybrid and cloud layouts): VPC, control-plane instance, and the
OpenVPN bridge between the VPC and the on-prem LAN."""

import ipaddress
import itertools
import re
from collections.abc import Sequence
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field

from config.model_base import Section
from config.types import DnsLabel, IPv4, IPv4Cidr, Port, SshPublicKey


# AWS's tag rules (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html,
# "Tag naming limits and requirements"): keys of 1-128 and values of 0-256 Unicode letters,
# digits, spaces and _ . : / = + - @; the aws: prefix is reserved for AWS and refused.
_TAG_TEXT = r"[\w .:/=+\-@]"


def _tag_key(value: str) -> str:
    if not re.fullmatch(f"{_TAG_TEXT}{{1,128}}", value):
        raise ValueError(f"tag key {value[:140]!r} is not 1-128 letters, digits, spaces or "
                         "_ . : / = + - @ (AWS tag rules)")
    if value.lower().startswith("aws:"):
        raise ValueError(f"tag key '{value}' starts with aws:, a prefix AWS reserves for its "
                         "own tags and refuses in yours")
    return value


def _tag_value(value: str) -> str:
    if not re.fullmatch(f"{_TAG_TEXT}{{0,256}}", value):
        raise ValueError(f"tag value {value[:140]!r} is not at most 256 letters, digits, "
                         "spaces or _ . : / = + - @ (AWS tag rules)")
    return value


def _aws_id(kind: str, prefix: str):
    def check(value: str) -> str:
        # AWS's ids carry 8 or 17 hex digits; what matters here is that nothing else fits.
        if not re.fullmatch(rf"{prefix}-[0-9a-f]{{1,17}}", value):
            raise ValueError(f"{value[:60]!r} is not {kind} id like {prefix}-0123456789abcdef0")
        return value
    return AfterValidator(check)


SubnetId = Annotated[str, _aws_id("a subnet", "subnet")]
RouteTableId = Annotated[str, _aws_id("a route table", "rtb")]
TagKey = Annotated[str, AfterValidator(_tag_key)]
TagValue = Annotated[str, AfterValidator(_tag_value)]


class VpcSettings(Section):
    # The VPC's network: created with this CIDR, or the CIDR of the adopted VPC.
    cidr: IPv4Cidr = "10.20.0.0/16"
    """The VPC's network (created, or the adopted VPC's own, required with `id`); disjoint from the
    LAN, pod, service and tunnel networks."""
    availability_zones: int = Field(default=2, ge=2, le=6)
    """Subnets to create, one per zone."""
    # Adopt an existing VPC and subnets (at least two, in different zones) by id.
    id: Optional[str] = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    """Adopt an existing VPC instead of creating one."""
    subnet_ids: list[SubnetId] = []
    """With `id`: at least two subnets in different zones."""
    # Route tables of the adopted subnets; the on-prem LAN is routed through the VPN there.
    route_table_ids: list[RouteTableId] = []
    """Hybrid, with `id`: their route tables (the LAN is routed through the VPN there); not used on
    cloud."""
    # Subnet CIDRs when the program creates them; default: /24s at the VPC's start.
    subnet_cidrs: list[IPv4Cidr] = []
    """Their CIDRs; default: the first /24s of the VPC."""
    # How instances reach SSM, the k0s release, apt and image registries at boot:
    # public: every instance has a public IPv4 address and goes out through the internet
    #   gateway (inbound stays closed by its security group);
    # nat: pool instances live in private subnets and go out through one NAT gateway, with
    #   an interface endpoint for SSM. The README compares their cost.
    egress: Literal["public", "nat"] = "public"
    """How instances reach SSM, the k0s release, apt and registries: `public` (each instance has a
    public IPv4 address) or `nat` (pools in private subnets behind a NAT gateway, with an SSM
    interface endpoint); see [Networking and cost](layouts.md#networking-and-cost)."""
    # nat: the private subnets when the program creates them; default: the /24s after the
    # public ones.
    private_subnet_cidrs: list[IPv4Cidr] = []
    """With `egress: nat`: the private subnets' CIDRs; default: the /24s after the public ones."""
    # nat with an adopted VPC: its private subnets, which must route to a NAT gateway.
    private_subnet_ids: list[SubnetId] = []
    """With `egress: nat` and `id`: the adopted VPC's private subnets (at least two), routed through
    its own NAT gateway."""
    # Hybrid, pools in an adopted VPC: their subnets' CIDRs, which the on-prem host firewalls,
    # the controllers' node ports and the CNI admit instead of the whole VPC. Checked inside
    # the VPC and disjoint, as EC2 keeps subnets ("A subnet CIDR block must not overlap the CIDR
    # block of an existing subnet in the VPC", https://docs.aws.amazon.com/AWSEC2/latest/
    # APIReference/API_CreateSubnet.html).
    pool_subnet_cidrs: list[IPv4Cidr] = []
    """Hybrid, pools with `id`: the CIDRs of the subnets the pools use (`privateSubnetIds` with
    `egress: nat`, else `subnetIds`), one each, which must be those subnets' own CIDRs (only their
    place in `cidr` is checked); the on-prem side then admits these instead of the whole VPC (see
    [Pools on hybrid](layouts.md#pools-on-hybrid))."""


class ControlPlaneInstance(Section):
    # Host name of the instance (set at boot) and of its Kubernetes node.
    name: DnsLabel = "control-plane"
    """Host and node name of the instance."""
    instance_type: str = Field(default="m6i.large", pattern=r"^[a-z0-9-]+\.[a-z0-9]+$",
                               max_length=64)
    """EC2 instance type."""
    # Default: Canonical's Ubuntu 24.04 LTS image pinned by name in config/versions.py.
    ami: Optional[str] = Field(default=None, pattern=r"^ami-[0-9a-f]{8,17}$")
    """Image id; default: Canonical's Ubuntu 24.04 LTS image pinned by name in `config/versions.py`
    (the id is the `images` output)."""
    root_volume_gb: int = Field(default=100, ge=20, le=16384)
    """Encrypted gp3 root volume size."""
    # Fixed private address (node IP and API address); default: the first subnet's .10.
    private_ip: Optional[IPv4] = None
    """Fixed private address; default: `.10` of the first subnet."""
    # A public address for SSH and the API from the admin networks.
    elastic_ip: bool = True
    """A public address for SSH, the API and the VPN."""
    # The program makes the instance's SSH host key and verifies it. Only for a control
    # plane created before it did: that instance's own ed25519 host key
    # (`ssh-keyscan -t ed25519 ADDRESS` from a trusted network, or its console output).
    ssh_host_key: Optional[SshPublicKey] = None
    """Only for a control plane created before the program made its SSH host key: that instance's
    ed25519 host key, which SSH then verifies."""
    # A new instance under a controller's name each time its number is raised.
    generations: dict[DnsLabel, Annotated[int, Field(ge=1, le=1_000_000)]] = {}
    """With several controllers: a new instance under a controller's name (not the first's) each
    time its number is raised, as `hosts[].generation` for on-prem ones: its etcd member and
    node go first, then the new instance joins (see [Machines](day-2.md#machines)). Only ever
    raise it."""


class AwsSettings(Section):
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    """AWS region of the VPC and the control-plane instance."""
    vpc: VpcSettings = VpcSettings()
    """The VPC: created, or an existing one adopted by `id`."""
    # Networks administrators (and `pulumi up`) reach SSH and the Kubernetes API from.
    admin_cidrs: list[IPv4Cidr]
    """Networks SSH and the Kubernetes API are open to (where admins and `pulumi up` run)."""
    # Opening SSH to 0.0.0.0/0 must be asked for explicitly.
    allow_ssh_from_anywhere: bool = False
    """Must be `true` for `0.0.0.0/0` in `adminCidrs`."""
    control_plane: ControlPlaneInstance = ControlPlaneInstance()
    """The EC2 instance that runs the control plane."""
    tags: dict[TagKey, TagValue] = {}
    """Tags on every AWS resource, with `gpu-cluster/cluster` (the AWS provider's default tags; pool
    instances and volumes carry them from the launch template); AWS's characters (letters, digits,
    spaces, `_ . : / = + - @`), keys of at most 128 and not starting `aws:`, values of at most
    256."""


class VpnSettings(Section):
    # server-on-ec2: OpenVPN server in the VPC, client on an on-prem host.
    # client-to-existing: the EC2 instance is a client of an on-prem OpenVPN server (an
    # Access Server, say), with the profile from the secret gpu-cluster:vpnClientProfile.
    mode: Literal["server-on-ec2", "client-to-existing"] = "server-on-ec2"
    """`server-on-ec2`: OpenVPN server on the control-plane instance, client on an on-prem host;
    `client-to-existing`: the instance is a client of an existing on-prem OpenVPN server."""
    # server-on-ec2: the on-prem host that runs the OpenVPN client and routes the LAN.
    onprem_gateway: Optional[DnsLabel] = None
    """`server-on-ec2` (required): the on-prem host that runs the OpenVPN client and routes the
    LAN."""
    # client-to-existing: the existing server's LAN address; the LAN routes the VPC via it.
    existing_server_address: Optional[IPv4] = None
    """`client-to-existing` (required): the existing server's LAN address; on-prem hosts route the
    VPC via it."""
    tunnel_cidr: IPv4Cidr = "10.8.0.0/24"
    """The tunnel's own network."""
    port: Port = 1194
    """OpenVPN port."""
    protocol: Literal["udp", "tcp"] = "udp"
    """`udp` or `tcp`."""
    # server-on-ec2: public addresses the on-prem gateway connects from (the VPN port is
    # open to them only; 0.0.0.0/0 must be written out).
    client_source_cidrs: list[IPv4Cidr] = []
    """`server-on-ec2` (required): public addresses the gateway connects from; the VPN port is open
    to them only."""
    # Tunnel MTU; TCP MSS is clamped below it and the CNI MTU must be lower still.
    mtu: int = Field(default=1400, ge=1280, le=1500)
    """Tunnel MTU; TCP MSS is clamped below it; the CNI MTU defaults to 50 less."""
    # The LAN router already routes the VPC and tunnel CIDRs to the on-prem gateway;
    # otherwise every on-prem host gets persistent routes.
    lan_router_has_route: bool = False
    """The LAN router already routes the VPC via the gateway; otherwise each host gets a route."""
    # server-on-ec2: raising it by one rotates the VPN's PKI: a new CA, and new keys and
    # certificates for the server, the gateway, the admin and the users. Only ever raised.
    pki_generation: int = Field(default=0, ge=0, le=1_000_000)
    """`server-on-ec2`: raise by one to rotate the VPN's CA and every VPN key and certificate (see
    [Rotating credentials](day-2.md#rotating-credentials)); only ever raised."""
    # server-on-ec2: both ends also trust the CA of pki_generation - 1, and the server
    # keeps presenting its certificate from that CA (the rotation's window); set back to
    # false to end it.
    previous_ca_trusted: bool = False
    """`server-on-ec2`: during a rotation, both ends also trust the previous generation's CA and the
    server keeps its certificate from it; set back to `false` to end the rotation."""
    # server-on-ec2: a user's VPN reaches the Kubernetes API only; networks listed here
    # for a user (access.users) are pushed to that user and let through as well. The
    # preview warns about each.
    user_networks: dict[DnsLabel, list[IPv4Cidr]] = {}
    """`server-on-ec2`: per user of `access.users`, networks (CIDRs) that user's VPN reaches beyond
    the Kubernetes API (routes pushed and let through); the preview warns about each."""


# EC2 instance families with NVIDIA GPUs (family -> GPU), for checking pools that claim GPUs.
NVIDIA_GPU_FAMILIES = {
    "p3": "V100", "p3dn": "V100", "p4d": "A100", "p4de": "A100", "p5": "H100", "p5e": "H200",
    "p5en": "H200", "p6-b200": "B200", "g4dn": "T4", "g5": "A10G", "g5g": "T4G", "g6": "L4",
    "g6e": "L40S", "gr6": "L4",
}

# EC2 instance families whose NVIDIA GPUs are Kepler (family -> GPU): the 470 drivers are
# the last branch that supports Kepler (NVIDIA's "Current graphics driver releases",
# https://forums.developer.nvidia.com/t/current-graphics-driver-releases/28500: "470.xx -
# GKxxx "Kepler" GPUs" under legacy releases; https://www.nvidia.com/en-us/drivers/unix/
# legacy-gpu/ lists the Tesla K80 and GRID K520 there). The pinned branch
# (versions.NVIDIA_DRIVER_BRANCH) and the pools' default image's driver are newer.
KEPLER_GPU_FAMILIES = {"p2": "K80", "g2": "GRID K520"}


def instance_family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def subnet_cidrs(vpc: VpcSettings) -> list[str]:
    """The subnets the program creates: as configured, or the first /24s of the VPC."""
    if vpc.subnet_cidrs:
        return list(vpc.subnet_cidrs)
    network = ipaddress.ip_network(vpc.cidr)
    return [str(s) for s in itertools.islice(network.subnets(new_prefix=24), vpc.availability_zones)]


def private_subnet_cidrs(vpc: VpcSettings) -> list[str]:
    """The private subnets the program creates with egress nat: as configured, or the /24s
    after the public ones."""
    if vpc.private_subnet_cidrs:
        return list(vpc.private_subnet_cidrs)
    network = ipaddress.ip_network(vpc.cidr)
    if network.prefixlen > 24:
        return []
    public = [ipaddress.ip_network(cidr) for cidr in subnet_cidrs(vpc)]
    free = (str(s) for s in network.subnets(new_prefix=24)
            if not any(s.overlaps(taken) for taken in public))
    return list(itertools.islice(free, vpc.availability_zones))


def _host_in(cidr: str, offset: int) -> str:
    return str(ipaddress.ip_network(cidr)[offset])


def control_plane_address(aws: AwsSettings) -> str:
    """The instance's fixed private address: configured, or .10 of the first subnet."""
    return aws.control_plane.private_ip or _host_in(subnet_cidrs(aws.vpc)[0], 10)


def controller_addresses(aws: AwsSettings, replicas: int) -> list[str]:
    """The EC2 controllers' fixed private addresses, one per availability zone in subnet
    order: the first's is control_plane_address, each other's .10 of its zone's subnet."""
    return [control_plane_address(aws),
            *(_host_in(cidr, 10) for cidr in subnet_cidrs(aws.vpc)[1:replicas])]


def controller_names(aws: AwsSettings, replicas: int) -> list[str]:
    """The EC2 controllers' host and node names: aws.controlPlane.name, then the same with
    -2, -3, ... (the first keeps its name, and with it its resources' names)."""
    name = aws.control_plane.name
    return [name, *(f"{name}-{index}" for index in range(2, replicas + 1))]


def api_load_balancer_addresses(aws: AwsSettings, replicas: int) -> list[str]:
    """The API load balancer's fixed private address in each controller's zone, .11 of its
    subnet; the first is the address every node and user dials (a fixed address, unlike
    the load balancer's DNS name, is known before `pulumi up` and needs no DNS on-prem)."""
    return [_host_in(cidr, 11) for cidr in subnet_cidrs(aws.vpc)[:replicas]]


def efs_mount_target_addresses(vpc: VpcSettings) -> list[str]:
    """Fixed mount-target addresses (.20 of each created subnet): known before `pulumi up`,
    so on-prem nodes mount by address with no AWS DNS."""
    return [_host_in(cidr, 20) for cidr in subnet_cidrs(vpc)]


def cluster_cidrs(vpc: VpcSettings, lan_cidr: Optional[str],
                  vpn: Optional[VpnSettings]) -> list[str]:
    """The networks cluster nodes talk to the AWS side from: the VPC, on hybrid the LAN,
    and the tunnel our VPN gateway (a node too) sends from."""
    cidrs = [vpc.cidr]
    if lan_cidr:
        cidrs.append(lan_cidr)
    if vpn is not None and vpn.mode == "server-on-ec2":
        cidrs.append(vpn.tunnel_cidr)
    return cidrs


def pool_subnet_cidrs(vpc: VpcSettings) -> list[str]:
    """Where the pools' instances get their addresses (components/aws/network.py
    node_subnet_ids): the public subnets with egress public, the private ones with nat; in
    an adopted VPC, aws.vpc.poolSubnetCidrs, or without it (the config then does not give
    the subnets' CIDRs) the VPC."""
    if vpc.id:
        return list(vpc.pool_subnet_cidrs) or [vpc.cidr]
    return private_subnet_cidrs(vpc) if vpc.egress == "nat" else subnet_cidrs(vpc)


def node_cidrs(vpc: VpcSettings, onprem_addresses: Sequence[str],
               pools: bool = False) -> list[str]:
    """Where the nodes reach the control plane's node ports from: each on-prem node's own
    address (hybrid) and, with pools there, the subnets their instances get addresses in;
    or the VPC the pools' instances get addresses in (cloud); never the office LAN or the
    VPN range as a whole. RKE2's inbound rules: 8472/udp, 9099, 10250 and
    9345 from "All RKE2 nodes" only, and "The VXLAN port on nodes should not be exposed"
    (rancher/rke2-docs docs/install/requirements.md, "Inbound Network Rules", Canal tab)."""
    if onprem_addresses:
        return ([f"{address}/32" for address in onprem_addresses]
                + (pool_subnet_cidrs(vpc) if pools else []))
    return [vpc.cidr]


def tunnel_server_address(vpn: VpnSettings) -> str:
    return _host_in(vpn.tunnel_cidr, 1)
