"""Kueue against its pinned release, the chart the program installs (vendor/kueue-v0.19.2):
the chart through the official `helm template` with the program's values, the teams' queue
objects against the schemas of the CRDs it installs, and the manager configuration against
upstream's default."""

import functools
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator
from jsonschema.validators import validator_for

from components.access.queues import queue_objects, stack_flavors
from components.addons.kueue import (FRAMEWORKS, NAMESPACE, PROVISIONING_ANNOTATION,
                                     chart_values, manager_configuration)
from config import load, versions
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.acceptance.test_validation import closed
from tests.builders import PROJECT_DIR, as_cli_config, bare_metal_config, cloud_config
from tests.upstream.kueue_cel import RULES, schema_rules, violations
from tests.upstream.test_pinned_upstream import by_kind, helm

CHART = PROJECT_DIR / versions.KUEUE_CHART
# The changes manager_configuration() makes to upstream's default (its docstring).
CHANGED_KEYS = {"integrations", "manageJobsWithoutQueueName", "resources"}


@functools.cache
def rendered_chart(provisioning: bool = False) -> tuple:
    with tempfile.TemporaryDirectory() as folder:
        values = Path(folder) / "values.yaml"
        values.write_text(yaml.safe_dump(chart_values(provisioning)))
        out = subprocess.run([str(helm()), "template", "kueue", str(CHART), "-n", NAMESPACE,
                              "-f", str(values)], capture_output=True, text=True,
                             check=True).stdout
    return tuple(o for o in yaml.safe_load_all(out) if o)


def crd(kind: str) -> dict:
    """The CustomResourceDefinition the chart installs for `kind`."""
    name = f"{kind.lower()}s.kueue.x-k8s.io"
    [definition] = [o for o in rendered_chart() if o["kind"] == "CustomResourceDefinition"
                    and o["metadata"]["name"] == name]
    return definition


def python_patterns(schema):
    """The schema with its RE2 patterns as Python reads them: RE2 takes a flag group after
    `^` (AdmissionCheck's parameters.kind, `^(?i)[a-z]...`), Python only at the start, where
    it means the same."""
    if isinstance(schema, dict):
        return {key: (value.replace("^(?i)", "(?i)^", 1) if key == "pattern"
                      and isinstance(value, str) and value.startswith("^(?i)")
                      else python_patterns(value)) for key, value in schema.items()}
    if isinstance(schema, list):
        return [python_patterns(item) for item in schema]
    return schema


def served_schema(definition: dict, version: str) -> dict:
    [served] = [v for v in definition["spec"]["versions"] if v["name"] == version]
    return served["schema"]["openAPIV3Schema"]


