"""Kueue's queues for the teams (access.queues) through the offline preview of the example
stacks: one ClusterQueue and LocalQueue per team with the quota of its ResourceQuota, one
cohort, a namespace selector that matches the team's namespace only, Kueue's manager
configured for Jobs and MPIJobs, and a team's MPIJob followed from its label to the queue
that admits it, the way Kueue routes it."""

import copy
from decimal import Decimal

import pytest
import yaml

import acceptance
from components.access.queues import COHORT
from components.addons.kueue import QUEUE_NAME_LABEL
from config import load
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR, example_plan, bare_metal_config, preview

STACKS_WITH_TEAMS = ("lab", "prod")
# ResourceQuota key -> the Kueue resource it caps.
QUOTA_RESOURCES = {"requests.cpu": "cpu", "requests.memory": "memory",
                   "requests.nvidia.com/gpu": "nvidia.com/gpu"}
# The label the API server gives every Namespace (immutable, its name): Kubernetes
# "Well-Known Labels, Annotations and Taints", kubernetes.io/metadata.name.
NAME_LABEL = "kubernetes.io/metadata.name"


@pytest.fixture(scope="module", params=STACKS_WITH_TEAMS)
def stack(request):
    stack_file = read_stack(PROJECT_DIR, request.param)
    settings = load(stack_file.config, stack_file.secret_keys, stack=request.param)
    return request.param, example_plan(request.param), settings


def of_kind(plan, kind: str) -> list[dict]:
    return [r.inputs for r in plan.resources if r.custom and r.type.endswith(f":{kind}")]


