"""Rules that span several fields. They run on whatever parsed, so one pass reports
every problem: a host with a bad address is left out of the uniqueness checks, not
allowed to hide them."""

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Optional

from config.cloud import (
    NVIDIA_GPU_FAMILIES,
    AwsSettings,
    VpnSettings,
    instance_family,
    subnet_cidrs,
)
from config.model import Host, HostTuning, NetworkSettings, SshSettings, StorageSettings
from config.problems import Problem

# Label prefixes the kubelet may set on its own node (NodeRestriction admission).
_KUBELET_ALLOWED_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


@dataclass
class PartialConfig:
    """The sections of a stack config that parsed; None where a section did not."""

    layout: Optional[str] = None
    network: Optional[NetworkSettings] = None
    ssh: Optional[SshSettings] = None
    tuning: Optional[HostTuning] = None
    hosts: list[tuple[int, Host]] = field(default_factory=list)
    all_hosts_parsed: bool = True
    storage: Optional[StorageSettings] = None
    aws: Optional[AwsSettings] = None
    vpn: Optional[VpnSettings] = None
    pools: list = field(default_factory=list)
    has_aws: bool = False
    has_vpn: bool = False
    has_ssh_private_key: bool = False
    has_bastion_private_key: bool = False
    vpn_client_profile: str = ""


def cross_checks(cfg: PartialConfig) -> list[Problem]:
    problems: list[Problem] = []
    problems += _networks_disjoint(cfg)
    problems += _hosts_unique(cfg)
    problems += _hosts_on_lan(cfg)
    problems += _roles(cfg)
    problems += _host_fields(cfg)
    problems += _ssh_keys(cfg)
    problems += _tuning(cfg)
    problems += _storage(cfg)
    problems += _hybrid(cfg)
    problems += _cloud(cfg)
    return problems


def _networks_disjoint(cfg: PartialConfig) -> list[Problem]:
    if cfg.network is None:
        return []
    named = {
        "network.lanCidr": cfg.network.lan_cidr,
        "network.podCidr": cfg.network.pod_cidr,
        "network.serviceCidr": cfg.network.service_cidr,
    }
    named = {key: cidr for key, cidr in named.items() if cidr}
    if cfg.layout in ("hybrid", "cloud") and cfg.aws is not None:
        named["aws.vpc.cidr"] = cfg.aws.vpc.cidr
    if cfg.layout == "hybrid" and cfg.vpn is not None:
        named["vpn.tunnelCidr"] = cfg.vpn.tunnel_cidr
    problems = []
    keys = list(named)
    for i, first in enumerate(keys):
        for second in keys[i + 1 :]:
            a, b = ipaddress.ip_network(named[first]), ipaddress.ip_network(named[second])
            if a.overlaps(b):
                problems.append(
                    Problem(second, f"{b} overlaps gpu-cluster:{first} {a}; the networks must be disjoint")
                )
    return problems


def _hosts_unique(cfg: PartialConfig) -> list[Problem]:
    problems = []
    for attribute, key in (("name", "name"), ("address", "address")):
        first_seen: dict[str, int] = {}
        for index, host in cfg.hosts:
            value = getattr(host, attribute)
            if value in first_seen:
                problems.append(
                    Problem(
                        f"hosts[{index}].{key}",
                        f"'{value}' is already used by gpu-cluster:hosts[{first_seen[value]}]; "
                        f"host {key}s must be unique",
                    )
                )
            else:
                first_seen[value] = index
    return problems


def _hosts_on_lan(cfg: PartialConfig) -> list[Problem]:
    if cfg.network is None or cfg.layout not in ("bare-metal", "hybrid"):
        return []
    if cfg.network.lan_cidr is None:
        return [Problem("network.lanCidr", f"is required by the {cfg.layout} layout: the "
                        "on-prem LAN the hosts are on")]
    lan = ipaddress.ip_network(cfg.network.lan_cidr)
    return [
        Problem(
            f"hosts[{index}].address",
            f"{host.address} is outside gpu-cluster:network.lanCidr {lan}",
        )
        for index, host in cfg.hosts
        if ipaddress.ip_address(host.address) not in lan
    ]


def _roles(cfg: PartialConfig) -> list[Problem]:
    if not cfg.all_hosts_parsed:
        return []
    if cfg.layout == "hybrid":
        problems = [Problem(f"hosts[{index}].role", "the hybrid layout's control plane runs on "
                            "EC2 (gpu-cluster:aws.controlPlane); on-prem hosts are workers")
                    for index, host in cfg.hosts if host.runs_control_plane]
        if not cfg.hosts:
            problems.append(Problem("hosts", "the hybrid layout needs on-prem worker hosts"))
        return problems
    if cfg.layout != "bare-metal":
        return []
    controllers = [index for index, host in cfg.hosts if host.runs_control_plane]
    workers = [index for index, host in cfg.hosts if host.runs_workloads]
    problems = []
    if not controllers:
        problems.append(
            Problem("hosts", "a bare-metal cluster needs exactly one host with role 'controller' "
                    "or 'controller+worker'; there is none")
        )
    for index in controllers[1:]:
        problems.append(
            Problem(f"hosts[{index}].role",
                    f"a second control-plane host; gpu-cluster:hosts[{controllers[0]}] is already "
                    "the controller and only one is supported")
        )
    if not workers:
        problems.append(
            Problem("hosts", "no host runs workloads: add a host with role 'worker' "
                    "(or make the controller 'controller+worker')")
        )
    return problems


