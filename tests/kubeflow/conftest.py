"""The Kubeflow stages built once per test run: the kustomize builds take most of these
tests' time, and every test only reads them."""

import pytest
import yaml

from components.addons.kubeflow import catalog
from components.addons.kubeflow import sources
from tests.kubeflow.overlays import PIPELINES, kubectl, settings, stages_of, build, write


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> dict[str, tuple[dict, list[dict], list[dict]]]:
    """stage -> (its kustomization, the built objects, upstream's objects unpatched)."""
    kubectl()
    root = tmp_path_factory.mktemp("kubeflow")
    kubeflow = settings()
    result = {}
    for stage in stages_of(kubeflow):
        kustomization = write(kubeflow, stage, root / stage.name)
        plain = root / f"{stage.name}-upstream"
        plain.mkdir()
        (plain / "kustomization.yaml").write_text(yaml.safe_dump({
            "resources": [sources.base_reference(kubeflow, p, plain) for p in stage.paths]}))
        result[stage.name] = (kustomization, build(root / stage.name), build(plain))
    return result


@pytest.fixture(scope="session")
def built_plain(tmp_path_factory) -> dict[str, tuple[dict, list[dict], list[dict]]]:
    """The stages tls changes, built with `kubeflow.access.tls.mode: off`."""
    kubectl()
    root = tmp_path_factory.mktemp("kubeflow-plain")
    kubeflow = settings(access={"tls": {"mode": "off"}})
    names = (catalog.ISTIO.name, catalog.AUTH.name, catalog.KUBEFLOW_BASE.name, catalog.APPS)
    result = {}
    for stage in stages_of(kubeflow):
        if stage.name in names:
            kustomization = write(kubeflow, stage, root / stage.name)
            result[stage.name] = (kustomization, build(root / stage.name), [])
    return result


@pytest.fixture(scope="session")
def pipelines_built(tmp_path_factory) -> tuple[dict, list[dict], list[dict]]:
    """Pipelines' folder built with the program's overlay, from the vendored release with
    its Argo Workflows bases (vendored too)."""
    kubectl()
    root = tmp_path_factory.mktemp("kubeflow-pipelines")
    kubeflow = settings(components=["pipelines"],
                        pipelines={"mysql": {"startupTimeoutSeconds": 1200,
                                             "storageClass": "nfs"}})
    [stage] = [s for s in catalog.stages_for(kubeflow) if s.name == catalog.APPS]
    assert stage.paths == (PIPELINES,)
    kustomization = write(kubeflow, stage, root / "apps")
    plain = root / "apps-upstream"
    plain.mkdir()
    (plain / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": [sources.base_reference(kubeflow, PIPELINES, plain)]}))
    return kustomization, build(root / "apps"), build(plain)
