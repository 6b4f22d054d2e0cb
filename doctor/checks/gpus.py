"""GPUs: each GPU node advertises the GPUs the stack gives it; the device plugin can reach
the driver."""

import re

from contract.names import POOL_LABEL
from doctor.checks import Context, name_of, namespaced
from doctor.findings import Finding, ok, problem, unchecked

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
# The program's own DaemonSet (components/addons/gpu_support.py) and the GPU Operator's.
PLUGIN_LABELS = (("app.kubernetes.io/name", "nvidia-device-plugin"),
                 ("app", "nvidia-device-plugin-daemonset"))
# What the plugin logs when it cannot use the driver, e.g. "Failed to initialize NVML: could
# not load NVML library" or "... ERROR_UNKNOWN" (NVIDIA/k8s-device-plugin issues #47, #221,
# #303), and the driver/library mismatch after a driver upgrade without a reboot.
# klog's line header ("E1123 05:41:02.121577       1 factory.go:112] "), left out of messages.
KLOG_HEADER = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.-]+:\d+\] ")
NVML_ERROR = re.compile(r"failed to initialize nvml|could not load nvml library|"
                        r"nvml[^\n]*(?:error|mismatch)", re.IGNORECASE)


def is_device_plugin(pod: dict) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return (any(labels.get(key) == value for key, value in PLUGIN_LABELS)
            or name_of(pod).startswith("nvidia-device-plugin"))


def wanted_logs(pods: list[dict]) -> list[tuple]:
    """The device plugin's containers' logs, and the previous run's where one restarted
    (with failOnInitError the plugin exits on the error, so the message is in that run)."""
    keys = []
    for pod in filter(is_device_plugin, pods):
        metadata = pod["metadata"]
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            keys.append((metadata["namespace"], metadata["name"], status["name"], False))
            if status.get("restartCount", 0) > 0:
                keys.append((metadata["namespace"], metadata["name"], status["name"], True))
    return keys


def _gpu_nodes(context: Context) -> list[tuple[dict, int, str]]:
    """(node, GPUs expected, where the number comes from) of each GPU node in the API."""
    found = []
    for node in context.snapshot.items("nodes") or []:
        expected = context.stack.node(name_of(node))
        pool = context.stack.pool((node["metadata"].get("labels") or {}).get(POOL_LABEL, ""))
        if expected is not None and expected.gpus:
            found.append((node, expected.gpus, f"hosts[{expected.name}].gpus"))
        elif expected is None and pool is not None and pool.gpus:
            found.append((node, pool.gpus, f"pool {pool.name}'s gpus"))
    return found


def allocatable(context: Context) -> list[Finding]:
    """nvidia.com/gpu allocatable on each GPU node, at least the configured count (time
    slicing advertises more)."""
    check = "gpu-allocatable"
    findings = context.missing(check, "nodes")
    for node, gpus, source in _gpu_nodes(context):
        name = name_of(node)
        subject = f"node {name}"
        resources = (node.get("status") or {}).get("allocatable") or {}
        mig = sorted(key for key in resources if key.startswith(MIG_PREFIX))
        if GPU not in resources:
            if mig:
                findings.append(ok(check, subject, f"MIG devices advertised ({', '.join(mig)})"))
                continue
            findings.append(problem(
                check, subject, f"no {GPU} allocatable ({source} is {gpus})",
                f"the device plugin is not running on {name} or cannot see the GPUs: see the "
                f"gpu-device-plugin finding for its pod, and run nvidia-smi on {name}."))
            continue
        count = int(resources[GPU])
        if count < gpus:
            findings.append(problem(
                check, subject, f"{count} {GPU} allocatable, {source} is {gpus}",
                f"GPUs are missing on {name}: compare nvidia-smi there (a GPU fallen off the "
                f"bus, Xid errors in dmesg) and restart the device plugin pod once they are back."))
        else:
            findings.append(ok(check, subject, f"{count} {GPU} allocatable"))
    return findings


def device_plugin_nvml(context: Context) -> list[Finding]:
    """No NVML errors in the device plugin's recent logs; one plugin per GPU node."""
    check = "gpu-device-plugin"
    pods, findings = context.listed(check, "pods")
    if findings:
        return findings
    snapshot = context.snapshot
    plugins = [pod for pod in pods if is_device_plugin(pod)]
    on_nodes = {(pod.get("spec") or {}).get("nodeName") for pod in plugins}
    for node, _, _ in _gpu_nodes(context):
        if name_of(node) not in on_nodes:
            findings.append(problem(
                check, f"node {name_of(node)}", "no device plugin pod runs on this GPU node",
                "check the nvidia-device-plugin DaemonSet in kube-system (its node selector "
                "nvidia.com/gpu.present=true and the node's taints)."))
    for pod in plugins:
        subject, node = f"pod {namespaced(pod)}", (pod.get("spec") or {}).get("nodeName", "?")
        keys = [key for key in wanted_logs([pod])]
        errors = [KLOG_HEADER.sub("", line.strip()) for key in keys
                  for line in snapshot.logs.get(key, "").splitlines() if NVML_ERROR.search(line)]
        # The plugin's own words first ("Failed to initialize NVML: ..."), then the rest.
        errors.sort(key=lambda line: "failed to initialize nvml" not in line.lower())
        unread = [snapshot.log_errors[key] for key in keys if key in snapshot.log_errors]
        if errors:
            findings.append(problem(
                check, subject, f"on node {node}: {errors[0][:240]}",
                f"the plugin cannot use the driver on {node}: check that nvidia-smi works there "
                "(reboot after a driver upgrade), that the pod runs with the nvidia runtime "
                "class, then delete the pod to restart it."))
        elif unread and len(unread) == len(keys):
            findings.append(unchecked(check, subject, f"cannot read its log: {unread[0]}"))
        else:
            findings.append(ok(check, subject, f"on node {node}: no NVML errors in its log"))
    return findings


