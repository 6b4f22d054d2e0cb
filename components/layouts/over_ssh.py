"""On-prem hosts prepared over SSH, as the bare-metal and hybrid layouts prepare them: each
host's preparation (its firewall ruleset, image mirror inputs, NFS export, drain), and the
workers the cluster joins from them."""

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Optional

import pulumi

from components.addons.cluster_images import known_images, mirror_upstreams
from components.hosts.steps import registry_env
from components.distributions.base import Distribution
from components.hosts import firewall
from components.hosts.bootstrap import HostBootstrap, HostBootstrapArgs, NfsExport
from components.kubernetes.upgrade import RolloutPolicy, host_drain
from components.common.remote_step import Endpoint, SshAccess
from components.layouts.contract import ClusterContext, PreparedWorker
from config.backup import backup_store
from config.cloud import pool_subnet_cidrs, tunnel_server_address
from config.firewall import FIREWALL_LAYOUTS
from config.hosts import Host
from config.model import StackConfig


def bootstrap(context: ClusterContext, host: Host, control_plane_address: pulumi.Input[str],
              endpoint: Optional[Endpoint] = None,
              controller: Optional[HostBootstrap] = None) -> HostBootstrap:
    """`host` prepared over SSH. With `controller`, a worker's node is drained from there
    before its host settings change (its drain-host step). Hosts bootstrap in parallel: no
    host's steps wait for another host's (drain-host only dials the controller)."""
    settings = context.settings
    nfs = settings.storage.nfs
    drain = None
    if controller is not None and not host.runs_control_plane:
        drain = host_drain(context.distribution, controller=controller.waiting_ssh,
                           rollout=rollout_policy(settings))
    return HostBootstrap(
        host.name,
        HostBootstrapArgs(
            host=host,
            ssh=SshAccess(settings.ssh, settings.ssh_private_key, settings.bastion_private_key),
            settings=context.host_settings, distribution=context.distribution,
            control_plane_address=control_plane_address,
            endpoint=endpoint,
            nfs_export=(NfsExport(nfs.path, nfs_client_addresses(settings))
                        if nfs is not None and nfs.host == host.name else None),
            drain_first=drain, firewall_ruleset=host_firewall_ruleset(
                settings, context.distribution, host),
            registries=registries_env(settings, context.distribution, ssh_password(settings))),
        opts=pulumi.ResourceOptions(parent=context.parent))


def prepared_workers(settings: StackConfig, controllers: Sequence[Host],
                     bootstraps: Mapping[str, HostBootstrap],
                     join_after: Mapping[str, Sequence] = MappingProxyType({})
                     ) -> tuple[PreparedWorker, ...]:
    """The hosts that run workloads, the controllers first, as the cluster joins them."""
    return tuple(PreparedWorker(host=host, prepared=bootstraps[host.name].prepared,
                                join_after=tuple(join_after.get(host.name, ())))
                 for host in [*controllers, *settings.workers] if host.runs_workloads)


def storage_servers(bootstraps: Mapping[str, HostBootstrap]) -> tuple:
    """The NFS server steps of the hosts that serve the export."""
    return tuple(b.nfs_server for b in bootstraps.values() if b.nfs_server)


def node_outputs(hosts: Sequence[Host]) -> list[dict]:
    """The `nodes` output: every host of the cluster."""
    return [{"name": h.name, "address": h.address, "role": h.role, "gpus": h.gpus,
             "gpuModel": h.gpu_model} for h in hosts]


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
    the controllers when the snapshots go there. Not the LAN: an office machine or a pod's
    own address is not a node."""
    addresses = [h.address for h in settings.hosts if h.runs_workloads]
    # On bare metal, every controller (each may take a snapshot: backup/lib.sh
    # backup_taker); the AWS layouts' controller is no host here and backs up to S3.
    controllers = settings.controllers
    if controllers and backup_store(settings.layout, settings.backup, settings.storage,
                                    controllers[0].name) == "nfs":
        addresses += [controller.address for controller in controllers]
    return tuple(dict.fromkeys(addresses))


def host_firewall_sources(settings: StackConfig) -> list[str]:
    """Where the on-prem hosts' node ports are reached from: each host's own address; on
    hybrid each EC2 controller's private address (its overlay packets are sent from it:
    the CNI is pinned to it) and, with our VPN server, the server's tunnel address (the
    instance's other packets to the LAN leave its tun device from it); with pools, the
    subnets their instances get addresses in (config/cloud.py pool_subnet_cidrs: their
    packets cross the tunnel from those addresses, unchanged); hostFirewall.extraSources.
    Never the LAN or the VPN range as a whole."""
    sources = [f"{host.address}/32" for host in settings.hosts]
    if settings.layout == "hybrid" and settings.aws is not None:
        sources += [f"{address}/32" for address in
                    settings.control_plane_endpoint.controller_addresses]
        if settings.pools:
            sources += pool_subnet_cidrs(settings.aws.vpc)
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
    endpoint = settings.control_plane_endpoint
    vrrp_peers = (endpoint.peers_of(host.address)
                  if endpoint.vrrp is not None and host.runs_control_plane else ())
    return firewall.ruleset(host.name, distribution.host_firewall_ports(host),
                            host_firewall_sources(settings),
                            [settings.network.pod_cidr, settings.network.service_cidr],
                            vrrp_peers=vrrp_peers)


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
