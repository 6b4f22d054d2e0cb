"""Each team's Kueue queues, from the quota already in its config: a ClusterQueue whose
nominal quota is the team's quota (its ResourceQuota stays the hard cap: the same
figures, GPUs it may borrow added) and a LocalQueue of the team's name in its namespace. A job labelled
`kueue.x-k8s.io/queue-name: <team>` waits there until its whole request fits."""

from config.access import Team

API_VERSION = "kueue.x-k8s.io/v1beta2"
# One flavor without node labels: the quota counts resources, not node kinds (GPU pods
# reach GPU nodes by their nvidia.com/gpu request). Upstream's examples' name.
DEFAULT_FLAVOR = "default-flavor"
# All teams' ClusterQueues are in one cohort, where unused nominal quota is lent.
COHORT = "teams"
# The team label of its Namespace (components/access/teams.py), which the ClusterQueue's
# namespaceSelector matches: only that namespace's workloads are admitted to it.
TEAM_LABEL = "gpu-cluster/team"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-cluster"}


def covered_quota(team: Team) -> dict[str, str]:
    """Kueue resource -> nominal quota: what the team's ResourceQuota caps (requests.*) of
    GPUs, CPU and memory. Storage is a PVC quota, which Kueue does not count."""
    quota = team.quota
    return {resource: str(value) for resource, value in (
        ("cpu", quota.cpu), ("memory", quota.memory), ("nvidia.com/gpu", quota.gpus))
        if value is not None}


def resource_flavor() -> dict:
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor",
            "metadata": {"name": DEFAULT_FLAVOR, "labels": dict(MANAGED_BY)}, "spec": {}}


def cluster_queue(team: Team) -> dict:
    """The team's quota is its nominal quota. It may borrow from the cohort's idle quota
    only what its ResourceQuota lets run: `quota.borrowGpus` GPUs (the ResourceQuota caps
    the namespace at gpus + borrowGpus), no CPU or memory (their ResourceQuota is the
    nominal figure, and Kubernetes would refuse the pods of a job admitted on borrowed
    quota, "403 Forbidden": kubernetes.io/docs/concepts/policy/resource-quotas/, so the job
    would hold quota without running). borrowingLimit: the most a ClusterQueue may borrow
    of a resource from the cohort (Kueue docs, concepts/cluster_queue, "BorrowingLimit").
    Its own unused quota is lent in the cohort. Without a quota on GPUs, CPU and memory the
    queue has no resource group: nothing counted, jobs admitted at once."""
    quota = covered_quota(team)
    borrow = {"nvidia.com/gpu": str(team.quota.borrow_gpus)}
    groups = [{
        "coveredResources": list(quota),
        "flavors": [{"name": DEFAULT_FLAVOR, "resources": [
            {"name": resource, "nominalQuota": value,
             "borrowingLimit": borrow.get(resource, "0")}
            for resource, value in quota.items()]}],
    }] if quota else []
    return {"apiVersion": API_VERSION, "kind": "ClusterQueue",
            "metadata": {"name": team.name,
                         "labels": {**MANAGED_BY, TEAM_LABEL: team.name}},
            "spec": {"cohortName": COHORT,
                     "namespaceSelector": {"matchLabels": {TEAM_LABEL: team.name}},
                     "resourceGroups": groups}}


def local_queue(team: Team) -> dict:
    return {"apiVersion": API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": team.name, "namespace": team.name,
                         "labels": {**MANAGED_BY, TEAM_LABEL: team.name}},
            "spec": {"clusterQueue": team.name}}


def queue_objects(teams: list[Team]) -> list[dict]:
    """The flavor, then per team its ClusterQueue and LocalQueue."""
    if not teams:
        return []
    return [resource_flavor(), *(obj for team in teams
                                 for obj in (cluster_queue(team), local_queue(team)))]
