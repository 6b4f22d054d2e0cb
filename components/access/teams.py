"""Who may use the cluster: a namespace per team with its quota and container defaults,
and per user a client certificate signed by the cluster CA (never the admin's), bound to
Kubernetes' admin/edit/view role in the user's namespaces. Those roles also cover the job
kinds the cluster installs (MPIJob; Trainer's TrainJob with Kubeflow). Each user's
kubeconfig is a secret output and, on AWS layouts, an SSM SecureString the user can fetch."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.access.kubeflow_profiles import contributor_objects, profile_owner
from components.access.queues import NAMED_BY_QUEUES, TEAM_LABEL, Flavor, queue_objects
from components.access.storage_egress import StorageEgress, storage_egress_policy
from components.access.team_policy import network_policy_guard, team_pod_policy
from components.common import kube, pod_security

from components.aws import ssm_paths
from components.kubernetes.pki import ClusterPki
from components.kubernetes.kubeconfig import client_kubeconfig
from config.access import AccessSettings, Team, User
from config.kubeflow import KubeflowSettings

GPU_QUOTA = "requests.nvidia.com/gpu"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-cluster"}
# A `pulumi up` this close to a certificate's end issues a new one (at most 30 days).
MAX_EARLY_RENEWAL_HOURS = 30 * 24

# Kubernetes' built-in admin/edit/view roles have no rules of their own: the clusterrole
# aggregation controller fills them from every ClusterRole carrying these labels, and `view`
# is aggregated into `edit`, `edit` into `admin` (kubernetes
# plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, clusterRoles()). Upstream
# operators label their roles only for Kubeflow's kubeflow-edit/-view (mpi-operator v0.8.0
# deploy/v2beta1/mpi-operator.yaml: kubeflow-mpijobs-edit/-view), which users are not bound to.
AGGREGATE_TO_EDIT = "rbac.authorization.k8s.io/aggregate-to-edit"
AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"
# The preview's warning for a team below restricted (access.teams[].podSecurity).
BASELINE_WARNING = (
    "access.teams[{team}].podSecurity is {level}: pods in namespace {team} may run as root "
    "and keep the runtime's default capabilities (Pod Security Standards {level}); "
    "remove the key to enforce restricted")
CONTROLLER_WORKER_WARNING = (
    "hosts[{index}] ({host}).role is controller+worker and access.teams is set: team pods can "
    "run on the controller, beside the cluster's datastore and CA key; give teams worker "
    "hosts and the controller role `controller`")
# policy.go's Read and Write verb sets: edit writes, reading comes with view.
READ_VERBS = ["get", "list", "watch"]
WRITE_VERBS = ["create", "update", "patch", "delete", "deletecollection"]


@dataclass(frozen=True)
class JobKind:
    """Custom resources users submit, for the built-in roles: edit may write `writable`,
    view (and so edit and admin) may read `readable`. Status subresources stay read-only,
    as for the built-in kinds (the controller owns status)."""

    name: str
    group: str
    writable: tuple[str, ...]
    readable: tuple[str, ...]


# The MPI operator's CRD (mpijobs.kubeflow.org, with a status subresource).
MPI_JOBS = JobKind("mpijobs", "kubeflow.org", ("mpijobs",), ("mpijobs", "mpijobs/status"))
# Kubeflow Trainer v2 (kubeflow/manifests 26.03 applications/trainer, as v1.11.0): TrainJobs, and
# the namespaced TrainingRuntimes they reference, which only admins of the cluster write,
# as upstream's kubeflow-trainer-edit has it. ClusterTrainingRuntimes are cluster-scoped:
# a namespace's roles cannot grant them; upstream lets every authenticated user read them.
TRAIN_JOBS = JobKind("trainjobs", "trainer.kubeflow.org", ("trainjobs",),
                     ("trainjobs", "trainjobs/status", "trainingruntimes"))


@dataclass(frozen=True)
class KubeflowProfiles:
    """With Kubeflow's profiles: what installs the Profile CRD and its controller (each
    team's owner and contributors: components/access/kubeflow_profiles.py)."""

    after: Sequence[pulumi.Resource]


