"""Cross-field rules of the AWS layouts (hybrid and cloud): the VPC, the VPN bridge, the
worker pools and the file system the program creates."""

import ipaddress
import re

from config import versions
from config.cloud import (
    KEPLER_GPU_FAMILIES,
    NVIDIA_GPU_FAMILIES,
    AwsSettings,
    VpnSettings,
    controller_names,
    instance_family,
    private_subnet_cidrs,
    subnet_cidrs,
)
from config.partial import PartialConfig
from config.pool_checks import pool_checks
from config.storage import efs_mounts_with_iam
from config.problems import Problem


# The hybrid layout's volumes are kubelet `nfs` volumes: the kernel's NFS client, no IAM
# identity, no TLS (those need the EFS mount helper: https://docs.aws.amazon.com/efs/
# latest/ug/mounting-IAM-option.html, https://docs.aws.amazon.com/efs/latest/ug/
# encryption-in-transit.html), and its on-prem hosts have no AWS identity the helper could
# use (aws/efs-utils v3.2.0 src/efs_utils_common/aws_credentials.py:79-146 takes one from
# a credentials URI, a named profile, Pod Identity, web identity or the instance's role).
ANONYMOUS_NFS_REQUIRED = (
    "must be true on the hybrid layout without storage.efs.issuerBucket: its on-prem hosts "
    "then have no AWS identity and mount EFS "
    "with the kernel's NFS client (Kubernetes `nfs` volumes), which presents no IAM identity "
    "and no TLS, so under the file system policy that requires both (the default) no node "
    "could mount it. With true, any client the security group admits (the node addresses "
    "only) mounts as root; docs/layouts.md, \"EFS access\"")


ISSUER_BUCKET_HYBRID_ONLY = (
    "is only used on the hybrid layout, whose on-prem hosts have no instance role; remove it")


# An on-prem host's export admits nodes by their own addresses only (serve-nfs.sh refuses
# a network), and a pool instance's address is not known before it starts.
POOLS_WITHOUT_NFS_HOST = (
    "an on-prem host exports NFS to each node's own address, and the pools' instances get "
    "theirs only as they start: with pools, use storage.efs (the pools reach it in the VPC, "
    "the on-prem hosts through the tunnel), or storage.nfs.server, an existing server that "
    "exports to the pools' subnets (docs/layouts.md, \"Pools on hybrid\")")


def hybrid_checks(cfg: PartialConfig) -> list[Problem]:
    problems = []
    if cfg.layout == "bare-metal" and cfg.pools:
        problems.append(Problem("pools", "EC2 worker pools are only used by the hybrid and "
                                "cloud layouts"))
    if cfg.layout == "bare-metal":
        for key, present in (("aws", cfg.given("aws")), ("vpn", cfg.given("vpn"))):
            if present:
                problems.append(Problem(key, "only used by the hybrid and cloud layouts"))
        efs = cfg.storage.efs if cfg.storage else None
        if efs is not None and efs.mount_target_address is None:
            problems.append(Problem("storage.efs.mountTargetAddress",
                                    "is required on bare-metal (the AWS layouts create the file "
                                    "system; here it must exist)"))
        if efs is not None and efs.issuer_bucket is not None:
            problems.append(Problem("storage.efs.issuerBucket", ISSUER_BUCKET_HYBRID_ONLY))
        return problems
    if cfg.layout != "hybrid":
        return problems
    for key, present, what in (("aws", cfg.given("aws"), "the region, VPC and control-plane instance"),
                               ("vpn", cfg.given("vpn"), "the OpenVPN bridge to the on-prem LAN")):
        if not present:
            problems.append(Problem(key, f"is required by the hybrid layout: {what}"))
    aws = cfg.aws
    if aws is not None:
        problems += _aws(aws, cfg.layout)
        problems += _efs_on_aws(cfg, aws)
    vpn = cfg.vpn
    if vpn is not None:
        problems += _vpn_mode(cfg, vpn)
        problems += _vpn_users(cfg, vpn)
    if vpn is not None and cfg.complete("hosts"):
        names = [host.name for _, host in cfg.hosts]
        if vpn.mode == "server-on-ec2" and vpn.onprem_gateway not in names + [None]:
            problems.append(Problem("vpn.onpremGateway",
                                    f"'{vpn.onprem_gateway}' is not one of the configured hosts "
                                    f"({', '.join(names) or 'none'}); the gateway runs the "
                                    "OpenVPN client on-prem"))
        if aws is not None and aws.control_plane.name in names:
            problems.append(Problem("aws.controlPlane.name",
                                    f"'{aws.control_plane.name}' is also an on-prem host's name"))
    if vpn is not None and cfg.network is not None and cfg.network.mtu:
        # VXLAN adds 50 bytes; pod packets crossing the tunnel must fit in it.
        if cfg.network.mtu > vpn.mtu - 50:
            problems.append(Problem("network.mtu", f"{cfg.network.mtu} does not fit through the "
                                    f"tunnel (vpn.mtu {vpn.mtu} minus 50 bytes of VXLAN)"))
    return problems + ec2_pool_checks(cfg)


