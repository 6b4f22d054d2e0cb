"""The monitoring add-on's Kubernetes objects, rendered here from pinned images (no chart
is fetched at `pulumi up`): NVIDIA's DCGM exporter on the GPU nodes (kube-system, beside
the device plugin: it needs a hostPath), and in `monitoring.namespace`, held to the
restricted Pod Security Standard, kube-state-metrics, Prometheus and Grafana."""

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import yaml

from components.addons.gpu_support import (DEVICE_LIST_MOUNT_ROOT, GPU_NODE_SELECTOR,
                                           RUNTIME_CLASS, gpu_tolerations)
from components.addons.monitoring.control_plane import metrics_reader
from components.addons.monitoring.rules import (
    DCGM_JOB,
    KUBE_STATE_METRICS_JOB,
    RULES_FILE,
    XID_WINDOW_MINUTES,
)
from config import versions
from config.hosts import Taint
from config.monitoring import MonitoringSettings
from contract.names import POOL_LABEL

COUNTERS = Path(__file__).with_name("dcgm-counters.csv")
EXPORTER_NAMESPACE = "kube-system"
DCGM_PORT, KSM_PORT, PROMETHEUS_PORT, GRAFANA_PORT = 9400, 8080, 9090, 3000
GRAFANA_SECRET = "grafana-admin"
GRAFANA_SERVICE = "grafana"
PROMETHEUS_CONFIG = "prometheus.yml"
# What the restricted Pod Security Standard asks of every container
# (kubernetes.io/docs/concepts/security/pod-security-standards/#restricted).
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
              "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
# The images' own user: kube-state-metrics' and Prometheus' run as nobody.
NOBODY = 65534


def pod_security(user: int, owns_volumes: bool = False) -> dict:
    """A pod's securityContext: as `user` and its group, never root, RuntimeDefault seccomp;
    `owns_volumes`: the volumes it writes are given that group (fsGroup)."""
    return {"runAsUser": user, "runAsGroup": user, **({"fsGroup": user} if owns_volumes else {}),
            "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def _read_only_container(user: int) -> dict:
    """A container's securityContext: restricted, as `user`, its root file system read-only."""
    return {**RESTRICTED, "readOnlyRootFilesystem": True, "runAsUser": user}


def _labels(name: str) -> dict:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "gpu-cluster-monitoring"}


def _selector(name: str) -> dict:
    return {"app.kubernetes.io/name": name}


def _checksum(*texts: str) -> dict:
    # Rolls the pods when their configuration changes.
    return {"gpu-cluster/config-sha256": hashlib.sha256("".join(texts).encode()).hexdigest()}


def _meta(name: str, namespace: str) -> dict:
    return {"name": name, "namespace": namespace, "labels": _labels(name)}


def _service_account(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace)}


def _pod_reader(name: str, namespace: str, account_namespace: str) -> list[dict]:
    """Prometheus lists the pods of `namespace` to find its targets."""
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": _meta(name, namespace),
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": _meta(name, namespace),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": "prometheus",
                       "namespace": account_namespace}]},
    ]


