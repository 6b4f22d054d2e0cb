"""Kueue's flavors through the offline preview: where a team's queued GPUs come from. The
on-prem hosts and each cloud pool are a ResourceFlavor that selects exactly their nodes
(the labels the program gives them); a team with per-flavor GPUs has a ClusterQueue that
lists them in the stack's order, every name it uses is an object of the plan, its
ResourceQuota caps what Kueue may admit, and a pool's flavor waits for cluster-autoscaler
(the ProvisioningRequest admission check)."""


from components.access.queues import (PROVISIONING_CHECK, PROVISIONING_CLASS,
                                      PROVISIONING_CONTROLLER)
from components.addons.kueue import PROVISIONING_ANNOTATION
from config.queues import DEFAULT_FLAVOR
from contract.names import CAPACITY_LABEL, POOL_LABEL
from tests.builders import bare_metal_config, cloud_config, shared_preview
from tests.stacks.test_pool_scaling import rke2_registered_node
from tests.stacks.test_queues import namespaced, of_kind, selector_matches

GPU = "nvidia.com/gpu"
NO_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def cloud_values(flavor_order=None) -> dict:
    values = cloud_config()
    # A pool's flavor needs cluster-autoscaler, which runs with RKE2 (config/queues.py).
    values["kubernetes"] = {"distribution": "rke2"}
    values["pools"] = [
        {"name": "a10g", "instanceType": "g5.12xlarge", "count": 1, "gpus": 4,
         "taints": [NO_GPU_TAINT, {"key": "example.com/slow", "effect": "PreferNoSchedule"}]},
        {"name": "h100", "instanceType": "p5.48xlarge", "count": 0, "gpus": 8}]
    # vision lists its flavors against the stack's order: the order is the stack's.
    values["access"] = {"teams": [
        {"name": "vision", "quota": {"cpu": "64", "flavors": [
            {"name": "h100", "gpus": 16}, {"name": "a10g", "gpus": 8, "borrowGpus": 4}]}},
        {"name": "nlp", "quota": {"gpus": 4}}]}
    if flavor_order:
        values["access"]["flavorOrder"] = flavor_order
    return values


def on_prem_values() -> dict:
    values = bare_metal_config(workers=2)
    values["access"] = {"teams": [
        {"name": "vision", "quota": {"memory": "64Gi", "flavors": [{"name": "on-prem",
                                                                     "gpus": 8}]}}]}
    return values


def by_name(plan, kind: str) -> dict[str, dict]:
    return {name: obj for (_, name), obj in namespaced(plan, kind).items()}


def pool_node_labels(plan, pool: str) -> dict[str, str]:
    """The labels a pool's node registers with (its RKE2 agent's config.yaml node-label)."""
    return rke2_registered_node(plan, pool)["labels"]


def kueue_pod_annotations(plan) -> dict:
    [chart] = [r for r in plan.resources if r.type == "kubernetes:helm.sh/v4:Chart"
               and r.name.endswith("-kueue-chart")]
    return chart.inputs["values"]["controllerManager"]["manager"].get("podAnnotations", {})


def gpu_group(cluster: dict) -> dict:
    [group] = [g for g in cluster["spec"]["resourceGroups"] if g["coveredResources"] == [GPU]]
    return group


