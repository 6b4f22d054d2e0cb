"""The three layouts, each a strategy that makes the machines a cluster runs on and says
how they reach each other; components/cluster.py then builds the same cluster on any of
them. A fourth layout is a class here (or in components/aws_layouts.py, for one on AWS)
and an entry in layout_class.

- bare-metal: every host on-prem, prepared over SSH.
- hybrid: the control plane (and the VPN server) on EC2, prepared over SSH at its public
  address; on-prem GPU hosts join through OpenVPN.
- cloud: the control plane on EC2 and GPU workers in EC2 pools, all installing themselves
  at boot; the program runs no command on any machine."""

from collections.abc import Mapping
import abc
from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.addons.cluster_images import known_images, mirror_upstreams
from components.hosts.steps import registry_env
from components.kubernetes.pki import ClusterPki
from components.kubernetes.control_plane import ControlPlane
from components.distributions.base import Distribution
from components.hosts import firewall
from components.hosts.bootstrap import (
    HostBootstrap,
    HostBootstrapArgs,
    NfsExport,
    PreparedMachine,
)
from components.kubernetes.backups import BackupTarget
from components.kubernetes.upgrade import RolloutPolicy, host_drain
from components.common.remote_step import Endpoint, Ssh, SshAccess
from components.network.vpn_bridge import VpnBridge
from config.backup import BACKUP_FOLDER, backup_store
from config.cloud import control_plane_address, tunnel_server_address
from config.firewall import FIREWALL_LAYOUTS
from config.model import Host, StackConfig

@dataclass
class ClusterContext:
    """What every layout builds with; its resources are children of `parent`."""

    name: str
    settings: StackConfig
    distribution: Distribution
    pki: ClusterPki
    parent: pulumi.Resource
    # The distribution's cluster_secrets, by name.
    secrets: Mapping[str, pulumi.Output[str]] = field(default_factory=dict)


@dataclass
class Machines:
    """What a layout hands the cluster: the controller, the hosts prepared over SSH, what
    each host's join waits for, where storage is served, and what users are told."""

    controller: Host
    # Hosts prepared over SSH, by name (none on cloud).
    prepared: dict[str, PreparedMachine]
    # Every host of the cluster, for the `nodes` output.
    hosts: list[Host]
    # What the storage add-on waits for: the NFS server step, EFS mount targets.
    storage_servers: list
    # What a host's join waits for beyond its preparation (its route through the VPN).
    join_after: dict[str, list] = field(default_factory=dict)
    # The address users and `pulumi up` reach the API at, when not the controller's own.
    public_address: Optional[pulumi.Input[str]] = None
    # The instance that installs the controller itself at boot (cloud), and SSH to it:
    # a raised kubernetes.version upgrades it over SSH, as on the other layouts.
    booted: Optional[pulumi.Resource] = None
    booted_ssh: Optional[Ssh] = None
    # The EFS file system the layout created.
    efs_address: Optional[pulumi.Input[str]] = None
    # Its id, where the nodes mount it with IAM and TLS (the EFS CSI driver's StorageClass).
    efs_file_system_id: Optional[pulumi.Input[str]] = None
    # The addresses of its mount targets (AWS assigns them in an existing VPC).
    efs_mount_target_addresses: list = field(default_factory=list)
    # Users reach the API at the controller's private address (through the VPN or LAN).
    users_on_private_network: bool = False
    vpn: Optional[VpnBridge] = None
    gateways: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    images: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    control_plane_ssh_host_key: Optional[pulumi.Input[str]] = None
    # Options of resources on AWS (its provider), on the layouts that use AWS.
    aws_opts: Optional[pulumi.ResourceOptions] = None
    # Where the control plane's snapshots go (the stack output backupLocation), and what
    # the cluster installs over SSH for them (none when off, or installed at boot).
    backup_location: Optional[pulumi.Input[str]] = None
    backup: Optional[BackupTarget] = None


