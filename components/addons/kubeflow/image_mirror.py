"""Kubeflow's images from a mirror (kubeflow.imageMirror): each image name a stage's
folders run (catalog.IMAGES) rewritten to the mirror, and the pull policy set on every
container through a replacement read from the stage's install record."""

from components.addons.kubeflow import catalog
from config.kubeflow import ImageMirror, KubeflowSettings


def split_registry(name: str) -> tuple[str, str]:
    """('docker.io', 'library/mysql') for 'mysql': the registry host and the path."""
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "docker.io", name if rest else f"library/{name}"


def mirrored_name(name: str, mirror: ImageMirror) -> str:
    host, path = split_registry(name)
    prefix = mirror.registries.get(host)
    return f"{prefix}/{path}" if prefix else f"{mirror.registry}/{host}/{path}"


_WORKLOAD_POD_PATHS = {"Deployment": "spec.template.spec", "StatefulSet": "spec.template.spec",
                       "DaemonSet": "spec.template.spec", "Job": "spec.template.spec"}
RECORD_NAMESPACE = "kube-system"


def install_record(kubeflow: KubeflowSettings, stage: catalog.Stage) -> dict:
    """What a stage was built from, readable in the cluster; with a mirror, also the
    source of the pull-policy replacement below."""
    mirror = kubeflow.image_mirror
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"gpu-cluster-kubeflow-{stage.name}",
                         "namespace": RECORD_NAMESPACE},
            "data": {"stage": stage.name, "manifestsRef": kubeflow.source.ref,
                     "imageMirror": mirror.registry, "imagePullPolicy": mirror.pull_policy}}


def pull_policy_replacements(stage: catalog.Stage) -> list[dict]:
    """imagePullPolicy on every container of every workload (a wildcard replacement can
    create the field; a patch would need each container's name)."""
    source = {"kind": "ConfigMap", "name": f"gpu-cluster-kubeflow-{stage.name}",
              "namespace": RECORD_NAMESPACE, "fieldPath": "data.imagePullPolicy"}
    return [{"source": source, "targets": [
        {"select": {"kind": kind}, "fieldPaths": [f"{pod}.containers.*.imagePullPolicy"],
         "options": {"create": True}}
        for kind, pod in _WORKLOAD_POD_PATHS.items()]}]
