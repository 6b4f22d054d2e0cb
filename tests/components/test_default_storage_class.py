"""Which backend is the default StorageClass is one rule (StorageSettings.default_backends).
Every place that acts on it must agree with it, for every combination of backends and
`default` flags: the config checks, Kubeflow's check, the StorageClass annotations, the
stack's defaultStorageClass output and the preview's storage summary."""

import itertools

import pytest

from components.addons.shared_storage import DEFAULT_CLASS_ANNOTATION, storage_manifests
from config.storage import STORAGE_CLASS_NAMES
from config.problems import ConfigError
from preview.plan import Plan, ResourceRecord
from preview.report import _storage_summary
from tests.config.loading import loads
from tests.builders import bare_metal_config

BACKENDS = {"nfs": {"server": "192.0.2.20"}, "efs": {"mountTargetAddress": "10.0.1.10"},
            "localPath": {}}
FLAGS = (None, True, False)
KUBEFLOW_PROBLEM = "needs the stack's default StorageClass"


def expected_default(storage: dict) -> list[str]:
    """The rule as the config reference (docs/config-reference.md) states it, written out
    here on its own: the only backend is the default unless it says `default: false`; of
    several, the one with `default: true`."""
    if len(storage) == 1:
        return [name for name, backend in storage.items() if backend.get("default") is not False]
    return [name for name, backend in storage.items() if backend.get("default") is True]


def storage_cases() -> list[dict]:
    cases = []
    for size in range(1, len(BACKENDS) + 1):
        for names in itertools.combinations(BACKENDS, size):
            for flags in itertools.product(FLAGS, repeat=size):
                cases.append({name: {**BACKENDS[name],
                                     **({"default": flag} if flag is not None else {})}
                              for name, flag in zip(names, flags)})
    return cases


def case_id(storage: dict) -> str:
    return ",".join(f"{name}={backend.get('default')}" for name, backend in storage.items())


def config_with(storage: dict) -> dict:
    values = bare_metal_config(workers=1)
    values["storage"] = storage
    values["kubeflow"] = {"user": {"email": "ada@example.com"}}
    values["kubeflowPassword"] = "a long test passphrase"
    return values


def summary_defaults(manifests: list[dict]) -> list[str]:
    """The classes the preview's storage summary calls the default."""
    classes = [m for m in manifests if m["kind"] == "StorageClass"]
    plan = Plan("gpu-cluster", "test", resources=[
        ResourceRecord(urn=f"urn:{c['metadata']['name']}", name=c["metadata"]["name"],
                       type="kubernetes:storage.k8s.io/v1:StorageClass", parent="",
                       custom=True, dependencies=[], inputs=c) for c in classes])
    return [line.split()[1].rstrip(":") for line in _storage_summary(plan)
            if "(default:" in line]


@pytest.mark.parametrize("storage", storage_cases(), ids=case_id)
def test_every_consumer_of_the_default_storage_class_agrees_with_the_rule(storage):
    expected = expected_default(storage)
    values = config_with(storage)
    if len(expected) != 1:
        with pytest.raises(ConfigError) as caught:
            loads(values)
        problems = [str(p) for p in caught.value.problems]
        assert any(p.startswith("gpu-cluster:storage") and "default" in p
                   for p in problems), problems
        assert any(p.startswith("gpu-cluster:kubeflow:") and KUBEFLOW_PROBLEM in p
                   for p in problems), problems
        return
    settings = loads(values)
    [backend] = expected
    assert settings.storage.default_backends == expected
    assert settings.storage.default_class == STORAGE_CLASS_NAMES[backend]
    manifests = storage_manifests(settings.storage, nfs_server="192.0.2.20")
    annotated = {m["metadata"]["name"]: m["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION]
                 for m in manifests if m["kind"] == "StorageClass"}
    assert annotated == {STORAGE_CLASS_NAMES[name]: "true" if name == backend else "false"
                         for name in storage}
    assert summary_defaults(manifests) == [STORAGE_CLASS_NAMES[backend]]


def test_the_annotation_is_the_one_kubernetes_reads():
    # kubernetes pkg/apis/storage/util/helpers.go: IsDefaultStorageClassAnnotation.
    assert DEFAULT_CLASS_ANNOTATION == "storageclass.kubernetes.io/is-default-class"