def _host_fields(cfg: PartialConfig) -> list[Problem]:
    problems = []
    for index, host in cfg.hosts:
        if host.gpu_model and host.gpus == 0:
            problems.append(
                Problem(f"hosts[{index}].gpuModel", "is set but gpus is 0; set gpus to the host's GPU count")
            )
        for key in host.labels:
            if _kubelet_may_not_set(key):
                problems.append(
                    Problem(f"hosts[{index}].labels.{key}",
                            "the kubelet may not set labels under kubernetes.io/ or k8s.io/ except "
                            "kubelet.kubernetes.io/ and node.kubernetes.io/ (NodeRestriction)")
                )
        if host.role == "controller" and (host.gpus or host.taints or host.labels):
            field_name = "gpus" if host.gpus else ("taints" if host.taints else "labels")
            problems.append(
                Problem(f"hosts[{index}].{field_name}",
                        "a 'controller' host runs no kubelet, so it has no node to carry GPUs, "
                        "labels or taints; use role 'controller+worker'")
            )
    return problems


def _kubelet_may_not_set(key: str) -> bool:
    prefix, _, _ = key.rpartition("/")
    if not prefix:
        return False
    restricted = prefix.endswith("kubernetes.io") or prefix.endswith("k8s.io")
    return restricted and not key.startswith(_KUBELET_ALLOWED_PREFIXES)


def _ssh_keys(cfg: PartialConfig) -> list[Problem]:
    problems = []
    if cfg.hosts and not cfg.has_ssh_private_key:
        problems.append(
            Problem("sshPrivateKey",
                    "is required to reach the hosts; set it with "
                    "`pulumi config set --secret gpu-cluster:sshPrivateKey < ~/.ssh/id_ed25519`")
        )
    if cfg.has_bastion_private_key and cfg.ssh is not None and cfg.ssh.bastion is None:
        problems.append(Problem("bastionPrivateKey", "is set but gpu-cluster:ssh.bastion is not"))
    return problems


def _tuning(cfg: PartialConfig) -> list[Problem]:
    if cfg.tuning is None:
        return []
    if cfg.tuning.cpu_manager_policy == "static" and not cfg.tuning.reserved_cpus:
        return [
            Problem("tuning.reservedCpus",
                    "is required when tuning.cpuManagerPolicy is 'static' (CPUs kept for the "
                    "system and kubelet, e.g. '0-1')")
        ]
    return []


def _storage(cfg: PartialConfig) -> list[Problem]:
    storage = cfg.storage
    if storage is None:
        return []
    backends = storage.backends
    if not backends:
        return [Problem("storage", "configure a backend: nfs or efs (shared, ReadWriteMany) or "
                        "localPath (node-local); it becomes the default StorageClass")]
    problems = []
    defaults = [name for name, backend in backends.items() if backend.default]
    if len(backends) == 1:
        name, backend = next(iter(backends.items()))
        if backend.default is False:
            problems.append(Problem(f"storage.{name}.default",
                                    "the only backend must be the default StorageClass"))
    elif len(defaults) != 1:
        listed = " and ".join(defaults) if defaults else "none"
        problems.append(Problem("storage", "exactly one backend must set default: true "
                                f"(the default StorageClass); now: {listed}"))
    nfs = storage.nfs
    if nfs is not None:
        if (nfs.server is None) == (nfs.host is None):
            problems.append(Problem("storage.nfs", "set either server (an existing NFS server) "
                                    "or host (a cluster host to serve NFS), not both or neither"))
        names = [host.name for _, host in cfg.hosts]
        if nfs.host is not None and cfg.all_hosts_parsed and nfs.host not in names:
            problems.append(Problem("storage.nfs.host", f"'{nfs.host}' is not one of the "
                                    f"configured hosts ({', '.join(names)})"))
    return problems


def _hybrid(cfg: PartialConfig) -> list[Problem]:
    problems = []
    if cfg.layout != "cloud" and cfg.pools:
        problems.append(Problem("pools", "EC2 worker pools are only used by the cloud layout"))
    if cfg.layout == "bare-metal":
        for key, present in (("aws", cfg.has_aws), ("vpn", cfg.has_vpn)):
            if present:
                problems.append(Problem(key, "only used by the hybrid and cloud layouts"))
        efs = cfg.storage.efs if cfg.storage else None
        if efs is not None and efs.mount_target_address is None:
            problems.append(Problem("storage.efs.mountTargetAddress",
                                    "is required on bare-metal (the AWS layouts create the file "
                                    "system; here it must exist)"))
        return problems
    if cfg.layout != "hybrid":
        return problems
    for key, present, what in (("aws", cfg.has_aws, "the region, VPC and control-plane instance"),
                               ("vpn", cfg.has_vpn, "the OpenVPN bridge to the on-prem LAN")):
        if not present:
            problems.append(Problem(key, f"is required by the hybrid layout: {what}"))
    aws = cfg.aws
    if aws is not None:
        problems += _aws(aws)
        problems += _efs_on_aws(cfg, aws)
    vpn = cfg.vpn
    if vpn is not None:
        problems += _vpn_mode(cfg, vpn)
    if vpn is not None and cfg.all_hosts_parsed:
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
    return problems


