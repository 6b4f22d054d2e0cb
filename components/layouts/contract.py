"""What a layout hands the cluster, one way: small frozen results the layout never changes
after it returned them. `Layout.result()` gives the machines and services, then
`Layout.self_joining()` the nodes that join on their own (cloud pools), with the outputs
they add."""

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from components.addons.efs_csi import EfsWebIdentity
from components.distributions.base import Distribution
from components.hosts.bootstrap import PreparedHost
from components.hosts.steps import HostSettings
from components.kubernetes.backups import BackupTarget
from components.kubernetes.control_plane import BootedController, ControlPlane
from components.kubernetes.pki import ClusterPki
from config.control_plane import ControlPlaneEndpoint
from config.hosts import Host
from config.model import StackConfig


def frozen_mapping(values: Mapping) -> Mapping:
    """A read-only view of a copy of `values`, in its order."""
    return MappingProxyType(dict(values))


@dataclass(frozen=True, kw_only=True)
class ClusterContext:
    """What every layout builds with; its resources are children of `parent`."""

    name: str
    settings: StackConfig
    distribution: Distribution
    pki: ClusterPki
    parent: pulumi.Resource
    # The distribution's cluster_secrets, by name.
    secrets: Mapping[str, pulumi.Output[str]] = field(default_factory=dict)

    @cached_property
    def host_settings(self) -> HostSettings:
        """What every machine's preparation steps read of the config, built once; the
        layouts pass it on whole and never name a step's settings."""
        return HostSettings.of(self.settings)


@dataclass(frozen=True, kw_only=True)
class Controller:
    """The controller: installed over SSH on a prepared machine, or at boot (the first
    `booted`; one that joins it, once the control plane `launch`es it: JoiningController)."""

    host: Host
    prepared: Optional[PreparedHost] = None
    booted: Optional[BootedController] = None
    launch: Optional[Callable[[Sequence[pulumi.Resource], Optional[pulumi.Output[str]]],
                              BootedController]] = None
    # The address users and `pulumi up` reach the API at, when not the controller's own.
    public_address: Optional[pulumi.Input[str]] = None


@dataclass(frozen=True, kw_only=True)
class PreparedWorker:
    """A host the cluster joins as a node over SSH (the controller too where it runs
    workloads), and what its join waits for beyond its preparation (the VPN tunnel)."""

    host: Host
    prepared: PreparedHost
    join_after: tuple = ()


@dataclass(frozen=True, kw_only=True)
class Efs:
    """The EFS file system the layout created."""

    address: pulumi.Input[str]
    # Its id, where the nodes mount it with IAM and TLS (the EFS CSI driver's StorageClass).
    file_system_id: Optional[pulumi.Input[str]] = None
    # The addresses of its mount targets (AWS assigns them in an existing VPC).
    mount_target_addresses: tuple = ()
    web_identity: Optional[EfsWebIdentity] = None


@dataclass(frozen=True, kw_only=True)
class Services:
    """What the cluster's add-ons and users are given by the layout."""

    # What the storage add-on waits for: the NFS server step, EFS mount targets.
    storage_servers: tuple = ()
    efs: Optional[Efs] = None
    # What the cluster installs over SSH for the snapshots (none when off, or installed
    # at boot).
    backup: Optional[BackupTarget] = None
    # Users reach the API at the controller's private address (through the VPN or LAN).
    users_on_private_network: bool = False
    # The VPN profile users are given (hybrid with the program's VPN server).
    user_vpn_profile: Any = None
    # Options of resources on AWS (its provider), on the layouts that use AWS.
    aws_opts: Optional[pulumi.ResourceOptions] = None


@dataclass(frozen=True, kw_only=True)
class LayoutResult:
    # The first controller, which initialises the cluster.
    controller: Controller
    # The controllers that join it, in config order: over SSH (bare metal, hybrid) or at
    # boot (cloud).
    joining: tuple[Controller, ...] = ()
    # Where nodes and users reach the API (StackConfig.control_plane_endpoint).
    endpoint: ControlPlaneEndpoint
    # Names of the endpoint known only once `pulumi up` made them (the load balancer's
    # DNS name), in every controller's API certificate.
    endpoint_names: tuple = ()
    workers: tuple[PreparedWorker, ...]
    services: Services
    # Stack outputs, by name (components/cluster.py OUTPUTS orders them).
    outputs: Mapping[str, Any] = field(default_factory=lambda: frozen_mapping({}))


@dataclass(frozen=True, kw_only=True)
class SelfJoining:
    """Nodes that join on their own once the control plane is up (cloud pools): what
    "every node is ready" waits for, and the outputs they add or replace."""

    nodes: tuple = ()
    outputs: Mapping[str, Any] = field(default_factory=lambda: frozen_mapping({}))


class Layout(abc.ABC):
    def __init__(self, context: ClusterContext):
        self.context = context

    @abc.abstractmethod
    def result(self) -> LayoutResult:
        """The machines of the cluster, prepared as this layout does it."""

    def self_joining(self, control_plane: ControlPlane, provider: k8s.Provider,
                     result: LayoutResult) -> SelfJoining:
        """Nodes that join on their own once the control plane is up."""
        return SelfJoining()
