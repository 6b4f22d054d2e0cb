"""GPUs researchers can request: the `nvidia` RuntimeClass and the NVIDIA device plugin,
only on GPU nodes, with optional time-slicing and MIG strategy."""

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.common import kube
from config import versions
from config.image_pins import chart_tag
from config.hosts import Host, Taint, WorkerPool
from config.model import GpuSettings

NAMESPACE = "kube-system"
FEATURE_DISCOVERY_NAMESPACE = "gpu-feature-discovery"
RUNTIME_CLASS = "nvidia"
# Set on every GPU host by the bootstrap; what the plugin and RuntimeClass select on.
GPU_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}
# The plugin hands a container its GPUs as /dev/null mounts under the toolkit's
# DEVICE_LIST_MOUNT_ROOT, which only the kubelet (for the plugin) makes, instead of as
# NVIDIA_VISIBLE_DEVICES, which any pod can set (k8s-device-plugin v0.20.0 README,
# "DEVICE_LIST_STRATEGY"; the toolkit honours them with accept-nvidia-visible-devices-as-
# volume-mounts, and ignores the variable of unprivileged containers: install-nvidia.sh).
DEVICE_LIST_STRATEGY = "volume-mounts"
# nvidia-container-toolkit v1.19.1 internal/config/image/cuda_image.go:34.
DEVICE_LIST_MOUNT_ROOT = "/var/run/nvidia-container-devices"


@dataclass(frozen=True, kw_only=True)
class GpuSupportArgs:
    gpu: GpuSettings
    # The taints of the nodes with GPUs (gpu_node_taints), which the plugin tolerates.
    gpu_node_taints: Sequence[Taint]
    # tuning.cpuManagerPolicy of the hosts.
    cpu_manager_policy: str
    # The add-ons' provider: registered once every node is registered and labelled.
    provider: k8s.Provider
    # Set when the distribution installs its own `nvidia` RuntimeClass: the resource after
    # which it exists. The program then patches that object's scheduling (patch_runtime_class)
    # instead of creating it.
    distribution_runtime_class: Optional[pulumi.Resource] = None


class GpuSupport(pulumi.ComponentResource):
    def __init__(self, name: str, args: GpuSupportArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:addons:GpuSupport", name, None, opts)
        opts = kube.k8s_provider_opts(args.provider, self)
        runtime_class, *rest = gpu_manifests(args.gpu, args.gpu_node_taints,
                                             args.cpu_manager_policy)
        self.runtime_class = (
            kube.apply(runtime_class, opts) if args.distribution_runtime_class is None
            else patch_runtime_class(runtime_class, args.distribution_runtime_class, opts))
        # Pods naming a RuntimeClass that does not exist yet are refused at admission.
        self.resources = [self.runtime_class, *kube.apply_all(rest, pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=[self.runtime_class])))]
        if args.gpu.feature_discovery:
            self.resources.append(self._create_feature_discovery(name, args, opts))
        self.register_outputs({})

    def _create_feature_discovery(self, name: str, args: GpuSupportArgs,
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
            values=feature_discovery_values(args.gpu, args.gpu_node_taints),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace])),
        )


def patch_runtime_class(manifest: dict, exists_after: pulumi.Resource,
                        opts: pulumi.ResourceOptions) -> k8s.node.v1.RuntimeClassPatch:
    """The distribution's RuntimeClass with the program's scheduling, once `exists_after`
    says it exists. The handler stays the distribution's (immutable, and the same: the
    runtime it adds to containerd). The name and the old type as an alias: a stack whose
    state holds the RuntimeClass the program once created (before the distribution's
    chart, which then adopted it) updates that resource in place, since a Patch resource
    is replaced only for a new name or namespace (pulumi-kubernetes provider/pkg/provider/
    provider.go Diff, forceNewFields); without the alias the engine would delete it, the
    distribution's object by then. retain_on_delete: removing the patch or destroying the
    stack leaves the distribution's object alone; Pulumi honours it from the state
    (pulumi/pulumi pkg/resource/deploy/step.go DeleteStep.Apply), and pulumi-kubernetes
    refuses to delete a Patch that co-owns a required field (handler) unless it is set
    (provider.go Delete, "currently managing a required field")."""
    metadata = manifest["metadata"]
    return k8s.node.v1.RuntimeClassPatch(
        f"{manifest['kind'].lower()}-{metadata['name']}",
        metadata={"name": metadata["name"]},
        scheduling=manifest["scheduling"],
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
            depends_on=[exists_after], retain_on_delete=True,
            aliases=[pulumi.Alias(type_="kubernetes:node.k8s.io/v1:RuntimeClass")])))


def gpu_node_taints(nodes: Iterable["Host | WorkerPool"]) -> tuple[Taint, ...]:
    """The taints of the hosts and pools that have GPUs, in their order."""
    return tuple(taint for node in nodes if node.gpus for taint in node.taints)


