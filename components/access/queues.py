"""Each team's Kueue queues, from the quota already in its config: a ClusterQueue whose
nominal quota is the team's quota (its ResourceQuota stays the hard cap: the same
figures, GPUs it may borrow added) and a LocalQueue of the team's name in its namespace. A job labelled
`kueue.x-k8s.io/queue-name: <team>` waits there until its whole request fits.

A team with per-flavor GPUs (`quota.flavors`, config/queues.py) has them in the flavors'
order: on-prem first, then the pools, whose nodes cluster-autoscaler adds when a job is
admitted there (the ProvisioningRequest admission check)."""

from collections.abc import Sequence
from dataclasses import dataclass

from config.access import Team
from config.queues import DEFAULT_FLAVOR, ON_PREM_FLAVOR, FlavorQuota, flavor_order
from contract.names import CAPACITY_LABEL, POOL_LABEL

API_VERSION = "kueue.x-k8s.io/v1beta2"
# DEFAULT_FLAVOR: one flavor without node labels, upstream's examples' name: the quota
# counts resources, not node kinds (GPU pods reach GPU nodes by their nvidia.com/gpu
# request). A team without per-flavor GPUs has all its quota there, as before flavors; one
# with them, its CPU and memory (one figure, as its ResourceQuota has); their GPUs are
# split by flavor.
GPU = "nvidia.com/gpu"
# The admission check of the flavors whose nodes cluster-autoscaler provides, and the
# ProvisioningRequestConfig it names: kueue v0.19.2 site/content/en/docs/concepts/
# admission_check/provisioning_request.md ("Usage"); controllerName is
# apis/kueue/v1beta2/provisioningrequestconfig_types.go:29.
PROVISIONING_CHECK = "pool-capacity"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
# cluster-autoscaler's class that scales a node group up for the whole request or not at all
# (kubernetes/autoscaler cluster-autoscaler/FAQ.md, "Supported ProvisioningClasses": from
# 1.30.2; atomic where the cloud provider implements AtomicIncreaseSize), unlike
# check-capacity, which never scales up.
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
# All teams' ClusterQueues are in one cohort, where unused nominal quota is lent.
COHORT = "teams"
# The team label of its Namespace (components/access/teams.py), which the ClusterQueue's
# namespaceSelector matches: only that namespace's workloads are admitted to it.
TEAM_LABEL = "gpu-cluster/team"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-cluster"}
# The cluster-scoped objects a ClusterQueue names; queue_objects lists them before the queues.
NAMED_BY_QUEUES = ("ResourceFlavor", "AdmissionCheck", "ProvisioningRequestConfig")


@dataclass(frozen=True)
class Flavor:
    """A kind of capacity the stack has, as Kueue's ResourceFlavor: the node labels a
    workload admitted there is given as its nodeSelector, and the tolerations (kueue v0.19.2
    apis/kueue/v1beta2/resourceflavor_types.go:53-98: nodeLabels, nodeTaints, tolerations)."""

    name: str
    node_labels: dict[str, str]
    # Of the pool's NoSchedule/NoExecute taints: added to the admitted pods, so that those
    # of a team with quota here reach the pool's nodes (and cluster-autoscaler, simulating
    # them on the pool's node template, sees them fit). With matching tolerations Kueue does
    # not consider nodeTaints (resourceflavor_types.go:72-73), so none are set.
    tolerations: tuple[dict, ...] = ()
    # Nodes that cluster-autoscaler adds: admission waits for them (PROVISIONING_CHECK).
    provisioned: bool = False


def _tolerations(taints) -> tuple[dict, ...]:
    return tuple({"key": t.key, "operator": "Equal", **({"value": t.value} if t.value else {}),
                  "effect": t.effect} for t in taints if t.effect != "PreferNoSchedule")