def dcgm_exporter(taints: Sequence[Taint]) -> list[dict]:
    counters = COUNTERS.read_text()
    name = "dcgm-exporter"
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": _meta(f"{name}-counters", EXPORTER_NAMESPACE),
                  "data": {"counters.csv": counters}}
    container = {
        "name": "exporter",
        "image": versions.DCGM_EXPORTER_IMAGE,
        "args": ["-f", "/etc/dcgm-exporter/counters/counters.csv"],
        "env": [
            # Labels each GPU's series with the pod using it (through the kubelet's
            # pod-resources socket), as the upstream chart does.
            {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
            {"name": "DCGM_EXPORTER_LISTEN", "value": f":{DCGM_PORT}"},
            # The window of DCGM_EXP_XID_ERRORS_COUNT, in ms (dcgm-exporter 4.5.3-4.8.2
            # pkg/cmd/app.go:238-243; its default, set here because the XID alerts resolve
            # by it).
            {"name": "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE",
             "value": str(XID_WINDOW_MINUTES * 60 * 1000)},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
        "ports": [{"name": "metrics", "containerPort": DCGM_PORT}],
        # Root for the kubelet's root-owned pod-resources socket; no capabilities: the
        # profiling fields that need CAP_SYS_ADMIN are not collected (dcgm-exporter
        # deployment/values.yaml, securityContext and its note on running without them).
        "securityContext": {"runAsNonRoot": False, "runAsUser": 0,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"memory": "512Mi"}},
        "volumeMounts": [
            {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources",
             "readOnly": True},
            {"name": "counters", "mountPath": "/etc/dcgm-exporter/counters", "readOnly": True},
            # Every GPU and the driver (NVML), asked of the nvidia runtime as the device
            # plugin asks: the host's /dev/null at <root>/all (toolkit v1.19.1 internal/
            # config/image/cuda_image.go:358-387). The toolkit ignores NVIDIA_VISIBLE_DEVICES
            # of a container without CAP_SYS_ADMIN (install-nvidia.sh), and this one has none.
            {"name": "gpu-request", "mountPath": f"{DEVICE_LIST_MOUNT_ROOT}/all",
             "readOnly": True},
        ],
        # The chart's probes: DCGM takes its time to start.
        "livenessProbe": {"httpGet": {"path": "/health", "port": DCGM_PORT},
                          "initialDelaySeconds": 45, "periodSeconds": 5},
        "readinessProbe": {"httpGet": {"path": "/health", "port": DCGM_PORT},
                           "initialDelaySeconds": 45},
    }
    daemon_set = {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": _meta(name, EXPORTER_NAMESPACE),
        "spec": {
            "selector": {"matchLabels": _selector(name)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": _labels(name), "annotations": _checksum(counters)},
                "spec": {
                    # Only nodes with GPUs, like the device plugin.
                    "nodeSelector": GPU_NODE_SELECTOR,
                    "tolerations": gpu_tolerations(taints),
                    "runtimeClassName": RUNTIME_CLASS,
                    "priorityClassName": "system-node-critical",
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        # Every distribution runs the kubelet with this root
                        # (components/distributions: kubelet_root_dir).
                        {"name": "pod-resources", "hostPath": {
                            "path": "/var/lib/kubelet/pod-resources", "type": "Directory"}},
                        {"name": "counters", "configMap": {"name": f"{name}-counters"}},
                        {"name": "gpu-request", "hostPath": {"path": "/dev/null",
                                                             "type": "CharDevice"}},
                    ],
                },
            },
        },
    }
    return [config_map, daemon_set]


def kube_state_metrics(namespace: str) -> list[dict]:
    name = "kube-state-metrics"
    return [
        _service_account(name, namespace),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": f"gpu-cluster-{name}", "labels": _labels(name)},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"gpu-cluster-{name}", "labels": _labels(name)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": f"gpu-cluster-{name}"},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, namespace),
         "spec": {
             "replicas": 1,
             "selector": {"matchLabels": _selector(name)},
             "template": {"metadata": {"labels": _labels(name)}, "spec": {
                 "serviceAccountName": name,
                 "securityContext": pod_security(NOBODY),
                 "containers": [{
                     "name": name,
                     "image": versions.KUBE_STATE_METRICS_IMAGE,
                     # Nodes only (allocatable GPUs), with the pool label on kube_node_labels.
                     "args": ["--resources=nodes", f"--port={KSM_PORT}",
                              f"--metric-labels-allowlist=nodes=[{POOL_LABEL}]"],
                     "ports": [{"name": "metrics", "containerPort": KSM_PORT}],
                     "securityContext": _read_only_container(NOBODY),
                     "resources": {"requests": {"cpu": "10m", "memory": "64Mi"},
                                   "limits": {"memory": "256Mi"}},
                     "livenessProbe": {"httpGet": {"path": "/livez", "port": KSM_PORT}},
                     "readinessProbe": {"httpGet": {"path": "/readyz", "port": KSM_PORT}},
                 }],
             }},
         }},
    ]