def _aws(aws: AwsSettings, layout: str) -> list[Problem]:
    problems = []
    if "0.0.0.0/0" in aws.admin_cidrs and not aws.allow_ssh_from_anywhere:
        problems.append(Problem("aws.adminCidrs", "0.0.0.0/0 would open SSH and the Kubernetes "
                                "API to the internet; list your networks, or set "
                                "aws.allowSshFromAnywhere: true to mean it"))
    if not aws.admin_cidrs:
        problems.append(Problem("aws.adminCidrs", "list at least one network administrators "
                                "(and `pulumi up`) connect from"))
    vpc = aws.vpc
    network = ipaddress.ip_network(vpc.cidr)
    size_problems = _vpc_size(vpc, network)
    problems += size_problems
    if vpc.id is not None:
        if len(vpc.subnet_ids) < 2:
            problems.append(Problem("aws.vpc.subnetIds", "an adopted VPC needs at least two "
                                    "subnets (in different availability zones)"))
        if "cidr" not in vpc.model_fields_set:
            problems.append(Problem("aws.vpc.cidr", f"is required with an adopted VPC "
                                    f"({vpc.id}): its IPv4 CIDR, which the security groups "
                                    "open the API and NFS to (`aws ec2 describe-vpcs "
                                    f"--vpc-ids {vpc.id} --query 'Vpcs[0].CidrBlock'`)"))
        # The on-prem LAN is routed through the VPN there; the cloud layout has neither.
        if layout == "hybrid" and not vpc.route_table_ids:
            problems.append(Problem("aws.vpc.routeTableIds", "an adopted VPC needs the route "
                                    "tables of its subnets (the on-prem LAN is routed there)"))
        elif layout == "cloud" and vpc.route_table_ids:
            problems.append(Problem("aws.vpc.routeTableIds", "is not used by the cloud layout "
                                    "(it routes the on-prem LAN through the VPN, which a "
                                    "cloud stack has not); remove it"))
        if aws.control_plane.private_ip is None:
            problems.append(Problem("aws.controlPlane.privateIp", "is required with an adopted "
                                    "VPC (an address in the first subnet)"))
    elif vpc.subnet_ids or vpc.route_table_ids:
        problems.append(Problem("aws.vpc.subnetIds", "adopting subnets needs aws.vpc.id too"))
    if vpc.subnet_cidrs and len(vpc.subnet_cidrs) != vpc.availability_zones:
        problems.append(Problem("aws.vpc.subnetCidrs", f"lists {len(vpc.subnet_cidrs)} subnets "
                                f"for {vpc.availability_zones} availability zones"))
    for index, cidr in enumerate(vpc.subnet_cidrs):
        if not ipaddress.ip_network(cidr).subnet_of(network):
            problems.append(Problem(f"aws.vpc.subnetCidrs[{index}]",
                                    f"{cidr} is outside gpu-cluster:aws.vpc.cidr {network}"))
    if not size_problems:
        problems += _egress(vpc, network)
    private_ip = aws.control_plane.private_ip
    # An adopted VPC's own network is unknown without aws.vpc.cidr (its problem is above):
    # nothing is compared with a default the user never set.
    cidr_known = vpc.id is None or "cidr" in vpc.model_fields_set
    if private_ip is not None and cidr_known and ipaddress.ip_address(private_ip) not in network:
        problems.append(Problem("aws.controlPlane.privateIp",
                                f"{private_ip} is outside gpu-cluster:aws.vpc.cidr {network}"))
    return problems


