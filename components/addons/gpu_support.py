"""GPUs researchers can request: the `nvidia` RuntimeClass and the NVIDIA device plugin,
only on GPU nodes, with optional time-slicing and MIG strategy."""

import hashlib
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.common import kube
from config import versions
from config.model import StackConfig

NAMESPACE = "kube-system"
FEATURE_DISCOVERY_NAMESPACE = "gpu-feature-discovery"
RUNTIME_CLASS = "nvidia"
# Set on every GPU host by the bootstrap; what the plugin and RuntimeClass select on.
GPU_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}


@dataclass
class GpuSupportArgs:
    settings: StackConfig
    provider: k8s.Provider
    # Nodes must be registered (and labelled) first.
    depends_on: list


class GpuSupport(pulumi.ComponentResource):
    def __init__(self, name: str, args: GpuSupportArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:addons:GpuSupport", name, None, opts)
        opts = kube.k8s_provider_opts(args.provider, self, args.depends_on)
        self.resources = kube.apply_all(gpu_manifests(args.settings), opts)
        if args.settings.gpu.feature_discovery:
            self.resources.append(self._create_feature_discovery(name, args.settings, opts))
        self.register_outputs({})

    def _create_feature_discovery(self, name: str, settings: StackConfig,
                                  opts: pulumi.ResourceOptions) -> k8s.helm.v4.Chart:
        namespace = kube.apply({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": FEATURE_DISCOVERY_NAMESPACE}}, opts)
        return k8s.helm.v4.Chart(
            f"{name}-feature-discovery",
            chart=versions.NVIDIA_DEVICE_PLUGIN_CHART,
            version=versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION,
            repository_opts=k8s.helm.v4.RepositoryOptsArgs(
                repo=versions.NVIDIA_DEVICE_PLUGIN_CHART_REPO),
            namespace=FEATURE_DISCOVERY_NAMESPACE,
            values=feature_discovery_values(settings),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace])),
        )


def gpu_tolerations(settings: StackConfig) -> list[dict]:
    """Tolerate the taints of every GPU host and pool (and the usual nvidia.com/gpu one)."""
    seen = {("nvidia.com/gpu", "NoSchedule")}
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for node in [*settings.hosts, *settings.pools]:
        if not node.gpus:
            continue
        for taint in node.taints:
            if (taint.key, taint.effect) not in seen:
                seen.add((taint.key, taint.effect))
                tolerations.append({"key": taint.key, "operator": "Exists", "effect": taint.effect})
    return tolerations


def feature_discovery_values(settings: StackConfig) -> dict:
    """Chart values: GFD and node-feature-discovery only, scheduled like our plugin."""
    return {
        "devicePlugin": {"enabled": False},
        "gfd": {"enabled": True},
        "migStrategy": settings.gpu.mig_strategy,
        "runtimeClassName": RUNTIME_CLASS,
        "nodeSelector": GPU_NODE_SELECTOR,
        "tolerations": gpu_tolerations(settings),
        "nfd": {"worker": {"tolerations": gpu_tolerations(settings)}},
    }


def device_plugin_config(settings: StackConfig) -> str:
    """The device plugin's config file (its v1 config API)."""
    config: dict = {"version": "v1", "flags": {"migStrategy": settings.gpu.mig_strategy}}
    replicas = settings.gpu.time_slicing_replicas
    if replicas > 1:
        config["sharing"] = {"timeSlicing": {
            "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}
    return yaml.safe_dump(config, sort_keys=False)


def plugin_env(settings: StackConfig) -> list[dict]:
    env = {
        "CONFIG_FILE": "/config/config.yaml",
        # The nvidia runtime mounts the driver into the plugin's own container.
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
    }
    if settings.gpu.mig_strategy != "none":
        env["NVIDIA_MIG_MONITOR_DEVICES"] = "all"
    if _cpu_manager_static(settings):
        # With the static CPU manager the kubelet re-applies cgroups; the plugin must
        # pass device specs or containers lose their GPUs.
        env["PASS_DEVICE_SPECS"] = "true"
    return [{"name": name, "value": value} for name, value in env.items()]


def plugin_security_context(settings: StackConfig) -> dict:
    """The least privilege the plugin works with, as the upstream chart chooses it."""
    if _cpu_manager_static(settings):
        return {"privileged": True}
    if settings.gpu.mig_strategy != "none":
        return {"capabilities": {"add": ["SYS_ADMIN"]}}
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _cpu_manager_static(settings: StackConfig) -> bool:
    return settings.tuning.cpu_manager_policy == "static"


def gpu_manifests(settings: StackConfig) -> list[dict]:
    config = device_plugin_config(settings)
    labels = {"app.kubernetes.io/name": "nvidia-device-plugin"}
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": RUNTIME_CLASS},
        # The containerd runtime the bootstrap adds on GPU hosts.
        "handler": "nvidia",
        # Pods asking for this runtime can only run on GPU nodes.
        "scheduling": {"nodeSelector": GPU_NODE_SELECTOR,
                       "tolerations": gpu_tolerations(settings)},
    }
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "nvidia-device-plugin-config", "namespace": NAMESPACE},
        "data": {"config.yaml": config},
    }
    daemon_set = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {
                    "labels": labels,
                    # Rolls the plugin when its config changes.
                    "annotations": {"gpu-cluster/config-sha256":
                                    hashlib.sha256(config.encode()).hexdigest()},
                },
                "spec": {
                    "nodeSelector": GPU_NODE_SELECTOR,
                    "tolerations": gpu_tolerations(settings),
                    "priorityClassName": "system-node-critical",
                    # The plugin talks to the driver through the NVIDIA runtime.
                    "runtimeClassName": RUNTIME_CLASS,
                    "containers": [{
                        "name": "nvidia-device-plugin",
                        "image": versions.NVIDIA_DEVICE_PLUGIN_IMAGE,
                        "command": ["nvidia-device-plugin"],
                        "env": plugin_env(settings),
                        "securityContext": plugin_security_context(settings),
                        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"},
                                      "limits": {"memory": "256Mi"}},
                        "volumeMounts": [
                            # Every distribution runs the kubelet with this root
                            # (components/distributions: kubelet_root_dir).
                            {"name": "device-plugins", "mountPath": "/var/lib/kubelet/device-plugins"},
                            {"name": "config", "mountPath": "/config", "readOnly": True},
                        ],
                    }],
                    "volumes": [
                        {"name": "device-plugins",
                         "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"}},
                        {"name": "config", "configMap": {"name": "nvidia-device-plugin-config"}},
                    ],
                },
            },
        },
    }
    return [runtime_class, config_map, daemon_set]

