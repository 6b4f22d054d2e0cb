"""The whole cluster for one stack: picks the components the configured layout needs."""

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.control_plane import ControlPlane, ControlPlaneArgs
from components.distributions import distribution_for
from components.gpu_support import GpuSupport, GpuSupportArgs
from components.host_bootstrap import HostBootstrap, HostBootstrapArgs
from components.mpi_operator import MpiOperator, MpiOperatorArgs
from components.shared_storage import SharedStorage, SharedStorageArgs
from components.worker_node import WorkerNode, WorkerNodeArgs
from config.model import StackConfig


@dataclass
class ClusterArgs:
    settings: StackConfig


class Cluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    api_endpoint: str
    provider: k8s.Provider

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:index:Cluster", name, None, opts)
        self._name = name
        self._settings = args.settings
        self._distribution = distribution_for(args.settings)
        if args.settings.layout == "bare-metal":
            self._create_bare_metal()
        else:  # refused by config validation; kept explicit for the next layouts
            raise ValueError(f"layout {args.settings.layout} is not supported")
        self._create_addons()
        self.register_outputs({
            "apiEndpoint": self.api_endpoint,
            "kubeconfig": self.kubeconfig,
            "nodes": self.nodes,
            "defaultStorageClass": self.storage.default_class,
        })

    def _create_addons(self) -> None:
        """What makes the cluster usable, on every layout: GPUs, storage, MPI jobs."""
        settings, opts = self._settings, pulumi.ResourceOptions(parent=self)
        GpuSupport(f"{self._name}-gpu",
                   GpuSupportArgs(settings, self.provider, self.nodes_ready), opts=opts)
        self.storage = SharedStorage(
            f"{self._name}-storage",
            SharedStorageArgs(settings, self.provider, self.nodes_ready + self.nfs_servers),
            opts=opts)
        if settings.mpi.operator:
            MpiOperator(f"{self._name}-mpi-operator",
                        MpiOperatorArgs(self.provider, self.nodes_ready), opts=opts)

    def _create_bare_metal(self) -> None:
        settings = self._settings
        controller = settings.controller
        # Hosts bootstrap in parallel: no host's steps wait for another host's.
        bootstraps = {
            host.name: HostBootstrap(
                host.name,
                HostBootstrapArgs(host, settings, self._distribution, controller.address),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for host in settings.hosts
        }
        control_plane = ControlPlane(
            f"{self._name}-control-plane",
            ControlPlaneArgs(controller, settings, self._distribution, bootstraps[controller.name]),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.api_endpoint = control_plane.api_endpoint
        self.kubeconfig = control_plane.kubeconfig
        self.provider = k8s.Provider(
            f"{self._name}-kubernetes",
            kubeconfig=self.kubeconfig,
            # Large objects (the MPIJob CRD) exceed client-side apply's annotation limit.
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.nodes_ready = []
        for host in settings.hosts:
            if host.runs_workloads:
                node = WorkerNode(
                    f"{host.name}-node",
                    WorkerNodeArgs(host, settings, self._distribution, bootstraps[host.name],
                                   control_plane, self.provider),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                self.nodes_ready.append(node)
        self.nfs_servers = [b.nfs_server for b in bootstraps.values() if b.nfs_server]
        self.nodes = [
            {"name": h.name, "address": h.address, "role": h.role, "gpus": h.gpus,
             "gpuModel": h.gpu_model}
            for h in settings.hosts
        ]