def _egress(vpc, network) -> list[Problem]:
    """Private subnets exist only behind a NAT gateway, and need room in the VPC."""
    if vpc.egress != "nat":
        return [Problem(key, "is only used with aws.vpc.egress: nat")
                for key, value in (("aws.vpc.privateSubnetCidrs", vpc.private_subnet_cidrs),
                                   ("aws.vpc.privateSubnetIds", vpc.private_subnet_ids))
                if value]
    if vpc.id is not None:
        if len(vpc.private_subnet_ids) < 2:
            return [Problem("aws.vpc.privateSubnetIds", "egress nat with an adopted VPC needs "
                            "at least two private subnets (in different availability zones) "
                            "that route to a NAT gateway")]
        return []
    problems = []
    if vpc.private_subnet_cidrs and len(vpc.private_subnet_cidrs) != vpc.availability_zones:
        problems.append(Problem("aws.vpc.privateSubnetCidrs",
                                f"lists {len(vpc.private_subnet_cidrs)} subnets for "
                                f"{vpc.availability_zones} availability zones"))
    public = [ipaddress.ip_network(cidr) for cidr in subnet_cidrs(vpc)]
    for index, cidr in enumerate(vpc.private_subnet_cidrs):
        subnet = ipaddress.ip_network(cidr)
        if not subnet.subnet_of(network):
            problems.append(Problem(f"aws.vpc.privateSubnetCidrs[{index}]",
                                    f"{cidr} is outside gpu-cluster:aws.vpc.cidr {network}"))
        elif any(subnet.overlaps(taken) for taken in public):
            problems.append(Problem(f"aws.vpc.privateSubnetCidrs[{index}]",
                                    f"{cidr} overlaps a public subnet"))
    if not vpc.private_subnet_cidrs and \
            len(private_subnet_cidrs(vpc)) < vpc.availability_zones:
        problems.append(Problem("aws.vpc.cidr", f"{network} has no room for "
                                f"{vpc.availability_zones} private /24 subnets beside the "
                                "public ones; use a larger network or set "
                                "aws.vpc.privateSubnetCidrs"))
    return problems


def _vpc_size(vpc, network) -> list[Problem]:
    """AWS's VPC sizes, and room for the subnets and the fixed addresses (.10 control
    plane, .11 its load balancer, .20 EFS) the program puts in them."""
    if not 16 <= network.prefixlen <= 28:
        return [Problem("aws.vpc.cidr", f"{network} is not a size AWS allows for a VPC "
                        "(/16 to /28)")]
    if vpc.id is None and not vpc.subnet_cidrs and \
            (network.prefixlen > 24 or 2 ** (24 - network.prefixlen) < vpc.availability_zones):
        return [Problem("aws.vpc.cidr", f"{network} cannot hold {vpc.availability_zones} /24 "
                        "subnets (one per availability zone); use a larger network or set "
                        "aws.vpc.subnetCidrs")]
    return [Problem(f"aws.vpc.subnetCidrs[{index}]", f"{cidr} is too small: the program uses "
                    "its addresses .10, .11 and .20; use a /27 or larger")
            for index, cidr in enumerate(vpc.subnet_cidrs)
            if ipaddress.ip_network(cidr).prefixlen > 27]