class Layout(abc.ABC):
    def __init__(self, context: ClusterContext):
        self.context = context
        self.pools: list[dict] = []

    @abc.abstractmethod
    def machines(self) -> Machines:
        """The machines of the cluster, prepared as this layout does it."""

    def nodes_after(self, control_plane: ControlPlane, provider: k8s.Provider,
                    machines: Machines) -> list[pulumi.Resource]:
        """Nodes that join on their own once the control plane is up (cloud pools)."""
        return []

    def _bootstrap(self, host: Host, control_plane_address: pulumi.Input[str],
                   endpoint: Optional[Endpoint] = None,
                   controller: Optional[HostBootstrap] = None) -> HostBootstrap:
        """With `controller`, a worker's node is drained from there before its host
        settings change (its drain-host step). Hosts bootstrap in parallel: no host's
        steps wait for another host's (drain-host only dials the controller)."""
        context, settings = self.context, self.context.settings
        nfs = settings.storage.nfs
        drain = None
        if controller is not None and not host.runs_control_plane:
            drain = host_drain(context.distribution, controller=controller.waiting_ssh,
                               rollout=rollout_policy(settings))
        return HostBootstrap(
            host.name,
            HostBootstrapArgs(
                host,
                SshAccess(settings.ssh, settings.ssh_private_key, settings.bastion_private_key),
                settings.tuning, settings.nvidia, context.distribution, control_plane_address,
                endpoint,
                nfs_export=(NfsExport(nfs.path, nfs_client_addresses(settings))
                            if nfs is not None and nfs.host == host.name else None),
                drain_first=drain, firewall_ruleset=host_firewall_ruleset(
                    settings, context.distribution, host),
                registries=registries_env(settings, context.distribution, ssh_password(settings))),
            opts=pulumi.ResourceOptions(parent=context.parent))



def registries_env(settings: StackConfig, distribution: Distribution,
                   password: Mapping[str, pulumi.Input[str]]) -> Optional[dict]:
    """configure-registries' inputs on every machine when the cluster has an image mirror
    (its registries: mirror_upstreams), with `password`'s inputs."""
    mirror = settings.image_mirror
    if mirror is None:
        return None
    upstreams = mirror_upstreams(mirror, known_images(settings.kubernetes, settings.network.cni))
    return registry_env(distribution, mirror, upstreams, password)


def ssh_password(settings: StackConfig) -> dict:
    """The mirror login's password as a step's input over SSH (secret in the state)."""
    mirror = settings.image_mirror
    if mirror is None or not mirror.username or settings.image_mirror_password is None:
        return {}
    return {"REGISTRY_PASSWORD": pulumi.Output.secret(
        settings.image_mirror_password.get_secret_value())}


def nfs_client_addresses(settings: StackConfig) -> tuple[str, ...]:
    """The machines that mount the NFS export a cluster host serves, by address: the hosts
    whose kubelets mount the volumes of their pods (nodes mount at their LAN address), and
    the controller when the snapshots go there. Not the LAN: an office machine or a pod's
    own address is not a node."""
    addresses = [h.address for h in settings.hosts if h.runs_workloads]
    # On bare metal; the AWS layouts' controller is no host here and backs up to S3.
    controller = next((h for h in settings.hosts if h.runs_control_plane), None)
    if controller is not None and backup_store(settings.layout, settings.backup,
                                               settings.storage, controller.name) == "nfs":
        addresses.append(controller.address)
    return tuple(dict.fromkeys(addresses))


def host_firewall_sources(settings: StackConfig) -> list[str]:
    """Where the on-prem hosts' node ports are reached from: each host's own address; on
    hybrid the control plane's private address (its overlay packets are sent from it: the
    CNI is pinned to it) and, with our VPN server, the server's tunnel address (the
    instance's other packets to the LAN leave its tun device from it);
    hostFirewall.extraSources. Never the LAN or the VPN range as a whole."""
    sources = [f"{host.address}/32" for host in settings.hosts]
    if settings.layout == "hybrid" and settings.aws is not None:
        sources.append(f"{control_plane_address(settings.aws)}/32")
        if settings.vpn is not None and settings.vpn.mode == "server-on-ec2":
            sources.append(f"{tunnel_server_address(settings.vpn)}/32")
    return sources + list(settings.host_firewall.extra_sources)


