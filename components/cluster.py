"""The whole cluster for one stack: picks the components the configured layout needs."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws_control_plane_host import (
    ControllerBoot,
    ControlPlaneHost,
    ControlPlaneHostArgs,
)
from components.access import Access, AccessArgs
from components.aws_network import AwsNetwork, AwsNetworkArgs
from components.cluster_pki import ClusterPki, ClusterPkiArgs
from components.control_plane import ControlPlane, ControlPlaneArgs
from components.distributions import distribution_for
from components.efs_file_system import EfsFileSystem, EfsFileSystemArgs
from components.gpu_support import GpuSupport, GpuSupportArgs
from components.gpu_worker_pool import GpuWorkerPool, GpuWorkerPoolArgs, oversized_user_data
from components.host_bootstrap import HostBootstrap, HostBootstrapArgs
from components.kubeflow import Kubeflow, KubeflowArgs
from components.mpi_operator import MpiOperator, MpiOperatorArgs
from components.pool_node_cleanup import PoolNodeCleanup, PoolNodeCleanupArgs
from components.remote_step import Endpoint
from components.shared_storage import SharedStorage, SharedStorageArgs
from components.vpn_bridge import VpnBridge, VpnBridgeArgs
from components.worker_node import WorkerNode, WorkerNodeArgs
from config.model import Host, StackConfig
from config.problems import ConfigError


@dataclass
class ClusterArgs:
    settings: StackConfig


class Cluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    api_endpoint: pulumi.Input[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions = None):
        # What only the rendered boot scripts can tell, refused before anything exists.
        problems = oversized_user_data(args.settings, distribution_for(args.settings))
        if problems:
            raise ConfigError(problems)
        super().__init__("gpu-cluster:index:Cluster", name, None, opts)
        self._name = name
        self._settings = args.settings
        self._distribution = distribution_for(args.settings)
        self.gateways: dict[str, pulumi.Input[str]] = {}
        self.vpn_admin_profile: Optional[pulumi.Output[str]] = None
        self.vpn: Optional[VpnBridge] = None
        self.pools: list[dict] = []
        # The EC2 image id each kind of machine boots, and the control plane's SSH host
        # key (AWS layouts).
        self.images: dict[str, pulumi.Input[str]] = {}
        self.control_plane_ssh_host_key: Optional[pulumi.Input[str]] = None
        # Options of resources on AWS (its provider), on the layouts that use AWS.
        self._on_aws: Optional[pulumi.ResourceOptions] = None
        self.pki = ClusterPki(f"{name}-pki", ClusterPkiArgs(args.settings.cluster_name),
                              opts=pulumi.ResourceOptions(parent=self))
        if args.settings.layout == "bare-metal":
            self._create_bare_metal()
        elif args.settings.layout == "hybrid":
            self._create_hybrid()
        else:
            self._create_cloud()
        self._create_addons()
        self.nodes = [
            {"name": h.name, "address": h.address, "role": h.role, "gpus": h.gpus,
             "gpuModel": h.gpu_model}
            for h in self._all_hosts
        ]
        self.register_outputs({
            "apiEndpoint": self.api_endpoint,
            "kubeconfig": self.kubeconfig,
            "nodes": self.nodes,
            "defaultStorageClass": self.storage.default_class,
            "kubeflowUrl": self.kubeflow_url,
        })

    def _bootstrap(self, host: Host, control_plane_address: str,
                   endpoint: Optional[Endpoint] = None) -> HostBootstrap:
        # Hosts bootstrap in parallel: no host's steps wait for another host's.
        return HostBootstrap(
            host.name,
            HostBootstrapArgs(host, self._settings, self._distribution, control_plane_address,
                              endpoint),
            opts=pulumi.ResourceOptions(parent=self))

    def _create_bare_metal(self) -> None:
        settings = self._settings
        controller = settings.controller
        bootstraps = {h.name: self._bootstrap(h, controller.address) for h in settings.hosts}
        self._all_hosts = list(settings.hosts)
        self.storage_servers = [b.nfs_server for b in bootstraps.values() if b.nfs_server]
        self._create_kubernetes(controller, bootstraps, join_after={})

    def _create_aws_control_plane_host(self, boots_itself: bool = False):
        """The AWS side both cloud layouts share: provider, VPC and the control-plane
        instance, which either installs the controller itself at boot (cloud) or is
        bootstrapped over SSH at its public address like any host (hybrid)."""
        settings = self._settings
        aws_provider = aws.Provider(f"{self._name}-aws", region=settings.aws.region,
                                    opts=pulumi.ResourceOptions(parent=self))
        self._on_aws = pulumi.ResourceOptions(parent=self, providers=[aws_provider])
        network = AwsNetwork(f"{self._name}-network",
                             AwsNetworkArgs(settings.aws, settings.cluster_name,
                                            node_security_group=boots_itself),
                             opts=self._on_aws)
        boot = ControllerBoot(self._distribution, self.pki) if boots_itself else None
        instance = ControlPlaneHost(f"{self._name}-control-plane-host",
                                    ControlPlaneHostArgs(
                                        settings, network,
                                        self._distribution.control_plane_ports, boot),
                                    opts=self._on_aws)
        controller = instance.host
        bootstrap = None if boots_itself else self._bootstrap(
            controller, instance.private_ip, endpoint=instance.ssh_endpoint)
        self.gateways = {"aws": instance.public_ip}
        self.images = {"controlPlane": instance.image}
        self.control_plane_ssh_host_key = instance.ssh_host_public_key
        public = instance.public_ip if settings.aws.control_plane.elastic_ip else None
        return network, instance, bootstrap, public

    def _create_efs(self, network: AwsNetwork) -> None:
        """The file system the `efs` backend mounts, when configured."""
        if self._settings.storage.efs is None:
            return
        efs = EfsFileSystem(f"{self._name}-efs", EfsFileSystemArgs(self._settings, network),
                            opts=self._on_aws)
        self._settings = with_efs_address(self._settings, efs.address)
        self.storage_servers += efs.mount_targets

    def _create_cloud(self) -> None:
        """Control plane on EC2, GPU workers in EC2 pools; both install themselves at boot,
        so the program runs no command on any machine."""
        network, instance, _, public = self._create_aws_control_plane_host(boots_itself=True)
        self._all_hosts = [instance.host]
        self.storage_servers = []
        self._create_efs(network)
        control_plane = self._create_kubernetes(instance.host, {}, join_after={},
                                                public_address=public, booted=instance.instance)
        settings = self._settings
        cleanup = PoolNodeCleanup(f"{self._name}-node-cleanup", PoolNodeCleanupArgs(
            settings.cluster_name, self.pki, control_plane.node_endpoint, self.provider,
            settings.aws.tags), opts=self._on_aws)
        pools = [
            GpuWorkerPool(f"{self._name}-{pool.name}", GpuWorkerPoolArgs(
                settings, pool, network,
                control_plane.create_bootstrap_token(pool.name, self.provider),
                self._distribution, network.node_security_group, cleanup), opts=self._on_aws)
            for pool in settings.pools
        ]
        self.nodes_ready += [pool.group for pool in pools]
        self.images = {"controlPlane": instance.image,
                       **{pool.name: p.image for pool, p in zip(settings.pools, pools)}}
        self.pools = [{"name": p.name, "instanceType": p.instance_type, "count": p.count,
                       "gpus": p.gpus, "gpuModel": p.gpu_model} for p in settings.pools]

    def _create_hybrid(self) -> None:
        """Control plane (and VPN server) on EC2, GPU workers on-prem across OpenVPN."""
        settings = self._settings
        network, instance, bootstrap, public = self._create_aws_control_plane_host()
        controller = instance.host
        bootstraps = {controller.name: bootstrap}
        # On-prem hosts reach the control plane only once the tunnel is up.
        bootstraps.update({h.name: self._bootstrap(h, "") for h in settings.hosts})
        vpn = VpnBridge(f"{self._name}-vpn", VpnBridgeArgs(
            settings=settings,
            server_host=controller,
            server_ssh=bootstraps[controller.name].ssh,
            server_public_address=self.gateways["aws"],
            server_ready=bootstraps[controller.name].ready,
            onprem={h.name: bootstraps[h.name] for h in settings.hosts},
        ), opts=pulumi.ResourceOptions(parent=self))
        self.vpn_admin_profile = vpn.admin_profile
        self.vpn = vpn
        onprem_gateway = next((h.address for h in settings.hosts
                               if h.name == settings.vpn.onprem_gateway),
                              settings.vpn.existing_server_address)
        self.gateways["onPrem"] = onprem_gateway
        self._all_hosts = [controller, *settings.hosts]
        self.storage_servers = [b.nfs_server for b in bootstraps.values() if b.nfs_server]
        self._create_efs(network)
        self._create_kubernetes(
            controller, bootstraps, public_address=public,
            join_after={h.name: vpn.tunnel_up_for(h.name) for h in settings.hosts})

    def _create_kubernetes(self, controller: Host, bootstraps: dict[str, HostBootstrap],
                           join_after: dict[str, list], public_address=None,
                           booted: pulumi.Resource = None) -> ControlPlane:
        """The control plane, the API provider and the nodes; `join_after` names what each
        host's join waits for beyond its own bootstrap (its route through the VPN)."""
        settings = self._settings
        control_plane = ControlPlane(
            f"{self._name}-control-plane",
            ControlPlaneArgs(controller, settings, self._distribution, self.pki,
                             bootstraps.get(controller.name), public_address, booted),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.control_plane = control_plane
        self.api_endpoint = control_plane.api_endpoint
        self.kubeconfig = control_plane.kubeconfig
        self.provider = k8s.Provider(
            f"{self._name}-kubernetes",
            kubeconfig=self.kubeconfig,
            # The cluster's identity: a changed kubeconfig (a renewed admin certificate, an
            # unknown one in a pull request's preview) is not a different cluster, so it
            # does not replace the provider and every object through it.
            cluster_identifier=settings.cluster_name,
            # Large objects (the MPIJob CRD) exceed client-side apply's annotation limit.
            enable_server_side_apply=True,
            # The kubeconfig is known before the API exists: nothing may use it earlier.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[control_plane.installed]),
        )
        self.nodes_ready = []
        for host in [controller, *settings.workers]:
            if host.runs_workloads:
                self.nodes_ready.append(WorkerNode(
                    f"{host.name}-node",
                    WorkerNodeArgs(host, settings, self._distribution, bootstraps[host.name],
                                   control_plane, self.provider, join_after.get(host.name, [])),
                    opts=pulumi.ResourceOptions(parent=self),
                ))
        return control_plane

    def _create_addons(self) -> None:
        """What makes the cluster usable, on every layout: GPUs, storage, MPI jobs, Kubeflow."""
        settings, opts = self._settings, pulumi.ResourceOptions(parent=self)
        GpuSupport(f"{self._name}-gpu",
                   GpuSupportArgs(settings, self.provider, self.nodes_ready), opts=opts)
        self.storage = SharedStorage(
            f"{self._name}-storage",
            SharedStorageArgs(settings, self.provider, self.nodes_ready + self.storage_servers),
            opts=opts)
        if settings.mpi.operator:
            MpiOperator(f"{self._name}-mpi-operator",
                        MpiOperatorArgs(self.provider, self.nodes_ready), opts=opts)
        self.kubeflow_url: Optional[str] = None
        self.kubeflow_tls_certificate: Optional[pulumi.Output[str]] = None
        if settings.kubeflow is not None:
            # Its volumes are claimed on the default StorageClass: storage first.
            kubeflow = Kubeflow(f"{self._name}-kubeflow", KubeflowArgs(
                settings, self.provider, self.nodes_ready + self.storage.resources,
                controller=self.control_plane.host, controller_ssh=self.control_plane.ssh,
                controller_kubectl=self._distribution.kubectl_path,
                controller_service=self._distribution.controller_service),
                opts=opts)
            self.kubeflow_url = kubeflow.url
            self.kubeflow_tls_certificate = kubeflow.tls_certificate
        profiles_after = (kubeflow.profiles_installed
                          if settings.kubeflow and "profiles" in settings.kubeflow.components
                          else None)
        # On hybrid, users reach the API at its private address (VPN or LAN); admins may
        # use the public one from aws.adminCidrs.
        users_endpoint = (self.control_plane.node_endpoint if settings.layout == "hybrid"
                          else self.api_endpoint)
        self.access = Access(f"{self._name}-access", AccessArgs(
            settings, self.provider, self.pki, users_endpoint, self.nodes_ready,
            aws_opts=self._on_aws, vpn_profile=self.vpn.user_profile if self.vpn else None,
            kubeflow_profiles_after=profiles_after), opts=opts)


def with_efs_address(settings: StackConfig, address: pulumi.Input[str]) -> StackConfig:
    """The settings with the created file system's address (a mount target's, or its DNS
    name) filled in."""
    efs = settings.storage.efs.model_copy(update={"mount_target_address": address})
    storage = settings.storage.model_copy(update={"efs": efs})
    return settings.model_copy(update={"storage": storage})