def stack_flavors(hosts: Sequence, pools: Sequence, order: Sequence[str]) -> list[Flavor]:
    """The stack's flavors in the order teams' queues try them (config/queues.py
    flavor_order): the on-prem hosts by their capacity label, each cloud pool by its pool
    label. A pool's nodes come from cluster-autoscaler."""
    by_name = {pool.name: pool for pool in pools}
    flavors = []
    for name in flavor_order(order, hosts, pools):
        if name == ON_PREM_FLAVOR:
            flavors.append(Flavor(name, {CAPACITY_LABEL: ON_PREM_FLAVOR}))
        else:
            pool = by_name[name]
            flavors.append(Flavor(name, {POOL_LABEL: name}, _tolerations(pool.taints),
                                  provisioned=True))
    return flavors


def covered_quota(team: Team) -> dict[str, str]:
    """Kueue resource -> nominal quota: what the team's ResourceQuota caps (requests.*) of
    GPUs, CPU and memory. Storage is a PVC quota, which Kueue does not count."""
    quota = team.quota
    return {resource: str(value) for resource, value in (
        ("cpu", quota.cpu), ("memory", quota.memory), (GPU, quota.gpus))
        if value is not None}


def resource_flavor(flavor: Flavor | None = None) -> dict:
    """The ResourceFlavor of `flavor`; without one, DEFAULT_FLAVOR (no node labels)."""
    spec: dict = {}
    if flavor is not None:
        spec["nodeLabels"] = dict(flavor.node_labels)
        if flavor.tolerations:
            spec["tolerations"] = [dict(t) for t in flavor.tolerations]
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor",
            "metadata": {"name": flavor.name if flavor else DEFAULT_FLAVOR,
                         "labels": dict(MANAGED_BY)}, "spec": spec}


def team_flavors(team: Team, flavors: Sequence[Flavor]) -> list[tuple[Flavor, FlavorQuota]]:
    """The flavors the team has GPUs on, in the stack's order, with its quota on each."""
    quotas = {quota.name: quota for quota in team.quota.flavors}
    return [(flavor, quotas[flavor.name]) for flavor in flavors if flavor.name in quotas]


def cluster_queue(team: Team, flavors: Sequence[Flavor] = ()) -> dict:
    """The team's quota is its nominal quota. It may borrow from the cohort's idle quota
    only what its ResourceQuota lets run: `quota.borrowGpus` GPUs (the ResourceQuota caps
    the namespace at gpus + borrowGpus), no CPU or memory (their ResourceQuota is the
    nominal figure, and Kubernetes would refuse the pods of a job admitted on borrowed
    quota, "403 Forbidden": kubernetes.io/docs/concepts/policy/resource-quotas/, so the job
    would hold quota without running). borrowingLimit: the most a ClusterQueue may borrow
    of a resource from the cohort (Kueue docs, concepts/cluster_queue, "BorrowingLimit").
    Its own unused quota is lent in the cohort. Without a quota on GPUs, CPU and memory the
    queue has no resource group: nothing counted, jobs admitted at once.

    With per-flavor GPUs the GPUs are a resource group of their own, a flavor each with its
    nominal quota and borrowingLimit: their sums are `gpus` and `borrowGpus`
    (config/access.py), so the ResourceQuota's cap is still exactly what Kueue may admit.
    CPU and memory stay one figure on DEFAULT_FLAVOR (no node labels: the pods' node
    selector comes from their GPUs' flavor alone)."""
    quota = covered_quota(team)
    spec: dict = {"cohortName": COHORT,
                  "namespaceSelector": {"matchLabels": {TEAM_LABEL: team.name}}}
    per_flavor = team_flavors(team, flavors)
    if not per_flavor:
        borrow = {GPU: str(team.quota.borrow_gpus)}
        spec["resourceGroups"] = [{
            "coveredResources": list(quota),
            "flavors": [{"name": DEFAULT_FLAVOR, "resources": [
                {"name": resource, "nominalQuota": value,
                 "borrowingLimit": borrow.get(resource, "0")}
                for resource, value in quota.items()]}],
        }] if quota else []
    else:
        shared = {resource: value for resource, value in quota.items() if resource != GPU}
        spec["resourceGroups"] = ([{
            "coveredResources": list(shared),
            "flavors": [{"name": DEFAULT_FLAVOR, "resources": [
                {"name": resource, "nominalQuota": value, "borrowingLimit": "0"}
                for resource, value in shared.items()]}],
        }] if shared else []) + [{
            "coveredResources": [GPU],
            "flavors": [{"name": flavor.name, "resources": [
                {"name": GPU, "nominalQuota": str(share.gpus),
                 "borrowingLimit": str(share.borrow_gpus)}]} for flavor, share in per_flavor],
        }]
        # Kueue tries the flavors in this order (kueue v0.19.2 pkg/scheduler/flavorassigner/
        # flavorassigner.go:1089-1173, shouldTryNextFlavor at 1259; site/content/en/docs/
        # concepts/cluster_queue.md, "FlavorFungibility"): a flavor where the job fits in the
        # team's own quota is taken at once. Upstream's defaults, said outright: one where it
        # fits by borrowing idle GPUs of the cohort is taken too (MayStopSearch: idle on-prem
        # GPUs before paid ones), one where it would have to preempt is passed over for the
        # next (TryNextFlavor).
        spec["flavorFungibility"] = {"whenCanBorrow": "MayStopSearch",
                                     "whenCanPreempt": "TryNextFlavor"}
        provisioned = [flavor.name for flavor, _ in per_flavor if flavor.provisioned]
        if provisioned:
            # Only a workload assigned one of these flavors waits for its nodes
            # (clusterqueue_types.go:165-187, admissionChecksStrategy.onFlavors).
            spec["admissionChecksStrategy"] = {"admissionChecks": [
                {"name": PROVISIONING_CHECK, "onFlavors": provisioned}]}
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue",
            "metadata": {"name": team.name,
                         "labels": {**MANAGED_BY, TEAM_LABEL: team.name}},
            "spec": spec}


