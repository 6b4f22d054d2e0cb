"""Kubeflow's images with the cluster's image mirror (images.mirror, or the deprecated
kubeflow.imageMirror read as it): names stay upstream's, since every node's containerd
pulls them through the mirror (components/distributions/registry_mirror.py); the pull
policy is set on every container through a replacement read from the stage's install
record."""

from components.addons.kubeflow import catalog
from config.images import ImageMirror as ClusterMirror
from config.kubeflow import ImageMirror, KubeflowSettings


def with_cluster_mirror(kubeflow: KubeflowSettings,
                        mirror: "ClusterMirror | None") -> KubeflowSettings:
    """The Kubeflow settings the stages are built with: the cluster's mirror in place of
    kubeflow.imageMirror (its registry for the install record, its pull policy)."""
    if mirror is None:
        return kubeflow
    return kubeflow.model_copy(update={"image_mirror": ImageMirror(
        registry=mirror.registry, registries=mirror.registries, pull_policy=mirror.pull_policy)})


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