def check_references(plan) -> None:
    """Every flavor a ClusterQueue names is a ResourceFlavor of the plan, every admission
    check an AdmissionCheck, whose parameters name a ProvisioningRequestConfig of the plan:
    Kueue holds a ClusterQueue inactive otherwise (v0.19.2 pkg/cache/scheduler/
    clusterqueue.go:250-262, missingFlavors, missingAdmissionChecks)."""
    flavors, checks = by_name(plan, "ResourceFlavor"), by_name(plan, "AdmissionCheck")
    configs = by_name(plan, "ProvisioningRequestConfig")
    for cluster in by_name(plan, "ClusterQueue").values():
        for group in cluster["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                assert flavor["name"] in flavors
        strategy = cluster["spec"].get("admissionChecksStrategy", {"admissionChecks": []})
        for rule in strategy["admissionChecks"]:
            assert rule["name"] in checks
            listed = {f["name"] for g in cluster["spec"]["resourceGroups"] for f in g["flavors"]}
            assert set(rule["onFlavors"]) <= listed
    for check in checks.values():
        parameters = check["spec"]["parameters"]
        assert (parameters["apiGroup"], parameters["kind"]) == (
            "kueue.x-k8s.io", "ProvisioningRequestConfig")
        assert parameters["name"] in configs


def test_pools_are_flavors_tried_in_the_stack_s_order_and_wait_for_their_nodes():
    plan = shared_preview(cloud_values())
    check_references(plan)
    flavors = by_name(plan, "ResourceFlavor")
    # No on-prem flavor: a cloud stack has no hosts that run workloads.
    assert set(flavors) == {DEFAULT_FLAVOR, "a10g", "h100"}
    for pool in ("a10g", "h100"):
        labels = flavors[pool]["spec"]["nodeLabels"]
        assert labels == {POOL_LABEL: pool}
        # It selects that pool's nodes and no other's.
        assert selector_matches({"matchLabels": labels}, pool_node_labels(plan, pool))
        other = "h100" if pool == "a10g" else "a10g"
        assert not selector_matches({"matchLabels": labels}, pool_node_labels(plan, other))
    # The pool's NoSchedule taint is tolerated by what is admitted there; PreferNoSchedule
    # needs nothing.
    assert flavors["a10g"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
         "effect": "NoSchedule"}]
    assert "tolerations" not in flavors["h100"]["spec"]
    clusters = by_name(plan, "ClusterQueue")
    vision = clusters["vision"]["spec"]
    # The stack's order (pools in config order), not the team's list's.
    assert gpu_group(clusters["vision"])["flavors"] == [
        {"name": "a10g", "resources": [{"name": GPU, "nominalQuota": "8",
                                        "borrowingLimit": "4"}]},
        {"name": "h100", "resources": [{"name": GPU, "nominalQuota": "16",
                                        "borrowingLimit": "0"}]}]
    # CPU stays one figure on the flavor that selects no nodes.
    assert vision["resourceGroups"][0] == {"coveredResources": ["cpu"], "flavors": [
        {"name": DEFAULT_FLAVOR, "resources": [
            {"name": "cpu", "nominalQuota": "64", "borrowingLimit": "0"}]}]}
    assert vision["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch",
                                           "whenCanPreempt": "TryNextFlavor"}
    assert vision["admissionChecksStrategy"] == {"admissionChecks": [
        {"name": PROVISIONING_CHECK, "onFlavors": ["a10g", "h100"]}]}
    # A team without per-flavor GPUs keeps its one flavor, no check.
    assert [f["name"] for g in clusters["nlp"]["spec"]["resourceGroups"]
            for f in g["flavors"]] == [DEFAULT_FLAVOR]
    assert "admissionChecksStrategy" not in clusters["nlp"]["spec"]
    [check] = by_name(plan, "AdmissionCheck").values()
    assert check["spec"]["controllerName"] == PROVISIONING_CONTROLLER
    [config] = by_name(plan, "ProvisioningRequestConfig").values()
    assert config["spec"] == {"provisioningClassName": PROVISIONING_CLASS,
                              "managedResources": [GPU]}
    # Kueue's manager restarts to set up its provisioning controller (components/addons/
    # kueue.py PROVISIONING_ANNOTATION).
    assert kueue_pod_annotations(plan) == {PROVISIONING_ANNOTATION: "enabled"}


def test_a_cluster_queue_waits_for_the_objects_it_names():
    plan = shared_preview(cloud_values())
    urns = {r.inputs["metadata"]["name"]: r.urn for r in plan.resources
            if r.type.endswith((":ResourceFlavor", ":AdmissionCheck"))}
    for record in plan.resources:
        if record.type.endswith(":ClusterQueue"):
            spec = record.inputs["spec"]
            named = {f["name"] for g in spec["resourceGroups"] for f in g["flavors"]} | {
                r["name"] for r in spec.get("admissionChecksStrategy", {}).get(
                    "admissionChecks", [])}
            assert {urns[name] for name in named} <= set(record.dependencies), record.name


def test_the_resource_quota_caps_the_namespace_at_what_kueue_may_admit():
    plan = shared_preview(cloud_values())
    hard = namespaced(plan, "ResourceQuota")[("vision", "team-quota")]["spec"]["hard"]
    ceiling = sum(int(r["nominalQuota"]) + int(r["borrowingLimit"])
                  for f in gpu_group(by_name(plan, "ClusterQueue")["vision"])["flavors"]
                  for r in f["resources"])
    assert hard["requests.nvidia.com/gpu"] == str(ceiling) == "28"
    assert hard["requests.cpu"] == "64"


def test_flavor_order_puts_a_pool_first():
    plan = shared_preview(cloud_values(flavor_order=["h100", "a10g"]))
    check_references(plan)
    assert [f["name"] for f in gpu_group(by_name(plan, "ClusterQueue")["vision"])["flavors"]
            ] == ["h100", "a10g"]


def test_on_prem_hosts_are_one_flavor_that_selects_their_nodes():
    plan = shared_preview(on_prem_values())
    check_references(plan)
    flavors = by_name(plan, "ResourceFlavor")
    assert set(flavors) == {DEFAULT_FLAVOR, "on-prem"}
    assert flavors["on-prem"]["spec"] == {"nodeLabels": {CAPACITY_LABEL: "on-prem"}}
    patches = [r.inputs for r in plan.of_type("kubernetes:core/v1:NodePatch")]
    # Every worker's node, and no other (the controller runs no workloads).
    assert sorted(p["metadata"]["name"] for p in patches) == ["gpu000", "gpu001"]
    for patch in patches:
        assert selector_matches({"matchLabels": flavors["on-prem"]["spec"]["nodeLabels"]},
                                patch["metadata"]["labels"])
    cluster = by_name(plan, "ClusterQueue")["vision"]
    assert gpu_group(cluster)["flavors"] == [{"name": "on-prem", "resources": [
        {"name": GPU, "nominalQuota": "8", "borrowingLimit": "0"}]}]
    # On-prem nodes are there already: nothing to wait for.
    assert "admissionChecksStrategy" not in cluster["spec"]
    assert not of_kind(plan, "AdmissionCheck") and not of_kind(plan, "ProvisioningRequestConfig")
    assert kueue_pod_annotations(plan) == {}