def kubeconfig_cluster_name(cluster_name: str, users_on_private_network: bool) -> str:
    """Users who reach the API at another address than the admin (hybrid: the private one)
    get a cluster entry of another name. Kubeconfigs merged by KUBECONFIG=a:b keep the first
    file's entry of a name (kubernetes.io/docs/concepts/configuration/
    organize-cluster-access-kubeconfig, "Merging kubeconfig files": "the first file to set
    a particular value or map key wins"), so an admin's and a user's file would otherwise
    send the user's context to the admin's address, and `distribute --merge-into` refuses
    the clash."""
    return f"{cluster_name}-private" if users_on_private_network else cluster_name


@dataclass(frozen=True, kw_only=True)
class AccessArgs:
    access: AccessSettings
    cluster_name: str
    provider: k8s.Provider
    pki: ClusterPki
    # The API address in users' kubeconfigs (hybrid: the private one, through the VPN).
    api_endpoint: pulumi.Input[str]
    # The job kinds the cluster installs (job_kinds), which the built-in roles cover.
    job_kinds: Sequence[JobKind] = ()
    # AWS layouts: where each user's kubeconfig is also stored (an SSM SecureString),
    # tagged with aws.tags.
    aws_opts: Optional[pulumi.ResourceOptions] = None
    # Hybrid with the VPN server on EC2: a user's own VPN profile.
    vpn_profile: Optional[Callable[[str], Optional[pulumi.Output[str]]]] = None
    kubeflow_profiles: Optional[KubeflowProfiles] = None
    # With Kueue (access.queues): what installs it; the teams' queues wait for it.
    kueue: Optional[Sequence[pulumi.Resource]] = None
    # Kueue's flavors of the stack's capacity, in the order teams' queues try them
    # (components/access/queues.py stack_flavors).
    queue_flavors: Sequence[Flavor] = ()
    # The cluster entry's name in users' kubeconfigs when it is not the cluster's: where
    # they reach another address than the admin (kubeconfig_cluster_name).
    kubeconfig_cluster: Optional[str] = None
    # The Pod Security version the teams' levels are pinned to (pod_security.version_of).
    pod_security_version: str = "latest"
    # Hosts (index in `hosts`, name) that run the control plane and workloads: team pods can
    # be scheduled beside the datastore and the CA there, which the preview warns about.
    workload_controllers: Sequence[tuple[int, str]] = ()
    # The NFS server and EFS mount targets, which team pods may not reach (none: no shared
    # storage backend).
    storage_egress: Optional[StorageEgress] = None


