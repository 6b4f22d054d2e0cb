"""The policy pack's rules on Kubernetes objects: images and upstream manifests pinned,
privileges only for the named system components, the device plugin on GPU nodes only."""

import re
from collections.abc import Mapping
from typing import Any, Optional

from policy.resources import Resource, get, items

# The label the bootstrap sets on every GPU node; the device plugin must require it.
GPU_NODE_LABEL = ("nvidia.com/gpu.present", "true")

# Workloads that may run privileged (or with SYS_ADMIN / the host's PID namespace), by
# namespace and name, with why they need it.
PRIVILEGED_ALLOWED = {
    ("kube-system", "nvidia-device-plugin"): "GPU device plugin: device specs with the static "
                                             "CPU manager, SYS_ADMIN for MIG",
    ("kube-system", "calico-node"): "CNI: programs the host's network",
    ("kube-system", "kube-router"): "CNI: programs the host's network",
    ("nfs-provisioner", "nfs-subdir-external-provisioner"): "NFS provisioner: owns volume folders",
    ("efs-provisioner", "efs-subdir-provisioner"): "NFS provisioner on EFS: owns volume folders",
    # aws-efs-csi-driver v3.4.1 charts/aws-efs-csi-driver/templates/node-daemonset.yaml.
    ("kube-system", "efs-csi-node"): "EFS CSI node plugin: mounts volumes for the kubelet "
                                     "(bidirectional mount propagation)",
}