def gpu_tolerations(taints: Sequence[Taint]) -> list[dict]:
    """Tolerate the GPU nodes' taints (and the usual nvidia.com/gpu one)."""
    seen = {("nvidia.com/gpu", "NoSchedule")}
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for taint in taints:
        if (taint.key, taint.effect) not in seen:
            seen.add((taint.key, taint.effect))
            tolerations.append({"key": taint.key, "operator": "Exists", "effect": taint.effect})
    return tolerations


def feature_discovery_values(gpu: GpuSettings, taints: Sequence[Taint]) -> dict:
    """Chart values: GFD and node-feature-discovery only, scheduled like our plugin."""
    return {
        "devicePlugin": {"enabled": False},
        "gfd": {"enabled": True},
        # The chart's image is the device plugin's (GFD is a mode of it), by our pin.
        "image": {"repository": versions.NVIDIA_DEVICE_PLUGIN_REPOSITORY,
                  "tag": chart_tag(versions.NVIDIA_DEVICE_PLUGIN_IMAGE,
                                   versions.NVIDIA_DEVICE_PLUGIN_REPOSITORY)},
        "migStrategy": gpu.mig_strategy,
        # With it the chart gives GFD CAP_SYS_ADMIN, which the toolkit needs to honour
        # its NVIDIA_VISIBLE_DEVICES=all (chart templates/_helpers.tpl, requiresCapSysAdmin).
        "deviceListStrategy": DEVICE_LIST_STRATEGY,
        "runtimeClassName": RUNTIME_CLASS,
        "nodeSelector": GPU_NODE_SELECTOR,
        "tolerations": gpu_tolerations(taints),
        "nfd": {"worker": {"tolerations": gpu_tolerations(taints)}},
    }


def device_plugin_config(gpu: GpuSettings) -> str:
    """The device plugin's config file (its v1 config API)."""
    config: dict = {"version": "v1", "flags": {
        "migStrategy": gpu.mig_strategy,
        "plugin": {"deviceListStrategy": DEVICE_LIST_STRATEGY}}}
    replicas = gpu.time_slicing_replicas
    if replicas > 1:
        config["sharing"] = {"timeSlicing": {
            "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}
    return yaml.safe_dump(config, sort_keys=False)


def plugin_env(gpu: GpuSettings, cpu_manager_policy: str) -> list[dict]:
    env = {
        "CONFIG_FILE": "/config/config.yaml",
        # The nvidia runtime mounts the driver into the plugin's own container.
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
    }
    if gpu.mig_strategy != "none":
        env["NVIDIA_MIG_MONITOR_DEVICES"] = "all"
    if cpu_manager_policy == "static":
        # With the static CPU manager the kubelet re-applies cgroups; the plugin must
        # pass device specs or containers lose their GPUs.
        env["PASS_DEVICE_SPECS"] = "true"
    return [{"name": name, "value": value} for name, value in env.items()]


def plugin_security_context(gpu: GpuSettings, cpu_manager_policy: str) -> dict:
    """The least privilege the plugin works with, as the upstream chart chooses it: with
    the volume-mounts strategy, CAP_SYS_ADMIN (chart templates/_helpers.tpl,
    requiresCapSysAdmin), the toolkit's mark of a privileged container, whose
    NVIDIA_VISIBLE_DEVICES=all it still honours (toolkit v1.19.1 internal/config/image/
    privileged.go:36). MIG's own need for it is covered with it."""
    if cpu_manager_policy == "static":
        return {"privileged": True}
    return {"capabilities": {"add": ["SYS_ADMIN"]}}


def gpu_manifests(gpu: GpuSettings, taints: Sequence[Taint],
                  cpu_manager_policy: str) -> list[dict]:
    config = device_plugin_config(gpu)
    labels = {"app.kubernetes.io/name": "nvidia-device-plugin"}
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": RUNTIME_CLASS},
        # The containerd runtime the bootstrap adds on GPU hosts.
        "handler": "nvidia",
        # Pods asking for this runtime can only run on GPU nodes. No tolerations: the
        # RuntimeClass admission would add them to every pod naming it, GPUs requested
        # or not (kubernetes.io/docs/concepts/containers/runtime-class, "Scheduling");
        # a GPU pod tolerates the GPU nodes' taints itself.
        "scheduling": {"nodeSelector": GPU_NODE_SELECTOR},
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
                    "tolerations": gpu_tolerations(taints),
                    "priorityClassName": "system-node-critical",
                    # The plugin talks to the driver through the NVIDIA runtime.
                    "runtimeClassName": RUNTIME_CLASS,
                    "containers": [{
                        "name": "nvidia-device-plugin",
                        "image": versions.NVIDIA_DEVICE_PLUGIN_IMAGE,
                        "command": ["nvidia-device-plugin"],
                        "env": plugin_env(gpu, cpu_manager_policy),
                        "securityContext": plugin_security_context(gpu, cpu_manager_policy),
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