class Access(pulumi.ComponentResource):
    user_kubeconfigs: pulumi.Output[dict]  # secret: user name -> kubeconfig
    user_kubeconfig_parameters: dict[str, pulumi.Output[str]]
    user_vpn_profiles: Optional[pulumi.Output[dict]]  # secret: user name -> .ovpn

    def __init__(self, name: str, args: AccessArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:access:Access", name, None, opts)
        self._name, self._args = name, args
        access = args.access
        on_cluster = kube.k8s_provider_opts(args.provider, self)
        profiles = args.kubeflow_profiles
        version = args.pod_security_version
        manifests = [obj for team in access.teams
                     for obj in team_objects(
                         team, profile_owner(team.name) if profiles is not None else None,
                         version)]
        for team in access.teams:
            if team.pod_security != pod_security.CLUSTER_DEFAULT:
                pulumi.log.warn(BASELINE_WARNING.format(team=team.name,
                                                        level=team.pod_security), resource=self)
        if access.teams:
            manifests += team_pod_policy(MANAGED_BY)
            if args.storage_egress is not None:
                manifests += [storage_egress_policy(
                    team.name, {**MANAGED_BY, TEAM_LABEL: team.name}, args.storage_egress)
                    for team in access.teams]
                manifests += network_policy_guard(MANAGED_BY)
            for index, host in args.workload_controllers:
                pulumi.log.warn(CONTROLLER_WORKER_WARNING.format(index=index, host=host),
                                resource=self)
        manifests += [obj for user in access.users for obj in user_bindings(user)]
        manifests += job_roles(list(args.job_kinds))
        created = kube.apply_all(manifests, on_cluster)
        if profiles is not None:
            self._create_kubeflow_profiles(profiles, created)
        if args.kueue is not None:
            self._create_queues(args.kueue, created)
        kubeconfigs = {user.name: self._kubeconfig(user) for user in access.users}
        self.user_kubeconfigs = pulumi.Output.secret(pulumi.Output.all(**kubeconfigs))
        profiles = {user.name: args.vpn_profile(user.name)
                     for user in access.users} if args.vpn_profile else {}
        self.user_vpn_profiles = (
            pulumi.Output.secret(pulumi.Output.all(**profiles))
            if profiles and None not in profiles.values() else None)
        self.user_kubeconfig_parameters = {}
        if args.aws_opts is not None:
            # Imported here: a stack without AWS never loads the AWS SDK.
            import pulumi_aws as aws
            for user in access.users:
                parameter = aws.ssm.Parameter(
                    f"{name}-{user.name}-kubeconfig",
                    name=ssm_paths.user_kubeconfig(args.cluster_name, user.name),
                    type="SecureString",
                    # A kubeconfig can exceed the standard tier's 4 KB.
                    tier="Intelligent-Tiering",
                    value=kubeconfigs[user.name],
                    # With the provider's default_tags (aws_opts): the stack's, the cluster's.
                    tags={"gpu-cluster/user": user.name},
                    opts=pulumi.ResourceOptions.merge(
                        args.aws_opts, pulumi.ResourceOptions(parent=self)))
                self.user_kubeconfig_parameters[user.name] = parameter.name
        self.register_outputs({"users": [user.name for user in access.users]})

    def _create_kubeflow_profiles(self, profiles: KubeflowProfiles, namespaces: list) -> None:
        """A Kubeflow Profile per team: the profile controller adopts the team's namespace
        (its `owner` annotation names the profile's owner) and adds Kubeflow's roles and
        Istio policies, so the team's namespace is also its Kubeflow workspace."""
        args = self._args
        opts = kube.k8s_provider_opts(args.provider, self, [*namespaces, *profiles.after])
        for team in args.access.teams:
            profile = k8s.apiextensions.CustomResource(
                f"{team.name}-kubeflow-profile",
                **kubeflow_profile(team, profile_owner(team.name)), opts=opts)
            # Its contributors, once the controller adopted the namespace.
            kube.apply_all(contributor_objects(team, args.access.users),
                           kube.k8s_provider_opts(args.provider, self, [profile]))

    def _create_queues(self, kueue: Sequence[pulumi.Resource], namespaces: list) -> None:
        """Kueue's objects for the teams (components/access/queues.py), once its CRDs and
        webhooks are there."""
        args = self._args
        # The ClusterQueues after the flavors and admission checks they name (and deleted
        # before them), so Kueue never sees one referring to a missing object.
        named: list = []
        for obj in queue_objects(args.access.teams, args.queue_flavors):
            metadata = obj["metadata"]
            name = "-".join(filter(None, [metadata.get("namespace"), obj["kind"].lower(),
                                          metadata["name"]]))
            after = named if obj["kind"] == "ClusterQueue" else []
            created = k8s.apiextensions.CustomResource(
                name, api_version=obj["apiVersion"], kind=obj["kind"], metadata=metadata,
                spec=obj["spec"],
                opts=kube.k8s_provider_opts(args.provider, self, [*namespaces, *kueue, *after]))
            if obj["kind"] in NAMED_BY_QUEUES:
                named.append(created)

    def _kubeconfig(self, user: User) -> pulumi.Output[str]:
        args = self._args
        cluster = args.cluster_name
        entry = args.kubeconfig_cluster or cluster
        hours = args.access.certificate_validity_days * 24
        cert = args.pki.client_certificate(
            f"user-{user.name}", user.name, user.groups[0] if user.groups else None,
            validity_hours=hours, early_renewal_hours=min(MAX_EARLY_RENEWAL_HOURS, hours // 3),
            generation=args.access.certificate_generation)
        return pulumi.Output.secret(pulumi.Output.all(
            args.api_endpoint, args.pki.ca_cert_pem, cert.cert_pem, cert.private_key_pem,
        ).apply(lambda v: client_kubeconfig(entry, v[0], v[1], f"{cluster}-{user.name}",
                                            v[2], v[3])))



def team_objects(team: Team, kubeflow_owner: Optional[str] = None,
                 pod_security_version: str = "latest") -> list[dict]:
    """The team's Namespace (enforcing its Pod Security level), its ResourceQuota (when it
    sets one) and LimitRange."""
    labels = {**MANAGED_BY, TEAM_LABEL: team.name}
    # Set before Kubeflow's profile controller adopts the namespace, which adds its own
    # pod-security.kubernetes.io/enforce: baseline only where the key is absent
    # (kubeflow/manifests 26.03 applications/profiles/pss/namespace-labels.yaml, lines 14-16:
    # "Profile controller will not replace a namespace label if its key already exists").
    namespace_labels = {**labels,
                        **pod_security.namespace_labels(team.pod_security, pod_security_version)}
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": team.name, "labels": namespace_labels}}
    if kubeflow_owner:
        # What Kubeflow's profile controller requires to adopt an existing namespace.
        namespace["metadata"]["annotations"] = {"owner": kubeflow_owner}
    objects = [namespace]
    quota = team.quota
    hard = {key: str(value) for key, value in {
        # The hard cap: its own GPUs and those its queue may borrow (components/access/queues.py).
        GPU_QUOTA: None if quota.gpus is None else quota.gpus + quota.borrow_gpus,
        "requests.cpu": quota.cpu, "requests.memory": quota.memory,
        "requests.storage": quota.storage}.items() if value is not None}
    if hard:
        objects.append({"apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": {"name": "team-quota", "namespace": team.name,
                                     "labels": labels},
                        "spec": {"hard": hard}})
    defaults = team.container_defaults
    objects.append({
        "apiVersion": "v1", "kind": "LimitRange",
        "metadata": {"name": "container-defaults", "namespace": team.name, "labels": labels},
        "spec": {"limits": [{
            "type": "Container",
            "defaultRequest": {"cpu": defaults.cpu_request, "memory": defaults.memory_request},
            "default": {"cpu": defaults.cpu_limit, "memory": defaults.memory_limit},
        }]},
    })
    return objects


def kubeflow_profile(team: Team, owner: str) -> dict:
    return {"api_version": "kubeflow.org/v1", "kind": "Profile",
            "metadata": {"name": team.name, "labels": dict(MANAGED_BY)},
            "spec": {"owner": {"kind": "User", "name": owner}}}


def user_bindings(user: User) -> list[dict]:
    """The user's role in each of their namespaces; an admin without namespaces is bound
    to cluster-admin. Removing the user from config removes these."""
    subject = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user.name}]
    labels = {**MANAGED_BY, "gpu-cluster/user": user.name}
    if not user.namespaces:
        return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": f"gpu-cluster-user-{user.name}", "labels": labels},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": "cluster-admin"},
                 "subjects": subject}]
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": f"gpu-cluster-user-{user.name}", "namespace": namespace,
                          "labels": labels},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": user.role},
             "subjects": subject}
            for namespace in user.namespaces]


def job_kinds(mpi_operator: bool, kubeflow: Optional[KubeflowSettings]) -> list[JobKind]:
    """The job kinds whose CRDs the stack installs: mpi.operator's MPIJob, Kubeflow
    Trainer's TrainJob."""
    kinds = [MPI_JOBS] if mpi_operator else []
    if kubeflow is not None and "trainer" in kubeflow.components:
        kinds.append(TRAIN_JOBS)
    return kinds


def job_roles(kinds: list[JobKind]) -> list[dict]:
    """Per job kind, a ClusterRole aggregated into the built-in view role (reading) and
    one into edit (writing); both reach admin through edit."""
    roles = []
    for kind in kinds:
        for suffix, label, resources, verbs in (
                ("view", AGGREGATE_TO_VIEW, kind.readable, READ_VERBS),
                ("edit", AGGREGATE_TO_EDIT, kind.writable, WRITE_VERBS)):
            roles.append({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": f"gpu-cluster-{kind.name}-{suffix}",
                             "labels": {**MANAGED_BY, label: "true"}},
                "rules": [{"apiGroups": [kind.group], "resources": list(resources),
                           "verbs": list(verbs)}],
            })
    return roles