def _vpn_users(cfg: PartialConfig, vpn: VpnSettings) -> list[Problem]:
    """vpn.userNetworks names users of access.users; the tunnel has an address for each
    user (components/network/vpn_clients.py: users from its 16th address on)."""
    if vpn.mode != "server-on-ec2":
        return [Problem("vpn.userNetworks", "is only used with vpn.mode server-on-ec2")] \
            if vpn.user_networks else []
    if cfg.access is None:
        return []
    users = [user.name for user in cfg.access.users]
    problems = [Problem(f"vpn.userNetworks.{name}", f"'{name}' is not one of access.users "
                        f"({', '.join(users) or 'none'})")
                for name in vpn.user_networks if name not in users]
    slots = max(0, ipaddress.ip_network(vpn.tunnel_cidr).num_addresses - 17)
    if len(users) > slots:
        problems.append(Problem("vpn.tunnelCidr", f"{vpn.tunnel_cidr} has VPN addresses for "
                                f"{slots} users, and access.users has {len(users)}; use a "
                                "larger network"))
    return problems


def _vpn_mode(cfg: PartialConfig, vpn: VpnSettings) -> list[Problem]:
    problems = []
    if vpn.mode == "server-on-ec2":
        if vpn.onprem_gateway is None:
            problems.append(Problem("vpn.onpremGateway", "is required: the on-prem host that "
                                    "runs the OpenVPN client and routes the LAN to the VPC"))
        if not vpn.client_source_cidrs:
            problems.append(Problem("vpn.clientSourceCidrs", "is required: the public addresses "
                                    "the on-prem gateway connects from (the VPN port is open to "
                                    "them only)"))
        if cfg.vpn_client_profile:
            problems.append(Problem("vpnClientProfile", "is only used with vpn.mode "
                                    "client-to-existing"))
        if vpn.previous_ca_trusted and vpn.pki_generation == 0:
            problems.append(Problem("vpn.previousCaTrusted", "there is no previous CA at "
                                    "vpn.pkiGeneration 0: raise vpn.pkiGeneration by one "
                                    "in the same change to start a rotation"))
        return problems
    if vpn.existing_server_address is None:
        problems.append(Problem("vpn.existingServerAddress", "is required with "
                                "client-to-existing: the existing OpenVPN server's LAN address"))
    elif cfg.network is not None and cfg.network.lan_cidr is not None and \
            ipaddress.ip_address(vpn.existing_server_address) \
            not in ipaddress.ip_network(cfg.network.lan_cidr):
        problems.append(Problem("vpn.existingServerAddress",
                                f"{vpn.existing_server_address} is outside "
                                f"gpu-cluster:network.lanCidr {cfg.network.lan_cidr}"))
    if not cfg.vpn_client_profile:
        problems.append(Problem("vpnClientProfile", "is required with client-to-existing: the "
                                "EC2 side's profile from the existing server; set it with "
                                "`pulumi config set --secret gpu-cluster:vpnClientProfile "
                                "< profile.ovpn`"))
    elif not re.search(r"^\s*client\s*$", cfg.vpn_client_profile, re.M) or \
            not re.search(r"^\s*remote\s+\S+", cfg.vpn_client_profile, re.M):
        problems.append(Problem("vpnClientProfile", "is not an OpenVPN client profile (it "
                                "needs the `client` and `remote` directives)"))
    # The existing server's PKI is its own: its profile is rotated there (vpnClientProfile).
    for key, value in (("vpn.onpremGateway", vpn.onprem_gateway),
                       ("vpn.clientSourceCidrs", vpn.client_source_cidrs),
                       ("vpn.pkiGeneration", vpn.pki_generation),
                       ("vpn.previousCaTrusted", vpn.previous_ca_trusted)):
        if value:
            problems.append(Problem(key, "is only used with vpn.mode server-on-ec2"))
    return problems