def _pod_job(job: str, namespace: str, app: str, relabel_node: bool) -> dict:
    """Scrape the `metrics` port of the pods labelled app.kubernetes.io/name=<app>."""
    relabel = [
        {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name",
                           "__meta_kubernetes_pod_container_port_name"],
         "regex": f"{app};metrics", "action": "keep"},
    ]
    if relabel_node:
        relabel.append({"source_labels": ["__meta_kubernetes_pod_node_name"],
                        "target_label": "node"})
    return {"job_name": job,
            "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
            "relabel_configs": relabel}


def prometheus_config(monitoring: MonitoringSettings, rules_dir: str = "/etc/prometheus",
                      apiservers: Optional[dict] = None) -> dict:
    """`apiservers`: the controllers' scrape job (control_plane.apiserver_job)."""
    return {
        "global": {"scrape_interval": monitoring.scrape_interval,
                   "evaluation_interval": monitoring.scrape_interval},
        "rule_files": [f"{rules_dir}/{RULES_FILE}"],
        "scrape_configs": [
            # The exporter already labels each series with the GPU's pod (namespace, pod,
            # container); the target gets only the node.
            _pod_job(DCGM_JOB, EXPORTER_NAMESPACE, "dcgm-exporter", relabel_node=True),
            _pod_job(KUBE_STATE_METRICS_JOB, monitoring.namespace, "kube-state-metrics",
                     relabel_node=False),
            *([apiservers] if apiservers else []),
        ],
    }


def prometheus(monitoring: MonitoringSettings, rules: dict, storage_class: str,
               apiservers: Optional[dict] = None) -> list[dict]:
    namespace, name = monitoring.namespace, "prometheus"
    config = yaml.safe_dump(prometheus_config(monitoring, apiservers=apiservers),
                            sort_keys=False)
    rules_text = yaml.safe_dump(rules, sort_keys=False)
    return [
        _service_account(name, namespace),
        *_pod_reader(f"{name}-targets", EXPORTER_NAMESPACE, namespace),
        *_pod_reader(f"{name}-targets", namespace, namespace),
        *(metrics_reader(name, namespace, _labels(name)) if apiservers else []),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, namespace),
         "data": {PROMETHEUS_CONFIG: config, RULES_FILE: rules_text}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(name, namespace),
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                  "resources": {"requests": {"storage": monitoring.storage_size}}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, namespace),
         "spec": {
             "replicas": 1,
             # One writer of the volume: the old pod goes before the new one starts.
             "strategy": {"type": "Recreate"},
             "selector": {"matchLabels": _selector(name)},
             "template": {
                 "metadata": {"labels": _labels(name),
                              "annotations": _checksum(config, rules_text)},
                 "spec": {
                     "serviceAccountName": name,
                     "securityContext": pod_security(NOBODY, owns_volumes=True),
                     "containers": [{
                         "name": name,
                         "image": versions.PROMETHEUS_IMAGE,
                         "args": [f"--config.file=/etc/prometheus/{PROMETHEUS_CONFIG}",
                                  "--storage.tsdb.path=/prometheus",
                                  f"--storage.tsdb.retention.time={monitoring.retention}"],
                         "ports": [{"name": "web", "containerPort": PROMETHEUS_PORT}],
                         "securityContext": _read_only_container(NOBODY),
                         "resources": {"requests": {"cpu": "100m", "memory": "512Mi"},
                                       "limits": {"memory": "2Gi"}},
                         "readinessProbe": {"httpGet": {"path": "/-/ready",
                                                        "port": PROMETHEUS_PORT}},
                         "livenessProbe": {"httpGet": {"path": "/-/healthy",
                                                       "port": PROMETHEUS_PORT}},
                         "volumeMounts": [
                             {"name": "config", "mountPath": "/etc/prometheus",
                              "readOnly": True},
                             {"name": "data", "mountPath": "/prometheus"},
                         ],
                     }],
                     "volumes": [
                         {"name": "config", "configMap": {"name": name}},
                         {"name": "data", "persistentVolumeClaim": {"claimName": name}},
                     ],
                 },
             },
         }},
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, namespace),
         "spec": {"selector": _selector(name),
                  "ports": [{"name": "web", "port": PROMETHEUS_PORT, "targetPort": "web"}]}},
    ]
