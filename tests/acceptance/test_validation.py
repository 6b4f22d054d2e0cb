"""Acceptance workloads against the real schemas: Kubernetes objects through
kubernetes-validate (strict) for the stack's Kubernetes version, the MPIJob against the pinned
MPI operator CRD."""

import copy
import re
import subprocess

import pytest
import yaml
from jsonschema import Draft7Validator
from jsonschema.validators import validator_for

from acceptance import dump, render
from tests.acceptance.cases import CASES, MPI_CASES, objects_of_kind, settings_of
from tests.builders import PROJECT_DIR, require_tool

MPI_OPERATOR_FIXTURE = PROJECT_DIR.parent / "shared/fixtures/upstream/mpi-operator-v0.8.0"
MPIJOB_CRD = MPI_OPERATOR_FIXTURE / "manifests" / "base" / "kubeflow.org_mpijobs.yaml"


def schema_version(k0s_version: str) -> str:
    """The kubernetes-validate schema set for a k0s release: v1.36.3+k0s.2 -> 1.36.0."""
    match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+\+k0s\.\d+", k0s_version)
    assert match, k0s_version
    return f"{match[1]}.{match[2]}.0"


@pytest.mark.parametrize("k0s_version, expected", [
    ("v1.36.3+k0s.2", "1.36.0"),
    ("v1.35.0+k0s.0", "1.35.0"),
    ("v1.37.12+k0s.1", "1.37.0"),
])
def test_schema_version_is_the_minor_release_of_the_k0s_version(k0s_version, expected):
    assert schema_version(k0s_version) == expected


def pod_templates(mpijob: dict) -> list[dict]:
    """The MPIJob's pod templates as PodTemplate objects, so Kubernetes' own schema checks them
    (the CRD embeds the operator's copy of the PodSpec schema)."""
    return [{"apiVersion": "v1", "kind": "PodTemplate",
             "metadata": {"name": f"{mpijob['metadata']['name']}-{role.lower()}",
                          "namespace": mpijob["metadata"]["namespace"]},
             "template": replica["template"]}
            for role, replica in mpijob["spec"]["mpiReplicaSpecs"].items()]