def host_firewall_ruleset(settings: StackConfig, distribution: Distribution,
                          host: Host) -> Optional[str]:
    """The ruleset of an on-prem host's host-firewall step; None for a machine that is not
    one of `hosts` (the EC2 control plane: its security group) or with the firewall off.
    On bare metal the controller's comes before install-controller, so a new host's join
    finds its address admitted there."""
    if (settings.layout not in FIREWALL_LAYOUTS or not settings.host_firewall.enabled
            or all(h.name != host.name for h in settings.hosts)):
        return None
    return firewall.ruleset(host.name, distribution.host_firewall_ports(host),
                            host_firewall_sources(settings),
                            [settings.network.pod_cidr, settings.network.service_cidr])


def rollout_policy(settings: StackConfig) -> RolloutPolicy:
    """The workers' rollout: kubernetes.upgrade.maxUnavailable as a count of the workers
    that join over SSH (the bound the drain steps keep on the controller at run time;
    workers' steps do not wait for each other in the graph, so a new cluster joins them all
    at once), and the timeouts of a drain, a node's Ready and a reboot."""
    joining = [h for h in settings.workers if not h.runs_control_plane]
    return RolloutPolicy(
        drain_timeout_seconds=settings.kubernetes.drain_timeout_seconds,
        node_ready_timeout_seconds=settings.kubernetes.node_ready_timeout_seconds,
        reboot_timeout_seconds=settings.tuning.reboot_timeout_seconds,
        max_unavailable=settings.kubernetes.upgrade.unavailable_count(len(joining)),
        drain_force=settings.kubernetes.drain_force)


def machines_of(bootstraps: dict[str, HostBootstrap]) -> dict[str, PreparedMachine]:
    return {name: bootstrap.machine for name, bootstrap in bootstraps.items()}

class BareMetal(Layout):
    def machines(self) -> Machines:
        settings = self.context.settings
        controller = settings.controller
        first = self._bootstrap(controller, controller.address)
        bootstraps = {h.name: first if h.name == controller.name
                      else self._bootstrap(h, controller.address, controller=first)
                      for h in settings.hosts}
        machines = Machines(controller, machines_of(bootstraps), list(settings.hosts),
                            [b.nfs_server for b in bootstraps.values() if b.nfs_server])
        machines.backup = bare_metal_backup_target(settings)
        machines.backup_location = machines.backup.location if machines.backup else None
        return machines


def bare_metal_backup_target(settings: StackConfig) -> Optional[BackupTarget]:
    """backup.path on the controller, or a folder of the NFS export another machine
    serves (config/backup.py backup_store)."""
    store = backup_store(settings.layout, settings.backup, settings.storage,
                         settings.controller.name)
    if store == "path":
        return BackupTarget("path", settings.backup.path, {"BACKUP_DIR": settings.backup.path})
    if store != "nfs":
        return None
    nfs = settings.storage.nfs
    server = nfs.server or next(h.address for h in settings.hosts if h.name == nfs.host)
    folder = f"{BACKUP_FOLDER}/{settings.cluster_name}"
    return BackupTarget("nfs", f"nfs://{server}{nfs.path.rstrip('/')}/{folder}", {
        "BACKUP_NFS_SOURCE": f"{server}:{nfs.path}",
        "BACKUP_NFS_OPTIONS": ",".join(nfs.mount_options),
        "BACKUP_DIR": folder,
    })


def layout_class(name: str) -> type[Layout]:
    """The layout named by the stack's `layout`. The AWS layouts' module imports the AWS
    SDK (about a third of a preview's import time), so a bare-metal stack never loads it."""
    if name == "bare-metal":
        return BareMetal
    from components import aws_layouts
    return {"hybrid": aws_layouts.Hybrid, "cloud": aws_layouts.Cloud}[name]
