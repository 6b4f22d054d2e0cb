"""What the program leaves to GPU hosts themselves (nvidia.installDriver/installToolkit and
the hosts' own answers), and the GPU nodes' taints GPU pods do not tolerate by themselves:
the preview's warnings about them."""

from collections.abc import Sequence

from config.hosts import Host, WorkerPool
from config.model import NvidiaSettings


def runtime_warnings(hosts: Sequence[Host], nvidia: NvidiaSettings) -> list[str]:
    """GPU hosts that get no container toolkit and no containerd `nvidia` runtime from the
    program: the device plugin's and the DCGM exporter's pods (runtimeClassName: nvidia)
    start there only if the host has both. Named by the key that changes it."""
    by_key: dict[str, list[str]] = {}
    for index, host in enumerate(hosts):
        if host.gpus and not nvidia.for_host(host)[1]:
            key = (f"hosts[{index}] ({host.name}).installToolkit"
                   if host.install_toolkit is not None else "nvidia.installToolkit")
            by_key.setdefault(key, []).append(host.name)
    return [f"gpu-cluster:{key} is false: the program installs no NVIDIA Container Toolkit and "
            f"no containerd `nvidia` runtime on {', '.join(names)}; the device plugin's and the "
            "DCGM exporter's pods (runtimeClassName: nvidia) start there only if the host has "
            "both; set it to true unless it does"
            for key, names in by_key.items()]


# What the API server's ExtendedResourceToleration plugin gives a pod that requests
# nvidia.com/gpu (components/distributions/base.py GPU_TOLERATION_PLUGIN).
GPU_POD_TOLERATION = ("nvidia.com/gpu", "NoSchedule")
UNTOLERATED_TAINT_WARNING = (
    "{key} ({taint}): pods that request nvidia.com/gpu are given the toleration "
    "nvidia.com/gpu:NoSchedule only (ExtendedResourceToleration); they stay off this GPU "
    "node unless they tolerate this taint themselves. Taint GPU nodes "
    "nvidia.com/gpu=<value>:NoSchedule")


def untolerated_taint_warnings(hosts: Sequence[Host], pools: Sequence[WorkerPool]) -> list[str]:
    """The GPU nodes' NoSchedule and NoExecute taints a GPU pod does not tolerate by itself,
    by key (hosts by name)."""
    warnings = []
    for section, nodes in (("hosts", hosts), ("pools", pools)):
        for index, node in enumerate(nodes):
            for number, taint in enumerate(node.taints if node.gpus else ()):
                if taint.effect != "PreferNoSchedule" \
                        and (taint.key, taint.effect) != GPU_POD_TOLERATION:
                    text = f"{taint.key}={taint.value}:{taint.effect}" if taint.value \
                        else f"{taint.key}:{taint.effect}"
                    warnings.append(UNTOLERATED_TAINT_WARNING.format(
                        key=f"{section}[{index}] ({node.name}).taints[{number}]", taint=text))
    return warnings