def namespaced(plan, kind: str) -> dict[tuple, dict]:
    return {(o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in of_kind(plan, kind)}


_SUFFIXES = {"m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6),
             "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
             "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30),
             "Ti": Decimal(2**40), "Pi": Decimal(2**50)}


def quantity(value) -> Decimal:
    """A Kubernetes quantity (the forms config/access.py accepts) as a number."""
    text = str(value)
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return Decimal(text[:-len(suffix)]) * _SUFFIXES[suffix]
    return Decimal(text)


def selector_matches(selector: dict, labels: dict) -> bool:
    """A metav1.LabelSelector against labels (apimachinery pkg/apis/meta/v1 LabelSelector:
    matchLabels and matchExpressions ANDed; an empty selector matches everything)."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get(
            "values", [])
        present = key in labels
        if not {"In": present and labels[key] in values,
                "NotIn": not present or labels[key] not in values,
                "Exists": present, "DoesNotExist": not present}[operator]:
            return False
    return True


def namespace_labels(namespace: dict) -> dict:
    """The labels the Namespace will have on the cluster: ours and the API server's."""
    name = namespace["metadata"]["name"]
    return {**namespace["metadata"].get("labels", {}), NAME_LABEL: name}


def pod_requests(template: dict, limit_range: dict) -> dict[str, Decimal]:
    """What a pod of the template requests, as Kubernetes fills it in: a resource given only a
    limit is requested at the limit (API defaulting), cpu/memory without either get the
    LimitRange's defaultRequest (LimitRanger admission). Kueue counts the same."""
    [defaults] = limit_range["spec"]["limits"]
    total: dict[str, Decimal] = {}
    for container in template["spec"]["containers"]:
        resources = container.get("resources", {})
        requests = {**resources.get("limits", {}), **resources.get("requests", {})}
        for resource, value in defaults["defaultRequest"].items():
            requests.setdefault(resource, value)
        for resource, value in requests.items():
            total[resource] = total.get(resource, Decimal(0)) + quantity(value)
    return total


def job_requests(mpijob: dict, limit_range: dict) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for replica in mpijob["spec"]["mpiReplicaSpecs"].values():
        for resource, value in pod_requests(replica["template"], limit_range).items():
            total[resource] = total.get(resource, Decimal(0)) + value * replica.get("replicas", 1)
    return total


def team_mpijob(settings, team: str, workers: int) -> dict:
    """The stack's acceptance MPIJob as a researcher of the team submits it: in the team's
    namespace, labelled for its queue (docs/teams.md, "Fair sharing (Kueue)"), `workers` wide."""
    [mpijob] = [o for o in acceptance.render(settings)["mpijob-benchmark.yaml"]
                if o["kind"] == "MPIJob"]
    mpijob = copy.deepcopy(mpijob)
    mpijob["metadata"]["namespace"] = team
    mpijob["metadata"].setdefault("labels", {})[QUEUE_NAME_LABEL] = team
    mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = workers
    return mpijob


def route(plan, job: dict) -> tuple[dict, dict]:
    """Kueue's path for a job: the LocalQueue its label names in its own namespace, that
    queue's ClusterQueue, whose namespaceSelector must match the job's namespace (else Kueue
    leaves the workload inadmissible)."""
    namespace = job["metadata"]["namespace"]
    local = namespaced(plan, "LocalQueue")[(namespace, job["metadata"]["labels"][QUEUE_NAME_LABEL])]
    cluster = namespaced(plan, "ClusterQueue")[(None, local["spec"]["clusterQueue"])]
    ns = namespaced(plan, "Namespace")[(None, namespace)]
    assert selector_matches(cluster["spec"]["namespaceSelector"], namespace_labels(ns))
    return local, cluster


def admitted(cluster: dict, requests: dict[str, Decimal]) -> bool:
    """Whether the ClusterQueue, empty, admits a workload of these requests: every covered
    resource within nominal + borrowingLimit; resources it does not cover are not counted
    (quotaCheckStrategy IgnoreUndeclared)."""
    for group in cluster["spec"]["resourceGroups"]:
        [flavor] = group["flavors"]
        for resource in flavor["resources"]:
            ceiling = quantity(resource["nominalQuota"]) + quantity(
                resource.get("borrowingLimit", "Infinity"))
            if requests.get(resource["name"], Decimal(0)) > ceiling:
                return False
    return True


def test_each_team_has_a_cluster_queue_with_its_resource_quota_and_a_local_queue(stack):
    _, plan, settings = stack
    teams = [team.name for team in settings.access.teams]
    clusters = namespaced(plan, "ClusterQueue")
    locals_ = namespaced(plan, "LocalQueue")
    assert sorted(clusters) == sorted((None, team) for team in teams)
    assert sorted(locals_) == sorted((team, team) for team in teams)
    quotas = namespaced(plan, "ResourceQuota")
    for team in teams:
        assert locals_[(team, team)]["spec"] == {"clusterQueue": team}
        hard = quotas[(team, "team-quota")]["spec"]["hard"]
        [group] = clusters[(None, team)]["spec"]["resourceGroups"]
        [flavor] = group["flavors"]
        nominal = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
        assert nominal == {QUOTA_RESOURCES[key]: value for key, value in hard.items()
                           if key in QUOTA_RESOURCES}
        assert group["coveredResources"] == [r["name"] for r in flavor["resources"]]
        # The ResourceQuota holds the same figures: nothing borrowed could run.
        assert {r["borrowingLimit"] for r in flavor["resources"]} == {"0"}
        # The example stacks' teams have no per-flavor GPUs: their one flavor selects no nodes.
        flavors = {f["metadata"]["name"]: f for f in of_kind(plan, "ResourceFlavor")}
        assert flavors[flavor["name"]]["spec"] == {}
    assert {c["spec"]["cohortName"] for c in clusters.values()} == {COHORT}


def test_each_cluster_queue_admits_from_its_team_namespace_only(stack):
    _, plan, _ = stack
    namespaces = namespaced(plan, "Namespace")
    # Every namespace the cluster will have that the plan names, and Kubernetes' own.
    labels = {name: namespace_labels(ns) for (_, name), ns in namespaces.items()}
    labels.update({name: {NAME_LABEL: name} for name in ("default", "kube-system")})
    for (_, name), cluster in namespaced(plan, "ClusterQueue").items():
        matched = {ns for ns, ns_labels in labels.items()
                   if selector_matches(cluster["spec"]["namespaceSelector"], ns_labels)}
        assert matched == {name}


def test_a_team_s_mpijob_lands_in_its_local_queue_and_waits_for_its_quota(stack):
    name, plan, settings = stack
    limit_ranges = namespaced(plan, "LimitRange")
    quotas = namespaced(plan, "ResourceQuota")
    for team in settings.access.teams:
        limit_range = limit_ranges[(team.name, "container-defaults")]
        gpus_per_worker = job_requests(team_mpijob(settings, team.name, 1), limit_range)[
            "nvidia.com/gpu"]
        widest = int(team.quota.gpus // gpus_per_worker)
        assert widest >= 1, f"{name}: {team.name}'s quota fits no worker of the benchmark"
        fits, too_wide = (team_mpijob(settings, team.name, workers)
                          for workers in (widest, widest + 1))
        local, cluster = route(plan, fits)
        assert local["metadata"]["namespace"] == team.name == cluster["metadata"]["name"]
        requests = job_requests(fits, limit_range)
        assert admitted(cluster, requests)
        # What Kueue admits, the team's ResourceQuota lets run: the same ceiling.
        hard = quotas[(team.name, "team-quota")]["spec"]["hard"]
        for key, resource in QUOTA_RESOURCES.items():
            if key in hard:
                assert requests.get(resource, 0) <= quantity(hard[key])
        # One worker more than the quota: the job waits in the queue (the ResourceQuota
        # would have refused its pods instead).
        assert not admitted(cluster, job_requests(too_wide, limit_range))


def test_kueue_manages_jobs_and_mpijobs_only_when_they_name_a_queue(stack):
    name, plan, _ = stack
    [chart] = [r for r in plan.resources if r.type == "kubernetes:helm.sh/v4:Chart"
               and r.name == f"{name}-kueue-chart"]
    config = yaml.safe_load(chart.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["kind"] == "Configuration"
    assert config["integrations"]["frameworks"] == ["batch/job", "kubeflow.org/mpijob"]
    assert config["manageJobsWithoutQueueName"] is False
    assert config["resources"] == {"quotaCheckStrategy": "IgnoreUndeclared"}
    assert chart.inputs["namespace"] == "kueue-system"
    # The queues wait for Kueue (its CRDs and webhooks come with the chart).
    for record in plan.resources:
        if record.type.startswith("kubernetes:kueue.x-k8s.io/"):
            assert chart.urn in record.dependencies, record.name


def test_no_teams_no_kueue_and_queues_false_leaves_it_out():
    values = bare_metal_config(workers=1)
    assert not [r for r in preview(values).resources if "kueue" in r.type.lower()
                or "Kueue" in r.type]
    values["access"] = {"teams": [{"name": "vision", "quota": {"gpus": 2}}], "queues": False}
    plan = preview(values)
    assert not [r for r in plan.resources if "kueue" in r.urn.lower()]
    assert namespaced(plan, "ResourceQuota")  # the hard cap stays


def test_a_team_without_gpu_cpu_or_memory_quota_gets_a_queue_that_counts_nothing():
    values = bare_metal_config(workers=1)
    values["access"] = {"teams": [{"name": "vision", "quota": {"storage": "1Ti"}},
                                  {"name": "nlp", "quota": {"cpu": "500m"}}]}
    clusters = namespaced(preview(values), "ClusterQueue")
    assert clusters[(None, "vision")]["spec"]["resourceGroups"] == []
    [group] = clusters[(None, "nlp")]["spec"]["resourceGroups"]
    assert group["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "500m", "borrowingLimit": "0"}]


def test_a_team_borrows_the_gpus_its_resource_quota_leaves_room_for():
    values = bare_metal_config(workers=1)
    values["access"] = {"teams": [
        {"name": "vision", "quota": {"gpus": 4, "cpu": "32", "borrowGpus": 2}},
        {"name": "nlp", "quota": {"gpus": 4}}]}
    plan = preview(values)
    clusters = namespaced(plan, "ClusterQueue")
    quotas = namespaced(plan, "ResourceQuota")
    [group] = clusters[(None, "vision")]["spec"]["resourceGroups"]
    assert group["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "32", "borrowingLimit": "0"},
        {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "2"}]
    # The hard cap lets the borrowed GPUs run, and no more.
    assert quotas[("vision", "team-quota")]["spec"]["hard"]["requests.nvidia.com/gpu"] == "6"
    assert quotas[("nlp", "team-quota")]["spec"]["hard"]["requests.nvidia.com/gpu"] == "4"
    [group] = clusters[(None, "nlp")]["spec"]["resourceGroups"]
    assert group["flavors"][0]["resources"][0]["borrowingLimit"] == "0"


def test_borrowing_gpus_without_a_gpu_quota_is_refused_naming_the_key():
    from config import ConfigError
    from tests.builders import as_cli_config

    values = bare_metal_config(workers=1)
    values["access"] = {"teams": [{"name": "vision", "quota": {"borrowGpus": 2}}]}
    cli = as_cli_config(values)
    with pytest.raises(ConfigError) as error:
        load(cli.config, cli.secret_keys, stack="test")
    assert "access.teams[0]" in str(error.value) and "borrowGpus needs gpus" in str(error.value)
