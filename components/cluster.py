"""The whole cluster for one stack, the same on every layout: the layout makes the
machines (components/layouts.py); then the control plane, the nodes and the add-ons."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from pulumi_command import local

from components.common import pod_security
from components.common.remote_step import run_step
from components.hosts.authorized_keys import authorized_keys_step
from components.access.storage_egress import StorageEgress
from components.access.teams import (Access, AccessArgs, KubeflowProfiles, job_kinds,
                                    kubeconfig_cluster_name)
from components.kubernetes.pki import ClusterPki, ClusterPkiArgs
from components.kubernetes.control_plane import ControlPlane, ControlPlaneArgs
from components.distributions import distribution_for, distribution_settings
from components.addons.gpu_support import (RUNTIME_CLASS, GpuSupport, GpuSupportArgs,
                                           gpu_node_taints, untolerated_taint_warnings)
from components.addons.kubeflow.image_mirror import with_cluster_mirror
from components.addons.kubeflow.install import Kubeflow, KubeflowArgs
from components.layouts import ClusterContext, Machines, layout_class, rollout_policy
from components.addons.monitoring.install import Monitoring, MonitoringArgs
from components.addons.monitoring.rules import gpu_node_groups
from components.addons.mpi_operator import MpiOperator, MpiOperatorArgs
from components.addons.kueue import Kueue, KueueArgs
from components.addons.efs_csi import EfsCsiSettings
from components.addons.shared_storage import (
    SharedStorage,
    SharedStorageArgs,
    nfs_server_address,
)
from components.kubernetes.backups import install_backup_env, install_backup_over_ssh
from components.kubernetes.worker_node import WorkerNode, WorkerNodeArgs
from config.model import StackConfig
from config import vendored
from config.warnings import preview_warnings

# The distribution's cluster secrets, as hex (safe in any config file or token).
SECRET_BYTES = 32


@dataclass
class ClusterArgs:
    settings: StackConfig


class Cluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    api_endpoint: pulumi.Input[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions = None):
        settings = args.settings
        # The vendored upstream files as pinned, or nothing is registered.
        vendored.verify()
        distribution = distribution_for(distribution_settings(settings))
        super().__init__("gpu-cluster:index:Cluster", name, None, opts)
        self._name, self._settings, self._distribution = name, settings, distribution
        for warning in preview_warnings(settings):
            pulumi.log.warn(warning, resource=self)
        self.pki = ClusterPki(f"{name}-pki", ClusterPkiArgs(
            settings.cluster_name, settings.kubernetes.admin_certificate_generation),
                              opts=pulumi.ResourceOptions(parent=self))
        join_generation = settings.kubernetes.join_token_generation
        self.secrets = {
            secret: pulumi.Output.secret(random.RandomBytes(
                f"{name}-{secret}", length=SECRET_BYTES,
                opts=pulumi.ResourceOptions(parent=self, replacement_trigger=(
                    join_generation if secret in distribution.join_secrets else None))).hex)
            for secret in distribution.cluster_secrets}
        layout = layout_class(settings.layout)(
            ClusterContext(name, settings, distribution, self.pki, parent=self,
                           secrets=self.secrets))
        machines = layout.machines()
        control_plane = self._create_kubernetes(machines)
        nodes = [end for node in self.worker_nodes for end in node.ready]
        nodes += layout.nodes_after(control_plane, self.node_api, machines)
        # One resource stands for "every node is ready": objects x nodes edges otherwise.
        # A local Command without a create command runs nothing (pulumi-command
        # provider/pkg/provider/local/commandController.go, Create).
        nodes_ready = local.Command(f"{name}-nodes-ready", opts=pulumi.ResourceOptions(
            parent=self, depends_on=nodes))
        # The add-ons' provider, registered once every node is ready: every object through
        # it waits for the nodes without naming them. The SDK awaits a provider's id before
        # it registers a resource that uses it (sdk/python/lib/pulumi/runtime/resource.py,
        # prepare_resource and _create_provider_ref), and the engine deletes a resource
        # before its provider (pkg/resource/graph/dependency_graph.go, DependingOn). Named
        # in each object's depends_on, nodes-ready made the SDK walk the whole graph once
        # per object (sdk/python/lib/pulumi/runtime/resource_cycle_breaker.py,
        # declare_dependency): at 499 workers, 9,500 resources a walk, for each of about
        # 50 objects.
        self.provider = self._kubernetes_provider(f"{name}-kubernetes", [nodes_ready])
        self._create_addons(machines, nodes_ready)
        self._create_backups(machines, control_plane)
        self.gateways = machines.gateways
        self.images = machines.images
        self.control_plane_ssh_host_key = machines.control_plane_ssh_host_key
        self.vpn_admin_profile = machines.vpn.admin_profile if machines.vpn else None
        self.pools = layout.pools
        self.nodes = [
            {"name": h.name, "address": h.address, "role": h.role, "gpus": h.gpus,
             "gpuModel": h.gpu_model}
            for h in machines.hosts
        ]
        self.register_outputs({
            "apiEndpoint": self.api_endpoint,
            "kubeconfig": self.kubeconfig,
            "nodes": self.nodes,
            "defaultStorageClass": self.storage.default_class,
            "kubeflowUrl": self.kubeflow_url,
            "backupLocation": self.backup_location,
            "grafanaUrl": self.grafana_url,
        })

    def _create_monitoring(self) -> None:
        """GPU metrics, alerts and dashboards; Prometheus' volume on the storage."""
        settings = self._settings
        monitoring = settings.monitoring
        self.grafana_url: Optional[str] = None
        self.grafana_admin_password: Optional[pulumi.Output[str]] = None
        if not monitoring.enabled:
            return
        installed = Monitoring(f"{self._name}-monitoring", MonitoringArgs(
            monitoring, settings.gpu, gpu_node_groups(settings.hosts, settings.pools),
            gpu_node_taints([*settings.hosts, *settings.pools]),
            monitoring.storage_class or settings.storage.default_class,
            self.provider, self.storage.resources,
            workload_addresses=[h.address for h in settings.hosts if h.runs_workloads],
            admin_cidrs=settings.aws.admin_cidrs if settings.aws else ()),
            opts=pulumi.ResourceOptions(parent=self))
        self.grafana_url = installed.url
        self.grafana_admin_password = installed.admin_password

    def _create_backups(self, machines: Machines, control_plane: ControlPlane) -> None:
        """Scheduled snapshots of the control plane, installed over SSH where the layout
        does not install them at boot; encrypted on the controller to backup.recipients."""
        self.backup_location = machines.backup_location
        target = machines.backup
        if target is None:
            return
        env = install_backup_env(self._distribution, self._settings.backup,
                                 self._settings.cluster_name, target)
        install_backup_over_ssh(machines.controller.name, control_plane.ssh, env,
                                [control_plane.installed], parent=self)

    def _create_kubernetes(self, machines: Machines) -> ControlPlane:
        """The control plane, the API provider and the hosts' nodes."""
        settings = self._settings
        control_plane = ControlPlane(
            f"{self._name}-control-plane",
            ControlPlaneArgs(machines.controller, settings.cluster_name, settings.kubernetes,
                             self._distribution, self.pki,
                             machines.prepared.get(machines.controller.name),
                             machines.public_address, machines.booted, self.secrets,
                             machines.booted_ssh),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.control_plane = control_plane
        if machines.booted_ssh is not None:
            # The controller that installed itself at boot (cloud) has no HostBootstrap,
            # which makes this step on the other hosts reached over SSH.
            authorized_keys_step(machines.controller, machines.booted_ssh, settings.ssh,
                                 depends_on=[control_plane.installed], parent=self)
        self.api_endpoint = control_plane.api_endpoint
        self.kubeconfig = control_plane.kubeconfig
        # What the nodes need of the API as they join (their labels and taints, the pools'
        # join tokens): the add-ons get their own provider once the nodes are ready.
        # Objects moved between the two providers stay as they are: both name the same
        # cluster (cluster_identifier), so pulumi-kubernetes' DiffConfig asks for no
        # replacement (provider/pkg/provider/provider.go, DiffConfig) and the engine then
        # diffs the object itself (pkg/resource/deploy/step_generator.go, providerChanged).
        self.node_api = self._kubernetes_provider(f"{self._name}-kubernetes-nodes",
                                                  [control_plane.installed])
        self.worker_nodes = []
        rollout = rollout_policy(settings)
        for host in [machines.controller, *settings.workers]:
            if host.runs_workloads:
                self.worker_nodes.append(WorkerNode(
                    f"{host.name}-node",
                    WorkerNodeArgs(host, self._distribution,
                                   machines.prepared[host.name], control_plane,
                                   self.node_api, machines.join_after.get(host.name, []),
                                   rollout=rollout),
                    opts=pulumi.ResourceOptions(parent=self),
                ))
        return control_plane

    def _kubernetes_provider(self, name: str, after: list) -> k8s.Provider:
        return k8s.Provider(
            name,
            kubeconfig=self.kubeconfig,
            # The cluster's identity: a changed kubeconfig (a renewed admin certificate, an
            # unknown one in a pull request's preview) is not a different cluster, so it
            # does not replace the provider and every object through it.
            cluster_identifier=self._settings.cluster_name,
            # Large objects (the MPIJob CRD) exceed client-side apply's annotation limit.
            enable_server_side_apply=True,
            # The kubeconfig is known before the API exists: nothing may use it earlier.
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )

    def _create_addons(self, machines: Machines, nodes_ready: pulumi.Resource) -> None:
        """What makes the cluster usable, on every layout: GPUs, storage, MPI jobs, Kubeflow."""
        settings, opts = self._settings, pulumi.ResourceOptions(parent=self)
        for warning in untolerated_taint_warnings(settings.hosts, settings.pools):
            pulumi.log.warn(warning, resource=self)
        GpuSupport(f"{self._name}-gpu", GpuSupportArgs(
            settings.gpu, gpu_node_taints([*settings.hosts, *settings.pools]),
            settings.tuning.cpu_manager_policy, self.provider,
            distribution_runtime_class=self._distribution_runtime_class(nodes_ready)),
            opts=opts)
        storage = settings.storage
        self.storage = SharedStorage(
            f"{self._name}-storage",
            SharedStorageArgs(
                storage, self.provider, machines.storage_servers,
                nfs_server=(nfs_server_address(storage.nfs, settings.hosts)
                            if storage.nfs is not None else None),
                efs_address=machines.efs_address,
                efs_csi=(EfsCsiSettings(machines.efs_file_system_id, settings.cluster_name,
                                        self._distribution.kubelet_root_dir)
                         if machines.efs_file_system_id is not None else None)),
            opts=opts)
        if settings.mpi.operator:
            MpiOperator(f"{self._name}-mpi-operator",
                        MpiOperatorArgs(self.provider), opts=opts)
        self._create_monitoring()
        self.kubeflow_url: Optional[str] = None
        self.kubeflow_tls_certificate: Optional[pulumi.Output[str]] = None
        profiles = None
        if settings.kubeflow is not None:
            # Its volumes are claimed on the default StorageClass: storage first.
            kubeflow = Kubeflow(f"{self._name}-kubeflow", KubeflowArgs(
                with_cluster_mirror(settings.kubeflow, settings.image_mirror),
                settings.kubeflow_password, settings.cluster_name,
                self.provider, self.storage.resources,
                tls_key=settings.kubeflow_tls_key,
                workload_addresses=[h.address for h in settings.hosts if h.runs_workloads],
                admin_cidrs=settings.aws.admin_cidrs if settings.aws else (),
                controller=self.control_plane.host, controller_ssh=self.control_plane.ssh,
                controller_kubectl=self._distribution.kubectl_path,
                controller_service=self._distribution.controller_service,
                users=settings.access.users,
                password_hashes=settings.kubeflow_password_hashes,
                connector_secrets=settings.kubeflow_connector_secrets),
                opts=opts)
            self.kubeflow_url = kubeflow.url
            self.kubeflow_tls_certificate = kubeflow.tls_certificate
            if "profiles" in settings.kubeflow.components:
                profiles = KubeflowProfiles(kubeflow.profiles_installed)
        # On hybrid, users reach the API at its private address (VPN or LAN); admins may
        # use the public one from aws.adminCidrs.
        users_endpoint = (self.control_plane.node_endpoint if machines.users_on_private_network
                          else self.api_endpoint)
        self.access = Access(f"{self._name}-access", AccessArgs(
            settings.access, settings.cluster_name, self.provider, self.pki, users_endpoint,
            job_kinds=job_kinds(settings.mpi.operator, settings.kubeflow),
            aws_opts=machines.aws_opts,
            vpn_profile=machines.vpn.user_profile if machines.vpn else None,
            kubeflow_profiles=profiles, kueue=self._create_kueue(),
            kubeconfig_cluster=kubeconfig_cluster_name(
                settings.cluster_name, machines.users_on_private_network),
            pod_security_version=pod_security.version_of(settings.kubernetes.version),
            workload_controllers=[(index, host.name) for index, host in enumerate(settings.hosts)
                                  if host.runs_control_plane and host.runs_workloads],
            storage_egress=self._storage_egress(machines)),
            opts=opts)

    def _distribution_runtime_class(self, nodes_ready: pulumi.Resource
                                    ) -> Optional[pulumi.Resource]:
        """When the distribution installs its own `nvidia` RuntimeClass: the step on the
        controller after which it exists (once the nodes are ready: its installer needs
        one), which the GPU add-on's patch of it waits for."""
        wait = self._distribution.runtime_class_wait(RUNTIME_CLASS)
        if wait is None:
            return None
        script, env = wait
        return run_step(self.control_plane.host.name, "wait-for-runtime-class",
                        on=self.control_plane.ssh, create=script, env=env,
                        depends_on=[nodes_ready], parent=self)

    def _storage_egress(self, machines: Machines) -> Optional[StorageEgress]:
        """The shared storage's servers (the NFS server, EFS's mount targets), which team
        pods may not reach; the controller's API port stays open where it is one of them."""
        settings = self._settings
        storage = settings.storage
        servers: list = []
        if storage.nfs is not None:
            servers.append(nfs_server_address(storage.nfs, settings.hosts))
        if storage.efs is not None:
            servers += (machines.efs_mount_target_addresses
                        or [storage.efs.mount_target_address])
        if not servers:
            return None
        return StorageEgress(servers, machines.controller.address,
                             settings.kubernetes.api_port)

    def _create_kueue(self) -> Optional[list]:
        """Kueue for the teams' queues (access.queues), when there is a team."""
        access = self._settings.access
        if not (access.queues and access.teams):
            return None
        return Kueue(f"{self._name}-kueue", KueueArgs(self.provider),
                     opts=pulumi.ResourceOptions(parent=self)).installed