_KUBERNETES_KIND = re.compile(r"^kubernetes:[^:]+:(?P<kind>\w+)$")
_POD_SPEC_PATHS = {
    "Pod": ("spec",), "PodTemplate": ("template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    **{kind: ("spec", "template", "spec") for kind in (
        "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "ReplicationController", "Job")},
}
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _workload(resource: Resource):
    """(namespace, name, pod spec) of a Kubernetes workload, or None."""
    match = _KUBERNETES_KIND.match(resource.type)
    if not match:
        return None
    path = _POD_SPEC_PATHS.get(match["kind"].removesuffix("Patch"))
    spec = get(resource.props, *path) if path else None
    if not isinstance(spec, Mapping):
        return None
    metadata = resource.props.get("metadata")
    return get(metadata, "namespace"), get(metadata, "name"), spec


def _containers(spec: Mapping) -> list:
    return [c for key in _CONTAINER_LISTS for c in items(spec.get(key)) if isinstance(c, Mapping)]


def image_problem(image: Any) -> Optional[str]:
    """Why an image reference is not pinned to a tag or digest, or None when it is."""
    if not isinstance(image, str):
        return None  # not known until deployment
    if "@sha256:" in image:
        return None
    _, _, tag = image.rpartition("/")[2].partition(":")
    if not tag:
        return "has no tag (it means latest)"
    if tag == "latest":
        return "uses the tag latest"
    return None


def images_pinned(resource: Resource) -> list:
    workload = _workload(resource)
    if workload is None:
        return []
    messages = []
    for container in _containers(workload[2]):
        problem = image_problem(container.get("image"))
        if problem:
            messages.append(f"{resource.name}: container {container.get('name')!r} image "
                            f"{container.get('image')!r} {problem}; pin a version tag or digest")
    return messages


def _privileges(spec: Mapping) -> list:
    found = ["hostPID"] if spec.get("hostPID") is True else []
    for container in _containers(spec):
        context = container.get("securityContext")
        if get(context, "privileged") is True:
            found.append(f"privileged container {container.get('name')!r}")
        added = {str(c).upper().removeprefix("CAP_")
                 for c in items(get(context, "capabilities", "add"))}
        if added & {"SYS_ADMIN", "ALL"}:
            found.append(f"{'/'.join(sorted(added & {'SYS_ADMIN', 'ALL'}))} in container "
                         f"{container.get('name')!r}")
    return found


def privileged_only_for_system_components(resource: Resource) -> list:
    workload = _workload(resource)
    if workload is None:
        return []
    namespace, name, spec = workload
    found = _privileges(spec)
    if not found or (namespace, name) in PRIVILEGED_ALLOWED:
        return []
    allowed = ", ".join(f"{ns}/{n}" for ns, n in PRIVILEGED_ALLOWED)
    return [f"{resource.name}: {', '.join(found)}; only these system components may run "
            f"privileged: {allowed}"]


def _repository(image: str) -> str:
    """`nvcr.io/nvidia/k8s-device-plugin` of `nvcr.io/nvidia/k8s-device-plugin:v0.20.0`."""
    image = image.split("@")[0]
    head, slash, last = image.rpartition("/")
    return head + slash + last.split(":")[0]


def _is_device_plugin(name: Any, spec: Mapping) -> bool:
    repositories = [_repository(str(c.get("image", ""))) for c in _containers(spec)]
    return name == "nvidia-device-plugin" or any(
        repo.rpartition("/")[2] == "k8s-device-plugin" for repo in repositories)


def _requires_gpu_label(spec: Any) -> bool:
    key, value = GPU_NODE_LABEL
    if get(spec, "nodeSelector", key) == value:
        return True
    terms = items(get(spec, "affinity", "nodeAffinity",
                        "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))

    def term_requires(term: Any) -> bool:
        return any(get(e, "key") == key and (
            get(e, "operator") == "Exists" or
            (get(e, "operator") == "In" and items(get(e, "values")) == [value]))
            for e in items(get(term, "matchExpressions")))

    return bool(terms) and all(term_requires(term) for term in terms)


_HELM_CHART = re.compile(r"^kubernetes:helm\.sh/v\d+:(Chart|Release)$")


def device_plugin_only_on_gpu_nodes(resource: Resource) -> list:
    key, value = GPU_NODE_LABEL
    message = (f"{resource.name}: the NVIDIA device plugin must run on GPU nodes only: require "
               f"the node label {key}={value} (nodeSelector or required node affinity)")
    if _HELM_CHART.match(resource.type):
        chart = str(resource.props.get("chart", ""))
        if chart.rsplit("/", 1)[-1] == "nvidia-device-plugin" and \
                not _requires_gpu_label(resource.props.get("values")):
            return [message]
        return []
    workload = _workload(resource)
    if workload is None or not _is_device_plugin(workload[1], workload[2]):
        return []
    return [] if _requires_gpu_label(workload[2]) else [message]


_FLOATING_REFS = {"master", "main", "HEAD", "latest"}
_URL_REF = re.compile(r"[?&]ref=(?P<ref>[^&#]+)")


def _floating(location: str) -> bool:
    if "://" not in location and not location.startswith("github.com/"):
        return False  # a local path is pinned by the repository it lives in
    ref = _URL_REF.search(location)
    segments = set(location.split("?")[0].split("/"))
    return (ref is not None and ref["ref"] in _FLOATING_REFS) or bool(segments & _FLOATING_REFS)


def _in_repository(chart: object, props: dict) -> bool:
    """A chart folder of the project (vendored): pinned by the repository it lives in."""
    options = props.get("repositoryOpts")
    return (isinstance(chart, str) and chart.startswith(("vendor/", "./", "../"))
            and not (isinstance(options, dict) and options.get("repo")))


def upstream_pinned(resource: Resource) -> list:
    """Manifests and charts the Kubernetes provider fetches must be a fixed version."""
    props = resource.props
    if _HELM_CHART.match(resource.type):
        chart = props.get("chart")
        if chart and not props.get("version") and not _in_repository(chart, props):
            return [f"{resource.name}: chart {chart!r} has no version; pin one"]
        return []
    if not resource.type.startswith(("kubernetes:yaml", "kubernetes:kustomize")):
        return []
    locations = [props.get("file"), props.get("directory"), *items(props.get("files"))]
    return [f"{resource.name}: {location!r} follows a moving branch or tag; pin a release"
            for location in locations if isinstance(location, str) and _floating(location)]