@pytest.mark.parametrize("name", CASES)
def test_kubernetes_objects_pass_kubernetes_validate_strict(name, tmp_path):
    validate = require_tool("kubernetes-validate")
    settings = settings_of(CASES[name])
    checked_files, checked = [], 0
    for file, objects in render(settings).items():
        # The file as users get it, and the objects Kubernetes' schemas cover.
        (tmp_path / file).write_text(dump(objects))
        kubernetes_objects = [obj for obj in objects if obj["kind"] != "MPIJob"]
        for mpijob in objects_of_kind(objects, "MPIJob"):
            kubernetes_objects += pod_templates(mpijob)
        path = tmp_path / f"kubernetes-{file}"
        path.write_text(yaml.safe_dump_all(kubernetes_objects))
        checked_files.append(str(path))
        checked += len(kubernetes_objects)
    version = schema_version(settings.kubernetes.version)
    result = subprocess.run([validate, "--strict", "-k", version, *checked_files],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # Every object was checked, none skipped.
    assert result.stdout.count(" passed for resource ") == checked, result.stdout


def closed(schema):
    """A copy of an OpenAPI schema that rejects fields it does not list, so a misspelt field
    fails instead of being pruned by the API server."""
    if not isinstance(schema, dict):
        return schema
    result = dict(schema)
    if "properties" in schema:
        result["properties"] = {key: closed(value) for key, value in schema["properties"].items()}
        if ("additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            result["additionalProperties"] = False
    if isinstance(schema.get("additionalProperties"), dict):
        result["additionalProperties"] = closed(schema["additionalProperties"])
    if isinstance(schema.get("items"), dict):
        result["items"] = closed(schema["items"])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            result[key] = [closed(branch) for branch in schema[key]]
    if "not" in schema:
        result["not"] = closed(schema["not"])
    return result


@pytest.fixture(scope="module")
def mpijob_crd() -> dict:
    if not MPIJOB_CRD.exists():
        pytest.skip(f"{MPIJOB_CRD} is absent: it is manifests/base/kubeflow.org_mpijobs.yaml of "
                    "kubeflow/mpi-operator tag v0.8.0, kept unmodified under "
                    "../shared/fixtures/upstream/mpi-operator-v0.8.0/ beside the project "
                    "(see ../shared/fixtures/README.md)")
    return yaml.safe_load(MPIJOB_CRD.read_text())


@pytest.fixture(scope="module")
def mpijob_validator(mpijob_crd):
    (version,) = [v for v in mpijob_crd["spec"]["versions"] if v["name"] == "v2beta1"]
    schema = closed(version["schema"]["openAPIV3Schema"])
    cls = validator_for(schema, default=Draft7Validator)
    cls.check_schema(schema)
    return cls(schema)


def lab_mpijob() -> dict:
    objects = render(settings_of(CASES["lab"]))["mpijob-benchmark.yaml"]
    (mpijob,) = objects_of_kind(objects, "MPIJob")
    return mpijob


def errors_of(validator, instance) -> list[str]:
    return sorted(f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
                  for error in validator.iter_errors(instance))


def test_the_closed_schema_still_allows_free_form_maps(mpijob_validator):
    # labels, resources and the like are maps with any keys; closing must leave them open.
    schema = mpijob_validator.schema
    template = schema["properties"]["spec"]["properties"]["mpiReplicaSpecs"][
        "additionalProperties"]["properties"]["template"]
    labels = template["properties"]["metadata"]["properties"]["labels"]
    assert labels["additionalProperties"] == {"type": "string"}
    assert template["additionalProperties"] is False


@pytest.mark.parametrize("name", MPI_CASES)
def test_mpijob_satisfies_the_pinned_crd_schema(name, mpijob_crd, mpijob_validator):
    (mpijob,) = objects_of_kind(render(settings_of(CASES[name]))["mpijob-benchmark.yaml"],
                                "MPIJob")
    group, kind = mpijob_crd["spec"]["group"], mpijob_crd["spec"]["names"]["kind"]
    assert (mpijob["apiVersion"], mpijob["kind"]) == (f"{group}/v2beta1", kind)
    assert mpijob_crd["spec"]["scope"] == "Namespaced" and mpijob["metadata"]["namespace"]
    assert errors_of(mpijob_validator, mpijob) == []


WORKER = ("spec", "mpiReplicaSpecs", "Worker", "template")


@pytest.mark.parametrize("path, value, message", [
    (("spec", "slotPerWorker"), 4, "'slotPerWorker' was unexpected"),
    (("spec", "runPolicy", "cleanupPodPolicy"), "Running", "'cleanupPodPolicy' was unexpected"),
    (WORKER + ("spec", "containers", 0, "imagePullPolice"), "Always",
     "'imagePullPolice' was unexpected"),
    (WORKER + ("spec", "affinity", "podAntiAffinity",
               "requiredDuringSchedulingIgnoredDuringExecution", 0, "topologykey"), "x",
     "'topologykey' was unexpected"),
    (WORKER + ("metadata", "label"), {"a": "b"}, "'label' was unexpected"),
    (("spec", "mpiReplicaSpecs", "Launcher", "replica"), 1, "'replica' was unexpected"),
    (("spec", "slotsPerWorker"), "4", "'4' is not of type 'integer'"),
    (("spec", "mpiImplementation"), "OpenMpi", "is not one of"),
])
def test_the_schema_check_rejects_misspelt_fields_and_wrong_values(mpijob_validator, path,
                                                                    value, message):
    mpijob = copy.deepcopy(lab_mpijob())
    target = mpijob
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    errors = errors_of(mpijob_validator, mpijob)
    assert any(message in error for error in errors), errors