def cloud_checks(cfg: PartialConfig) -> list[Problem]:
    if cfg.layout != "cloud":
        return []
    problems = []
    if cfg.hosts or not cfg.complete("hosts"):
        problems.append(Problem("hosts", "a cloud stack has no on-prem hosts: remove them, or "
                                "use the hybrid layout to join them over a VPN"))
    if not cfg.given("aws"):
        problems.append(Problem("aws", "is required by the cloud layout: the region, VPC and "
                                "control-plane instance"))
    if cfg.given("vpn"):
        problems.append(Problem("vpn", "a cloud stack has no on-prem network to bridge"))
    if cfg.network is not None and cfg.network.lan_cidr:
        problems.append(Problem("network.lanCidr", "a cloud stack has no on-prem LAN"))
    if cfg.storage is not None and cfg.storage.nfs is not None and cfg.storage.nfs.host:
        problems.append(Problem("storage.nfs.host", "a cloud stack has no hosts to serve NFS; "
                                "use efs, or nfs with an existing server"))
    if cfg.aws is not None:
        problems += _aws(cfg.aws, cfg.layout)
        problems += _efs_on_aws(cfg, cfg.aws)
    if not cfg.pools and cfg.complete("pools"):
        problems.append(Problem("pools", "add at least one worker pool (name, instanceType, "
                                "count, gpus)"))
    return problems + ec2_pool_checks(cfg)


def _efs_on_aws(cfg: PartialConfig, aws: AwsSettings) -> list[Problem]:
    """On the AWS layouts the program creates the file system; its first mount target's
    address is computed, or given (required with an adopted VPC)."""
    problems = []
    efs = cfg.storage.efs if cfg.storage else None
    if efs is not None and not efs.anonymous_nfs and not efs_mounts_with_iam(cfg.layout, efs):
        problems.append(Problem("storage.efs.anonymousNfs", ANONYMOUS_NFS_REQUIRED))
    if efs is not None and efs.issuer_bucket is not None and cfg.layout != "hybrid":
        problems.append(Problem("storage.efs.issuerBucket", ISSUER_BUCKET_HYBRID_ONLY))
    if efs is not None and not efs_mounts_with_iam(cfg.layout, efs):
        for key, name in (("directory_perms", "directoryPerms"),
                          ("gid_range_start", "gidRangeStart"), ("gid_range_end", "gidRangeEnd")):
            if key in efs.model_fields_set:
                problems.append(Problem(f"storage.efs.{name}", "is only used where the "
                                        "claims are EFS access points (cloud, or hybrid with "
                                        "storage.efs.issuerBucket); remove it"))
    if efs is not None and efs_mounts_with_iam(cfg.layout, efs) \
            and efs.gid_range_end <= efs.gid_range_start:
        problems.append(Problem("storage.efs.gidRangeEnd",
                                f"{efs.gid_range_end} must be greater than gidRangeStart "
                                f"{efs.gid_range_start}: each claim takes its own id from "
                                "the range"))
    if efs is not None and efs.mount_target_address is None and aws.vpc.id is not None:
        problems.append(Problem("storage.efs.mountTargetAddress",
                                "is required with an adopted VPC: the address of the file "
                                "system's mount target in the first subnet"))
    # A VPC too small for its subnets has its own problem, and no first subnet.
    if efs is not None and efs.mount_target_address is not None and aws.vpc.id is None \
            and not _vpc_size(aws.vpc, ipaddress.ip_network(aws.vpc.cidr)):
        first = ipaddress.ip_network(subnet_cidrs(aws.vpc)[0])
        if ipaddress.ip_address(efs.mount_target_address) not in first:
            problems.append(Problem("storage.efs.mountTargetAddress",
                                    f"{efs.mount_target_address} is outside the first "
                                    f"subnet {first}"))
    return problems


