"""Pod Security admission (https://kubernetes.io/docs/concepts/security/pod-security-admission/):
the namespace labels a level is enforced by, and the API server's cluster default, which both
distributions write as an AdmissionConfiguration file (k0s: spec.api.extraArgs
admission-control-config-file; RKE2: pod-security-admission-config-file)."""

import re

import yaml

LEVELS = ("privileged", "baseline", "restricted")
# Every mode gets the same level: enforce refuses, audit records, warn tells the client.
MODES = ("enforce", "audit", "warn")
LABEL_PREFIX = "pod-security.kubernetes.io/"
# The level a namespace without labels gets (the admission configuration's defaults).
CLUSTER_DEFAULT = "restricted"

# Namespaces exempt from the cluster default (the configuration's exemptions.namespaces),
# each because what the cluster itself runs there needs host access. Only these: every
# other namespace the program creates either passes restricted or carries its own label.
SYSTEM_EXEMPTIONS = {
    # The distribution's CNI (Calico, kube-router, Canal), kube-proxy and konnectivity
    # agents (host network, privileged), the NVIDIA device plugin and DCGM exporter
    # (components/addons/gpu_support.py: hostPath to the kubelet's device-plugins folder and
    # the driver), Istio's CNI node agent with Kubeflow (kubeflow/manifests common/istio/
    # istio-install/base/kustomization.yaml: "the istio-cni daemonset should be in kube-system").
    "kube-system": "CNI, kube-proxy, the NVIDIA device plugin and DCGM exporter, Istio's CNI agent",
    # The local-path provisioner's helper pods create and delete volume folders through a
    # hostPath (rancher/local-path-provisioner deploy/local-path-storage.yaml helperPod).
    "local-path-storage": "the local-path provisioner's hostPath helper pods",
    # Node Feature Discovery's worker and GPU Feature Discovery read the host's /sys, /proc
    # and the driver through hostPath (nvidia k8s-device-plugin chart, gpu-feature-discovery).
    "gpu-feature-discovery": "Node Feature Discovery and GPU Feature Discovery read the host",
    # The MPI operator's Deployment sets no securityContext (kubeflow/mpi-operator v0.8.0
    # deploy/v2beta1/mpi-operator.yaml, vendored); its namespace comes with that file.
    "mpi-operator": "the MPI operator's upstream Deployment states no securityContext",
}

_RELEASE = re.compile(r"v(\d+)\.(\d+)\.\d+")


def version_of(kubernetes_version: str) -> str:
    """The policy version pinned to the cluster's minor release (`v1.33.3+k0s.0` ->
    `v1.33`): the checks of the release the cluster runs, not whatever `latest` means
    after an upgrade of the API server alone."""
    match = _RELEASE.match(kubernetes_version)
    if match is None:
        return "latest"
    return f"v{match.group(1)}.{match.group(2)}"


def namespace_labels(level: str, version: str) -> dict[str, str]:
    """The labels of a namespace enforced, audited and warned at `level`."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}")
    labels = {}
    for mode in MODES:
        labels[f"{LABEL_PREFIX}{mode}"] = level
        labels[f"{LABEL_PREFIX}{mode}-version"] = version
    return labels


def admission_configuration(version: str) -> str:
    """The API server's AdmissionConfiguration: PodSecurity's defaults at CLUSTER_DEFAULT
    (kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-admission-controller/,
    pod-security.admission.config.k8s.io/v1 from Kubernetes 1.25)."""
    defaults = {}
    for mode in MODES:
        defaults[mode] = CLUSTER_DEFAULT
        defaults[f"{mode}-version"] = version
    document = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [{
            "name": "PodSecurity",
            "configuration": {
                "apiVersion": "pod-security.admission.config.k8s.io/v1",
                "kind": "PodSecurityConfiguration",
                "defaults": defaults,
                "exemptions": {"usernames": [], "runtimeClasses": [],
                               "namespaces": sorted(SYSTEM_EXEMPTIONS)},
            },
        }],
    }
    return yaml.safe_dump(document, sort_keys=False)