def _aws(aws: AwsSettings) -> list[Problem]:
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
    if vpc.id is not None:
        if len(vpc.subnet_ids) < 2:
            problems.append(Problem("aws.vpc.subnetIds", "an adopted VPC needs at least two "
                                    "subnets (in different availability zones)"))
        if not vpc.route_table_ids:
            problems.append(Problem("aws.vpc.routeTableIds", "an adopted VPC needs the route "
                                    "tables of its subnets (the on-prem LAN is routed there)"))
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
    private_ip = aws.control_plane.private_ip
    if private_ip is not None and ipaddress.ip_address(private_ip) not in network:
        problems.append(Problem("aws.controlPlane.privateIp",
                                f"{private_ip} is outside gpu-cluster:aws.vpc.cidr {network}"))
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
        return problems
    if vpn.existing_server_address is None:
        problems.append(Problem("vpn.existingServerAddress", "is required with "
                                "client-to-existing: the existing OpenVPN server's LAN address"))
    elif cfg.network is not None and ipaddress.ip_address(vpn.existing_server_address) \
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
    for key, value in (("vpn.onpremGateway", vpn.onprem_gateway),
                       ("vpn.clientSourceCidrs", vpn.client_source_cidrs)):
        if value:
            problems.append(Problem(key, "is only used with vpn.mode server-on-ec2"))
    return problems


def _cloud(cfg: PartialConfig) -> list[Problem]:
    if cfg.layout != "cloud":
        return []
    problems = []
    if cfg.hosts or not cfg.all_hosts_parsed:
        problems.append(Problem("hosts", "a cloud stack has no on-prem hosts: remove them, or "
                                "use the hybrid layout to join them over a VPN"))
    if not cfg.has_aws:
        problems.append(Problem("aws", "is required by the cloud layout: the region, VPC and "
                                "control-plane instance"))
    if cfg.has_vpn:
        problems.append(Problem("vpn", "a cloud stack has no on-prem network to bridge"))
    if cfg.network is not None and cfg.network.lan_cidr:
        problems.append(Problem("network.lanCidr", "a cloud stack has no on-prem LAN"))
    if cfg.storage is not None and cfg.storage.nfs is not None and cfg.storage.nfs.host:
        problems.append(Problem("storage.nfs.host", "a cloud stack has no hosts to serve NFS; "
                                "use efs, or nfs with an existing server"))
    if cfg.aws is not None:
        problems += _aws(cfg.aws)
        problems += _efs_on_aws(cfg, cfg.aws)
    if not cfg.pools:
        problems.append(Problem("pools", "add at least one worker pool (name, instanceType, "
                                "count, gpus)"))
    seen: dict[str, int] = {}
    for index, pool in cfg.pools:
        if pool.name in seen:
            problems.append(Problem(f"pools[{index}].name", f"'{pool.name}' is already used by "
                                    f"gpu-cluster:pools[{seen[pool.name]}]"))
        seen.setdefault(pool.name, index)
        family = instance_family(pool.instance_type)
        if pool.gpus and family not in NVIDIA_GPU_FAMILIES:
            known = ", ".join(sorted(NVIDIA_GPU_FAMILIES))
            problems.append(Problem(f"pools[{index}].instanceType",
                                    f"'{pool.instance_type}' has no NVIDIA GPU but the pool "
                                    f"claims {pool.gpus}; GPU families: {known}"))
        if pool.gpu_model and not pool.gpus:
            problems.append(Problem(f"pools[{index}].gpuModel", "is set but gpus is 0"))
    return problems


def _efs_on_aws(cfg: PartialConfig, aws: AwsSettings) -> list[Problem]:
    """On the AWS layouts the program creates the file system; its first mount target's
    address is computed, or given (required with an adopted VPC)."""
    problems = []
    efs = cfg.storage.efs if cfg.storage else None
    if efs is not None and efs.mount_target_address is None and aws.vpc.id is not None:
        problems.append(Problem("storage.efs.mountTargetAddress",
                                "is required with an adopted VPC: the address of the file "
                                "system's mount target in the first subnet"))
    if efs is not None and efs.mount_target_address is not None and aws.vpc.id is None:
        first = ipaddress.ip_network(subnet_cidrs(aws.vpc)[0])
        if ipaddress.ip_address(efs.mount_target_address) not in first:
            problems.append(Problem("storage.efs.mountTargetAddress",
                                    f"{efs.mount_target_address} is outside the first "
                                    f"subnet {first}"))
    return problems