def ec2_pool_checks(cfg: PartialConfig) -> list[Problem]:
    """The pools of either AWS layout: unique names, none a host's or an EC2 controller's
    (a pool's boot plan and status are kept under its name beside theirs:
    components/aws/ssm_paths.py boot_status), GPU instance families, then each pool's own
    rules (config/pool_checks.py)."""
    problems = _pool_subnet_cidrs(cfg)
    nfs = cfg.storage.nfs if cfg.storage else None
    if cfg.layout == "hybrid" and cfg.pools and nfs is not None and nfs.host is not None:
        problems.append(Problem("storage.nfs.host", POOLS_WITHOUT_NFS_HOST))
    machines = {h.name for _, h in cfg.hosts} if cfg.layout == "hybrid" else set()
    if cfg.aws is not None:
        plane = cfg.kubernetes.control_plane if cfg.kubernetes else None
        machines |= set(controller_names(cfg.aws, (plane.replicas if plane else 1) or 1))
    seen: dict[str, int] = {}
    for index, pool in cfg.pools:
        if pool.name in seen:
            problems.append(Problem(f"pools[{index}].name", f"'{pool.name}' is already used by "
                                    f"gpu-cluster:pools[{seen[pool.name]}]"))
        seen.setdefault(pool.name, index)
        if pool.name in machines:
            problems.append(Problem(f"pools[{index}].name", f"'{pool.name}' is already the "
                                    "name of a host or an EC2 controller"))
        family = instance_family(pool.instance_type)
        if family in KEPLER_GPU_FAMILIES:
            problems.append(Problem(
                f"pools[{index}].instanceType",
                f"'{pool.instance_type}' has NVIDIA {KEPLER_GPU_FAMILIES[family]} GPUs "
                "(Kepler), which are unsupported: the pinned driver branch R"
                f"{versions.NVIDIA_DRIVER_BRANCH} and the pools' default image's driver "
                "dropped Kepler (R470 was its last branch, NVIDIA's legacy GPU list: "
                "https://www.nvidia.com/en-us/drivers/unix/legacy-gpu/); use a newer family "
                f"({', '.join(sorted(NVIDIA_GPU_FAMILIES))})"))
        elif pool.gpus and family not in NVIDIA_GPU_FAMILIES:
            known = ", ".join(sorted(NVIDIA_GPU_FAMILIES))
            problems.append(Problem(f"pools[{index}].instanceType",
                                    f"'{pool.instance_type}' has no NVIDIA GPU but the pool "
                                    f"claims {pool.gpus}; GPU families: {known}"))
        if pool.gpu_model and not pool.gpus:
            problems.append(Problem(f"pools[{index}].gpuModel", "is set but gpus is 0"))
    return problems + pool_checks(cfg)


def _pool_subnet_cidrs(cfg: PartialConfig) -> list[Problem]:
    """aws.vpc.poolSubnetCidrs: hybrid pools in an adopted VPC only, one CIDR per subnet the
    pools use (components/aws/network.py node_subnet_ids), each inside the VPC, disjoint."""
    vpc, key = (cfg.aws.vpc if cfg.aws else None), "aws.vpc.poolSubnetCidrs"
    if vpc is None or not vpc.pool_subnet_cidrs:
        return []
    if cfg.layout != "hybrid" or vpc.id is None or (not cfg.pools and cfg.complete("pools")):
        return [Problem(key, "is only used on the hybrid layout with pools in an adopted VPC "
                        "(aws.vpc.id); remove it")]
    ids_key, ids = (("aws.vpc.privateSubnetIds", vpc.private_subnet_ids) if vpc.egress == "nat"
                    else ("aws.vpc.subnetIds", vpc.subnet_ids))
    problems = [] if len(vpc.pool_subnet_cidrs) == len(ids) else [Problem(
        key, f"lists {len(vpc.pool_subnet_cidrs)} CIDRs for the {len(ids)} subnets of {ids_key} "
        "the pools use; give each one's CIDR")]
    network, seen = ipaddress.ip_network(vpc.cidr), []
    for index, cidr in enumerate(map(ipaddress.ip_network, vpc.pool_subnet_cidrs)):
        wrong = (f"{cidr} is outside gpu-cluster:aws.vpc.cidr {network}" if "cidr" in
                 vpc.model_fields_set and not cidr.subnet_of(network) else
                 f"{cidr} overlaps an earlier one" if any(map(cidr.overlaps, seen)) else None)
        problems += [Problem(f"{key}[{index}]", wrong)] if wrong else []
        seen.append(cidr)
    return problems
