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

from components.access.queues import queue_objects
from components.addons.kueue import FRAMEWORKS, NAMESPACE, chart_values, manager_configuration
from config import load, versions
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.acceptance.test_validation import closed
from tests.builders import PROJECT_DIR, as_cli_config, bare_metal_config
from tests.upstream.test_pinned_upstream import by_kind, helm

CHART = PROJECT_DIR / versions.KUEUE_CHART
# The changes manager_configuration() makes to upstream's default (its docstring).
CHANGED_KEYS = {"integrations", "manageJobsWithoutQueueName", "resources"}


@functools.cache
def rendered_chart() -> tuple:
    with tempfile.TemporaryDirectory() as folder:
        values = Path(folder) / "values.yaml"
        values.write_text(yaml.safe_dump(chart_values()))
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


def validator(definition: dict, version: str):
    [served] = [v for v in definition["spec"]["versions"] if v["name"] == version]
    assert served["served"] and not served.get("deprecated")
    schema = closed(served["schema"]["openAPIV3Schema"])
    cls = validator_for(schema, default=Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


def stacks_teams() -> list:
    """Every example stack's teams, and teams with a part of a quota or none."""
    teams = []
    for stack in EXAMPLE_STACKS:
        stack_file = read_stack(PROJECT_DIR, stack)
        teams += load(stack_file.config, stack_file.secret_keys, stack=stack).access.teams
    values = bare_metal_config(workers=1)
    values["access"] = {"teams": [{"name": "a"}, {"name": "b", "quota": {"cpu": "500m"}},
                                  {"name": "c", "quota": {"gpus": 0, "memory": "1.5Gi"}},
                                  {"name": "d", "quota": {"gpus": 4, "borrowGpus": 2}}]}
    cli = as_cli_config(values)
    return teams + load(cli.config, cli.secret_keys, stack="test").access.teams


def test_queue_objects_satisfy_the_pinned_crd_schemas():
    objects = queue_objects(stacks_teams())
    assert {o["kind"] for o in objects} == {"ResourceFlavor", "ClusterQueue", "LocalQueue"}
    for obj in objects:
        definition = crd(obj["kind"])
        group, _, version = obj["apiVersion"].partition("/")
        assert group == definition["spec"]["group"]
        assert definition["spec"]["names"]["kind"] == obj["kind"]
        assert ("namespace" in obj["metadata"]) == (definition["spec"]["scope"] == "Namespaced")
        errors = sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                        for e in validator(definition, version).iter_errors(obj))
        assert not errors, (obj["metadata"], errors)
        # The CRD's CEL rule jsonschema cannot run: borrowingLimit needs a cohort.
        if obj["kind"] == "ClusterQueue":
            assert obj["spec"]["cohortName"]


def test_a_misspelt_field_fails_the_schema():
    # The closed schema catches what the API server would silently prune.
    [_, cluster, _] = queue_objects(stacks_teams()[:1])
    cluster["spec"]["cohort"] = cluster["spec"].pop("cohortName")
    assert list(validator(crd("ClusterQueue"), "v1beta2").iter_errors(cluster))


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