def validator(definition: dict, version: str):
    [served] = [v for v in definition["spec"]["versions"] if v["name"] == version]
    assert served["served"] and not served.get("deprecated")
    schema = closed(python_patterns(served["schema"]["openAPIV3Schema"]))
    cls = validator_for(schema, default=Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


def stacks_objects() -> list[dict]:
    """The queue objects of every example stack, of teams with a part of a quota or none, and
    of teams with per-flavor GPUs on a bare-metal and a cloud stack (tolerations, the
    provisioning check)."""
    settings = []
    for stack in EXAMPLE_STACKS:
        stack_file = read_stack(PROJECT_DIR, stack)
        settings.append(load(stack_file.config, stack_file.secret_keys, stack=stack))
    values = bare_metal_config(workers=1)
    values["access"] = {"teams": [{"name": "a"}, {"name": "b", "quota": {"cpu": "500m"}},
                                  {"name": "c", "quota": {"gpus": 0, "memory": "1.5Gi"}},
                                  {"name": "d", "quota": {"gpus": 4, "borrowGpus": 2}},
                                  {"name": "e", "quota": {"memory": "1Gi", "flavors": [
                                      {"name": "on-prem", "gpus": 4, "borrowGpus": 1}]}}]}
    cloud = cloud_config()
    # A pool's flavor needs cluster-autoscaler, which runs with RKE2 (config/queues.py).
    cloud["kubernetes"] = {"distribution": "rke2"}
    cloud["pools"].append({"name": "spot", "instanceType": "g5.12xlarge", "count": 0,
                           "gpus": 4, "taints": [
                               {"key": "example.com/spot", "value": "", "effect": "NoExecute"},
                               {"key": "nvidia.com/gpu", "value": "present",
                                "effect": "NoSchedule"}]})
    cloud["access"] = {"teams": [{"name": "f", "quota": {"cpu": "8", "flavors": [
        {"name": "gpu", "gpus": 4}, {"name": "spot", "gpus": 8, "borrowGpus": 8}]}}]}
    for stack_values in (values, cloud):
        cli = as_cli_config(stack_values)
        settings.append(load(cli.config, cli.secret_keys, stack="test"))
    return [obj for stack in settings for obj in queue_objects(
        stack.access.teams, stack_flavors(stack.hosts, stack.pools, stack.access.flavor_order))]


def test_queue_objects_satisfy_the_pinned_crd_schemas():
    objects = stacks_objects()
    assert {o["kind"] for o in objects} == {"ResourceFlavor", "ClusterQueue", "LocalQueue",
                                            "AdmissionCheck", "ProvisioningRequestConfig"}
    for obj in objects:
        definition = crd(obj["kind"])
        group, _, version = obj["apiVersion"].partition("/")
        assert group == definition["spec"]["group"]
        assert definition["spec"]["names"]["kind"] == obj["kind"]
        assert ("namespace" in obj["metadata"]) == (definition["spec"]["scope"] == "Namespaced")
        errors = sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                        for e in validator(definition, version).iter_errors(obj))
        assert not errors, (obj["metadata"], errors)
        # The CRD's CEL rules, which jsonschema cannot run (tests/upstream/kueue_cel.py).
        broken = violations(obj["kind"], obj, schema_rules(served_schema(definition, version)))
        assert not broken, (obj["metadata"], broken)


def test_every_cel_rule_of_the_queues_crds_is_read():
    kinds = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck",
             "ProvisioningRequestConfig")
    found = {(kind, path, rule) for kind in kinds
             for path, rule in schema_rules(served_schema(crd(kind), "v1beta2"))}
    assert found == set(RULES)


def test_a_misspelt_field_fails_the_schema():
    # The closed schema catches what the API server would silently prune.
    objects = stacks_objects()
    [cluster] = [o for o in objects if o["kind"] == "ClusterQueue"][:1]
    cluster["spec"]["cohort"] = cluster["spec"].pop("cohortName")
    assert list(validator(crd("ClusterQueue"), "v1beta2").iter_errors(cluster))
    [check] = [o for o in objects if o["kind"] == "AdmissionCheck"]
    check["spec"]["controller"] = check["spec"].pop("controllerName")
    assert list(validator(crd("AdmissionCheck"), "v1beta2").iter_errors(check))
    [flavor] = [o for o in objects if o["kind"] == "ResourceFlavor"
                and "tolerations" in o["spec"]][:1]
    # An operator the schema allows and a CEL rule refuses.
    flavor["spec"]["tolerations"][0]["operator"] = "Equals"
    assert not list(validator(crd("ResourceFlavor"), "v1beta2").iter_errors(flavor))
    assert violations("ResourceFlavor", flavor, schema_rules(
        served_schema(crd("ResourceFlavor"), "v1beta2")))
    [team] = [o for o in objects if o["kind"] == "ClusterQueue" and len(
        o["spec"]["resourceGroups"]) == 2][:1]
    team["spec"]["resourceGroups"][1]["coveredResources"].append("cpu")
    assert violations("ClusterQueue", team, schema_rules(
        served_schema(crd("ClusterQueue"), "v1beta2")))


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    return list(rendered_chart())


def test_the_chart_is_the_pinned_release():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (versions.KUEUE_CHART_VERSION,
                                                       versions.KUEUE)


