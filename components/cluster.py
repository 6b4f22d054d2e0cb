"""The whole cluster for one stack, the same on every layout: the layout makes the
machines (components/layouts/); then the control plane, the nodes and the add-ons."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
from pulumi_command import local

from components.common import pod_security
from components.common.remote_step import run_step
from components.hosts.authorized_keys import authorized_keys_step
from components.access.queues import Flavor, stack_flavors, uses_provisioning
from components.access.storage_egress import StorageEgress
from components.access.teams import (Access, AccessArgs, KubeflowProfiles, job_kinds,
                                    kubeconfig_cluster_name)
from components.kubernetes.pki import ClusterPki, ClusterPkiArgs
from components.kubernetes.control_plane import ControlPlane, ControlPlaneArgs, JoiningController
from components.distributions import distribution_for, distribution_settings
from components.addons.gpu_support import (RUNTIME_CLASS, GpuSupport, GpuSupportArgs,
                                           gpu_node_taints)
from components.addons.kubeflow.image_mirror import with_cluster_mirror
from components.addons.kubeflow.install import Kubeflow, KubeflowArgs
from components.layouts import layout_class
from components.layouts.contract import ClusterContext, LayoutResult
from components.layouts.over_ssh import rollout_policy
from components.addons.monitoring.install import Monitoring, MonitoringArgs
from components.addons.monitoring.rules import gpu_node_groups
from components.addons.mpi_operator import MpiOperator, MpiOperatorArgs
from components.addons.kueue import Kueue, KueueArgs
from components.addons.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.addons.efs_csi import EfsCsiSettings
from components.addons.shared_storage import (
    SharedStorage,
    SharedStorageArgs,
    nfs_server_address,
)
from components.kubernetes.backups import (backup_turn_env, install_backup_env,
                                           install_backup_over_ssh)
from components.kubernetes.worker_node import WorkerNode, WorkerNodeArgs
from config.autoscaling import autoscales
from config.model import StackConfig
from config.storage import efs_on_prem_identity, efs_provider_id
from config import vendored
from config.pool_prices import pool_price_lines
from config.warnings import preview_warnings
from contract import names

# The distribution's cluster secrets, as hex (safe in any config file or token).
SECRET_BYTES = 32
# The stack outputs, in the order they are exported; tests, `distribute` and `doctor` read
# them by name.
OUTPUTS = (names.API_ENDPOINT_OUTPUT, names.ADMIN_KUBECONFIG_OUTPUT, names.NODES_OUTPUT,
           names.DEFAULT_STORAGE_CLASS_OUTPUT, names.USER_KUBECONFIGS_OUTPUT,
           names.USER_VPN_PROFILES_OUTPUT, names.USER_KUBECONFIG_PARAMETERS_OUTPUT,
           "kubeflowUrl", "kubeflowTlsCertificate", "images", "controlPlaneSshHostKey",
           names.POOLS_OUTPUT, names.GATEWAYS_OUTPUT, names.ADMIN_VPN_PROFILE_OUTPUT,
           "backupLocation", "grafanaUrl", "grafanaAdminPassword")
# Exported on every stack; the others only with a value (not None, not empty).
ALWAYS = (names.API_ENDPOINT_OUTPUT, names.ADMIN_KUBECONFIG_OUTPUT, names.NODES_OUTPUT,
          names.DEFAULT_STORAGE_CLASS_OUTPUT)
# What the component itself records of them.
REGISTERED = (*ALWAYS, "kubeflowUrl", "backupLocation", "grafanaUrl")


@dataclass(frozen=True, kw_only=True)
class ClusterArgs:
    settings: StackConfig


def _present(value) -> bool:
    return value is not None and not (isinstance(value, (dict, list)) and not value)


class Cluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    api_endpoint: pulumi.Input[str]
    provider: k8s.Provider
    # The stack outputs by name, in OUTPUTS' order (__main__.py exports each).
    outputs: dict

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions = None):
        settings = args.settings
        # The vendored upstream files as pinned, or nothing is registered.
        vendored.verify()
        distribution = distribution_for(distribution_settings(settings))
        layout_type = layout_class(settings.layout)
        super().__init__("gpu-cluster:index:Cluster", name, None, opts)
        self._name, self._settings, self._distribution = name, settings, distribution
        for warning in preview_warnings(settings):
            pulumi.log.warn(warning, resource=self)
        # What each EC2 pool may cost an hour: `pulumi preview` prints info messages too
        # (https://www.pulumi.com/docs/iac/concepts/logging/), so a pull request's shows it.
        for line in pool_price_lines(settings.pools, settings.aws.region) if settings.aws else []:
            pulumi.log.info(line, resource=self)
        self.pki = ClusterPki(f"{name}-pki", ClusterPkiArgs(
            cluster_name=settings.cluster_name,
            admin_generation=settings.kubernetes.admin_certificate_generation),
                              opts=pulumi.ResourceOptions(parent=self))
        join_generation = settings.kubernetes.join_token_generation
        self.secrets = {
            secret: pulumi.Output.secret(random.RandomBytes(
                f"{name}-{secret}", length=SECRET_BYTES,
                opts=pulumi.ResourceOptions(parent=self, replacement_trigger=(
                    join_generation if secret in distribution.join_secrets else None))).hex)
            for secret in distribution.cluster_secrets}
        layout = layout_type(ClusterContext(name=name, settings=settings,
                                            distribution=distribution, pki=self.pki,
                                            parent=self, secrets=self.secrets))
        machines = layout.result()
        # Every controller, the first (which initialises) first.
        self._controllers = [machines.controller.host, *(c.host for c in machines.joining)]
        control_plane = self._create_kubernetes(machines)
        joined = layout.self_joining(control_plane, self.node_api, machines)
        nodes = [end for node in self.worker_nodes for end in node.ready] + list(joined.nodes)
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
        access = self.access
        values = {
            names.API_ENDPOINT_OUTPUT: self.api_endpoint,
            names.ADMIN_KUBECONFIG_OUTPUT: self.kubeconfig,
            names.DEFAULT_STORAGE_CLASS_OUTPUT: self.storage.default_class,
            names.USER_KUBECONFIGS_OUTPUT:
                access.user_kubeconfigs if settings.access.users else None,
            names.USER_VPN_PROFILES_OUTPUT: access.user_vpn_profiles,
            names.USER_KUBECONFIG_PARAMETERS_OUTPUT: access.user_kubeconfig_parameters,
            "kubeflowUrl": self.kubeflow_url,
            "kubeflowTlsCertificate": self.kubeflow_tls_certificate,
            "grafanaUrl": self.grafana_url,
            "grafanaAdminPassword": self.grafana_admin_password,
            **machines.outputs, **joined.outputs}
        self.outputs = {name: values.get(name) for name in OUTPUTS
                        if name in ALWAYS or _present(values.get(name))}
        self.register_outputs({name: values.get(name) for name in REGISTERED})

    def _create_monitoring(self) -> None:
        """GPU metrics, alerts and dashboards; Prometheus' volume on the storage."""
        settings = self._settings
        monitoring = settings.monitoring
        self.grafana_url: Optional[str] = None
        self.grafana_admin_password: Optional[pulumi.Output[str]] = None
        if not monitoring.enabled:
            return
        installed = Monitoring(f"{self._name}-monitoring", MonitoringArgs(
            monitoring=monitoring, gpu=settings.gpu,
            gpu_nodes=gpu_node_groups(settings.hosts, settings.pools),
            gpu_node_taints=gpu_node_taints([*settings.hosts, *settings.pools]),
            storage_class=monitoring.storage_class or settings.storage.default_class,
            provider=self.provider, depends_on=self.storage.resources,
            workload_addresses=[h.address for h in settings.hosts if h.runs_workloads],
            admin_cidrs=settings.aws.admin_cidrs if settings.aws else (),
            controllers=[(host.name, host.address) for host in self._controllers],
            api_port=settings.kubernetes.api_port),
            opts=pulumi.ResourceOptions(parent=self))
        self.grafana_url = installed.url
        self.grafana_admin_password = installed.admin_password

    def _create_backups(self, machines: LayoutResult, control_plane: ControlPlane) -> None:
        """Scheduled snapshots of the control plane, installed over SSH where the layout
        does not install them at boot; encrypted on the controller to backup.recipients."""
        target = machines.services.backup
        if target is None:
            return
        env = install_backup_env(self._distribution, self._settings.backup,
                                 self._settings.cluster_name, target)
        controllers = control_plane.over_ssh
        if len(controllers) < 2:
            install_backup_over_ssh(machines.controller.host.name, control_plane.ssh, env,
                                    [control_plane.installed], parent=self)
            return
        # Every controller's timer runs; the first whose API answers takes the snapshot.
        for host, ssh in controllers:
            install_backup_over_ssh(host.name, ssh, {
                **env, **backup_turn_env(controllers, host, self._settings.kubernetes.api_port)},
                [control_plane.installed], parent=self)

    def _create_kubernetes(self, machines: LayoutResult) -> ControlPlane:
        """The control plane, the API provider and the hosts' nodes."""
        settings, controller = self._settings, machines.controller
        booted = controller.booted
        control_plane = ControlPlane(
            f"{self._name}-control-plane",
            ControlPlaneArgs(host=controller.host, endpoint=machines.endpoint,
                             cluster_name=settings.cluster_name,
                             kubernetes=settings.kubernetes, distribution=self._distribution,
                             pki=self.pki, prepared=controller.prepared,
                             public_address=controller.public_address,
                             booted=booted and booted.instance, secrets=self.secrets,
                             booted_ssh=booted and booted.ssh,
                             joining=[JoiningController(joining.host, joining.prepared,
                                                        joining.launch)
                                      for joining in machines.joining],
                             endpoint_names=machines.endpoint_names),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.control_plane = control_plane
        if booted is not None:
            # The controllers that installed themselves at boot (cloud) have no
            # HostBootstrap, which makes this step on the other hosts reached over SSH.
            for host, ssh in control_plane.over_ssh:
                authorized_keys_step(host, ssh, settings.ssh,
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
        on_prem = ({h.name for h in settings.hosts}
                   if efs_on_prem_identity(settings.layout, settings.storage.efs) else set())
        for worker in machines.workers:
            self.worker_nodes.append(WorkerNode(
                f"{worker.host.name}-node",
                WorkerNodeArgs(host=worker.host, distribution=self._distribution,
                               prepared=worker.prepared, control_plane=control_plane,
                               provider=self.node_api, join_after=list(worker.join_after),
                               rollout=rollout,
                               provider_identity=(
                                   (efs_provider_id(settings.cluster_name, worker.host.name),
                                    settings.aws.region)
                                   if worker.host.name in on_prem else None)),
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

    def _create_addons(self, machines: LayoutResult, nodes_ready: pulumi.Resource) -> None:
        """What makes the cluster usable, on every layout: GPUs, storage, MPI jobs, Kubeflow."""
        settings, opts = self._settings, pulumi.ResourceOptions(parent=self)
        GpuSupport(f"{self._name}-gpu", GpuSupportArgs(
            gpu=settings.gpu,
            gpu_node_taints=gpu_node_taints([*settings.hosts, *settings.pools]),
            cpu_manager_policy=settings.tuning.cpu_manager_policy, provider=self.provider,
            distribution_runtime_class=self._distribution_runtime_class(nodes_ready)),
            opts=opts)
        storage, services = settings.storage, machines.services
        efs = services.efs
        self.storage = SharedStorage(
            f"{self._name}-storage",
            SharedStorageArgs(
                storage=storage, provider=self.provider,
                depends_on=list(services.storage_servers),
                nfs_server=(nfs_server_address(storage.nfs, settings.hosts)
                            if storage.nfs is not None else None),
                efs_address=efs.address if efs is not None else None,
                efs_csi=(EfsCsiSettings(efs.file_system_id, settings.cluster_name,
                                        self._distribution.kubelet_root_dir, efs.web_identity)
                         if efs is not None and efs.file_system_id is not None else None)),
            opts=opts)
        if settings.mpi.operator:
            MpiOperator(f"{self._name}-mpi-operator",
                        MpiOperatorArgs(provider=self.provider), opts=opts)
        if autoscales(settings.pools):
            ClusterAutoscaler(f"{self._name}-cluster-autoscaler", ClusterAutoscalerArgs(
                provider=self.provider, cluster_name=settings.cluster_name,
                region=settings.aws.region, autoscaling=settings.autoscaling,
                node_selector=self._distribution.controller_node_labels), opts=opts)
        self._create_monitoring()
        self.kubeflow_url: Optional[str] = None
        self.kubeflow_tls_certificate: Optional[pulumi.Output[str]] = None
        profiles = None
        if settings.kubeflow is not None:
            # Its volumes are claimed on the default StorageClass: storage first.
            kubeflow = Kubeflow(f"{self._name}-kubeflow", KubeflowArgs(
                kubeflow=with_cluster_mirror(settings.kubeflow, settings.image_mirror),
                password=settings.kubeflow_password, cluster_name=settings.cluster_name,
                provider=self.provider, depends_on=self.storage.resources,
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
        users_endpoint = (self.control_plane.node_endpoint
                          if services.users_on_private_network else self.api_endpoint)
        flavors = stack_flavors(settings.hosts, settings.pools, settings.access.flavor_order)
        self.access = Access(f"{self._name}-access", AccessArgs(
            access=settings.access, cluster_name=settings.cluster_name, provider=self.provider,
            pki=self.pki, api_endpoint=users_endpoint,
            job_kinds=job_kinds(settings.mpi.operator, settings.kubeflow),
            aws_opts=services.aws_opts, vpn_profile=services.user_vpn_profile,
            kubeflow_profiles=profiles, kueue=self._create_kueue(flavors),
            queue_flavors=flavors,
            kubeconfig_cluster=kubeconfig_cluster_name(
                settings.cluster_name, services.users_on_private_network),
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

    def _storage_egress(self, machines: LayoutResult) -> Optional[StorageEgress]:
        """The shared storage's servers (the NFS server, EFS's mount targets), which team
        pods may not reach; the controller's API port stays open where it is one of them."""
        settings = self._settings
        storage = settings.storage
        servers: list = []
        if storage.nfs is not None:
            servers.append(nfs_server_address(storage.nfs, settings.hosts))
        if storage.efs is not None:
            efs = machines.services.efs
            servers += (list(efs.mount_target_addresses) if efs is not None else []
                        ) or [storage.efs.mount_target_address]
        if not servers:
            return None
        return StorageEgress(servers, machines.endpoint.node_address, machines.endpoint.port)

    def _create_kueue(self, flavors: list[Flavor]) -> Optional[list]:
        """Kueue for the teams' queues (access.queues), when there is a team."""
        access = self._settings.access
        if not (access.queues and access.teams):
            return None
        return Kueue(f"{self._name}-kueue", KueueArgs(
            provider=self.provider, provisioning=uses_provisioning(access.teams, flavors)),
            opts=pulumi.ResourceOptions(parent=self)).installed