def local_queue(team: Team) -> dict:
    return {"apiVersion": API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": team.name, "namespace": team.name,
                         "labels": {**MANAGED_BY, TEAM_LABEL: team.name}},
            "spec": {"clusterQueue": team.name}}


def provisioning_objects() -> list[dict]:
    """The ProvisioningRequestConfig and the AdmissionCheck naming it. Kueue makes a
    ProvisioningRequest of the workload's pods in its namespace once it holds quota on a
    pool's flavor, and admits it when cluster-autoscaler reports Provisioned=True.
    managedResources: only the pod sets that request GPUs are in the request (an MPIJob's
    launcher asks for no nodes; kueue v0.19.2 provisioningrequestconfig_types.go:52-65).
    The check works on Kueue's Workload, whatever the job kind: MPIJobs go through it as
    Jobs do (kubeflow.org/mpijob is in components/addons/kueue.py FRAMEWORKS, as in the
    chart's own values.yaml:168)."""
    labels = dict(MANAGED_BY)
    return [
        {"apiVersion": API_VERSION, "kind": "ProvisioningRequestConfig",
         "metadata": {"name": PROVISIONING_CHECK, "labels": labels},
         "spec": {"provisioningClassName": PROVISIONING_CLASS, "managedResources": [GPU]}},
        {"apiVersion": API_VERSION, "kind": "AdmissionCheck",
         "metadata": {"name": PROVISIONING_CHECK, "labels": dict(labels)},
         "spec": {"controllerName": PROVISIONING_CONTROLLER,
                  "parameters": {"apiGroup": "kueue.x-k8s.io",
                                 "kind": "ProvisioningRequestConfig",
                                 "name": PROVISIONING_CHECK}}},
    ]


def uses_provisioning(teams: Sequence[Team], flavors: Sequence[Flavor]) -> bool:
    """Whether a team has GPUs on a flavor whose nodes cluster-autoscaler provides."""
    return any(flavor.provisioned for team in teams for flavor, _ in team_flavors(team, flavors))


def queue_objects(teams: list[Team], flavors: Sequence[Flavor] = ()) -> list[dict]:
    """The flavors (DEFAULT_FLAVOR, then the stack's), the provisioning check when a team
    has GPUs on a pool, then per team its ClusterQueue and LocalQueue."""
    if not teams:
        return []
    return [resource_flavor(), *(resource_flavor(flavor) for flavor in flavors),
            *(provisioning_objects() if uses_provisioning(teams, flavors) else ()),
            *(obj for team in teams
              for obj in (cluster_queue(team, flavors), local_queue(team)))]