def test_the_chart_runs_the_release_image_with_the_program_s_configuration(rendered):
    [deployment] = by_kind(rendered, "Deployment")
    [manager] = [c for c in deployment["spec"]["template"]["spec"]["containers"]
                 if c["name"] == "manager"]
    assert manager["image"] == f"{versions.KUEUE_IMAGE_REPOSITORY}:{versions.KUEUE}"
    [config_map] = [o for o in by_kind(rendered, "ConfigMap")
                    if o["metadata"]["name"] == "kueue-manager-config"]
    mounted = {v["configMap"]["name"] for v in deployment["spec"]["template"]["spec"]["volumes"]
               if "configMap" in v}
    assert config_map["metadata"]["name"] in mounted
    config = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    # The chart adds its own internal certificate management; the rest is ours, unchanged.
    assert config.pop("internalCertManagement")["enable"] is True
    assert config == manager_configuration()
    assert config["integrations"]["frameworks"] == list(FRAMEWORKS)


def test_the_configuration_is_upstream_s_default_but_for_the_documented_changes():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    upstream = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    ours = manager_configuration()
    assert set(ours) - set(upstream) <= CHANGED_KEYS
    assert {k: v for k, v in ours.items() if k not in CHANGED_KEYS} == {
        k: v for k, v in upstream.items() if k not in CHANGED_KEYS}
    # Jobs and MPIJobs are among upstream's own integrations.
    assert set(FRAMEWORKS) <= set(upstream["integrations"]["frameworks"])
    assert upstream.get("manageJobsWithoutQueueName", False) is False


def test_team_users_roles_reach_their_queues_and_workloads(rendered):
    # Upstream's viewer roles aggregate into view/edit/admin (docs/teams.md, "Fair sharing (Kueue)").
    roles = {o["metadata"]["name"]: o for o in by_kind(rendered, "ClusterRole")}
    for name, resource in (("kueue-localqueue-viewer-role", "localqueues"),
                           ("kueue-workload-viewer-role", "workloads")):
        labels = roles[name]["metadata"]["labels"]
        for role in ("view", "edit", "admin"):
            assert labels[f"rbac.authorization.k8s.io/aggregate-to-{role}"] == "true"
        assert {"get", "list", "watch"} <= set(roles[name]["rules"][0]["verbs"])
        assert roles[name]["rules"][0]["resources"] == [resource]


def test_the_manager_restarts_when_queues_first_wait_for_provisioning(rendered):
    """Kueue sets its ProvisioningRequest controller up only at start (cmd/kueue/main.go:
    513-526 at v0.19.2): the annotation rolls the manager's pods when a queue first uses it."""
    def pod_annotations(objects) -> dict:
        [deployment] = by_kind(objects, "Deployment")
        return deployment["spec"]["template"]["metadata"].get("annotations") or {}

    assert PROVISIONING_ANNOTATION not in pod_annotations(rendered)
    assert pod_annotations(rendered_chart(provisioning=True))[PROVISIONING_ANNOTATION] == "enabled"


def test_the_manager_may_make_provisioning_requests_and_their_pod_templates(rendered):
    """What the provisioning admission check does in a team's namespace: a ProvisioningRequest
    naming PodTemplates of the workload's pods (provisioning_request.md, "Capacity
    Guarantee"), with the chart's own ClusterRole for the manager."""
    bound = {b["roleRef"]["name"] for b in by_kind(rendered, "ClusterRoleBinding")
             if any(s["kind"] == "ServiceAccount" and s["name"] == "kueue-controller-manager"
                    for s in b["subjects"])}
    rules = [rule for role in by_kind(rendered, "ClusterRole")
             if role["metadata"]["name"] in bound for rule in role.get("rules", [])]

    def allowed(group: str, resource: str) -> set:
        return {verb for rule in rules if group in rule.get("apiGroups", [])
                and resource in rule.get("resources", []) for verb in rule["verbs"]}

    assert {"create", "get", "list", "watch", "delete"} <= allowed(
        "autoscaling.x-k8s.io", "provisioningrequests")
    assert "get" in allowed("autoscaling.x-k8s.io", "provisioningrequests/status")
    assert {"create", "get", "list", "watch", "delete"} <= allowed("", "podtemplates")
