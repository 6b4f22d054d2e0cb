"""GPU isolation as a GPU node enforces it: a pod that asks for no GPU gets none, whatever
its NVIDIA_VISIBLE_DEVICES says, and a GPU pod gets the GPUs the device plugin allocated.

The node's part is the NVIDIA Container Toolkit's config as the real install-nvidia.sh
leaves it on the stubbed host (tests/scripts/stubs/stub's `nvidia-ctk config`), read with a
TOML parser; the cluster's part is the rendered RuntimeClass, device plugin and DCGM
exporter, checked with kubernetes-validate --strict. Between them, the toolkit's choice of
devices (visible_devices) and the device plugin's allocation (allocation) follow the pinned
upstream code line by line."""

import os
import subprocess
import sys
import tomllib

import pytest
import yaml

from components.addons.gpu_support import gpu_manifests
from components.addons.monitoring.manifests import dcgm_exporter
from config import versions
from config.hosts import Taint
from config.model import GpuSettings
from tests.boot.stub_host import stub_host
from tests.k8s_tools import validate_strict
from tests.builders import PROJECT_DIR

TOOLKIT_CONFIG = "etc/nvidia-container-runtime/config.toml"
ENVVAR_UNPRIVILEGED = "accept-nvidia-visible-devices-envvar-when-unprivileged"
AS_VOLUME_MOUNTS = "accept-nvidia-visible-devices-as-volume-mounts"
# The toolkit's defaults for keys a config leaves out (v1.19.1 api/config/v1/config.go:106,
# toml.go:255-256).
TOOLKIT_DEFAULTS = {ENVVAR_UNPRIVILEGED: True, AS_VOLUME_MOUNTS: False}
# toolkit v1.19.1 internal/config/image/cuda_image.go:34; k8s-device-plugin v0.20.0
# internal/plugin/server.go:46-48.
MOUNT_ROOT = "/var/run/nvidia-container-devices"
# containerd's default bounding set (pkg/oci/spec.go defaultUnixCaps): no CAP_SYS_ADMIN.
CONTAINERD_DEFAULT_CAPS = {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER",
                           "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID",
                           "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
                           "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}
GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


@pytest.fixture(scope="module")
def toolkit_config(tmp_path_factory) -> dict:
    """The toolkit's config after install-nvidia.sh ran on a fresh stubbed GPU host."""
    directory = tmp_path_factory.mktemp("host")
    host = stub_host(directory, {})
    env = {**host.env, "GPU_CLUSTER_HOST": "gpu01", "NVIDIA_DRIVER_BRANCH": "580",
           "NVIDIA_CONTAINER_TOOLKIT_VERSION": versions.NVIDIA_CONTAINER_TOOLKIT,
           "NVIDIA_REPO_KEY_FINGERPRINT": versions.NVIDIA_CONTAINER_TOOLKIT_KEY_FINGERPRINT,
           "NVIDIA_CUDA_REPO_KEY_FINGERPRINT": versions.NVIDIA_CUDA_REPO_KEY_FINGERPRINT,
           "CONTAINERD_DROPIN_PATH": "/etc/k0s/containerd.d/nvidia.toml",
           "CONTAINERD_DROPIN_CONTENT": "version = 3", "STUB_PATH": host.env["PATH"],
           "GPU_CLUSTER_PYTHON": sys.executable, "HOME": os.environ.get("HOME", "/root")}
    result = subprocess.run(["bash", str(PROJECT_DIR / "components/scripts/install-nvidia.sh")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    with open(host.root / TOOLKIT_CONFIG, "rb") as config:
        return tomllib.load(config)


def oci_view(container: dict, volumes: list[dict]) -> dict:
    """What the nvidia runtime's hook sees of a Kubernetes container: its environment, its
    mounts' host sources (hostPath) and its bounding capabilities (containerd's defaults
    with the container's add and drop; all of them when privileged)."""
    context = container.get("securityContext", {})
    capabilities = set(CONTAINERD_DEFAULT_CAPS)
    if context.get("privileged"):
        capabilities.add("CAP_SYS_ADMIN")
    added = context.get("capabilities", {})
    if "ALL" in added.get("drop", []):
        capabilities = set()
    capabilities |= {f"CAP_{name}" for name in added.get("add", [])}
    sources = {v["name"]: v["hostPath"]["path"] for v in volumes if "hostPath" in v}
    return {"env": {e["name"]: e["value"] for e in container.get("env", []) if "value" in e},
            "mounts": [(sources.get(m["name"], ""), m["mountPath"])
                       for m in container.get("volumeMounts", [])],
            "capabilities": capabilities}


def allocation(plugin_config: str, device_ids: list[str]) -> dict:
    """What the device plugin's Allocate adds to a container for `device_ids` under its
    configured strategy (k8s-device-plugin v0.20.0 internal/plugin/server.go:470-512)."""
    strategy = yaml.safe_load(plugin_config)["flags"].get("plugin", {}).get(
        "deviceListStrategy", "envvar")
    if strategy == "volume-mounts":
        return {"env": {"NVIDIA_VISIBLE_DEVICES": MOUNT_ROOT},
                "mounts": [("/dev/null", f"{MOUNT_ROOT}/{i}") for i in device_ids]}
    assert strategy == "envvar", strategy
    return {"env": {"NVIDIA_VISIBLE_DEVICES": ",".join(device_ids)}, "mounts": []}


def visible_devices(config: dict, oci: dict) -> list[str]:
    """The devices the toolkit gives a container (v1.19.1 internal/config/image/
    cuda_image.go:258-292 VisibleDevices, :358-387 requestsFromMounts, privileged.go:36)."""
    setting = {key: config.get(key, default) for key, default in TOOLKIT_DEFAULTS.items()}
    if setting[AS_VOLUME_MOUNTS]:
        requested = [destination[len(MOUNT_ROOT):].strip("/")
                     for source, destination in oci["mounts"]
                     if source == "/dev/null" and destination.startswith(MOUNT_ROOT)]
        if [device for device in requested if device]:
            return [device for device in requested if device]
    variable = oci["env"].get("NVIDIA_VISIBLE_DEVICES", "")
    if variable in ("", "void", "none") or variable.startswith(MOUNT_ROOT):
        return []
    if "CAP_SYS_ADMIN" in oci["capabilities"] or setting[ENVVAR_UNPRIVILEGED]:
        return variable.split(",")
    return []


def with_allocation(oci: dict, allocated: dict) -> dict:
    # The kubelet adds the plugin's environment and mounts to the container's.
    return {"env": {**oci["env"], **allocated["env"]},
            "mounts": oci["mounts"] + allocated["mounts"], "capabilities": oci["capabilities"]}


# A researcher's pod: the nvidia runtime, no GPU request, every GPU asked by variable,
# under the restricted Pod Security Standard's capabilities.
GREEDY_POD = {"runtimeClassName": "nvidia", "containers": [{
    "name": "main", "image": "example.invalid/cuda:12", "env": [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}


def rendered(taints=(GPU_TAINT,), gpu: GpuSettings = GpuSettings()) -> dict:
    objects = gpu_manifests(gpu, taints, "none") + dcgm_exporter(taints)
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_the_toolkit_config_ignores_the_variable_and_honours_volume_mounts(toolkit_config):
    assert toolkit_config[ENVVAR_UNPRIVILEGED] is False
    assert toolkit_config[AS_VOLUME_MOUNTS] is True
    # The package's own settings stay.
    assert toolkit_config["nvidia-container-cli"]["ldconfig"] == "@/sbin/ldconfig.real"


def test_a_pod_asking_for_no_gpu_gets_none_whatever_its_variable(toolkit_config):
    [container] = GREEDY_POD["containers"]
    oci = oci_view(container, [])
    assert visible_devices(toolkit_config, oci) == [], \
        "a pod without a GPU request got GPUs through NVIDIA_VISIBLE_DEVICES"
    # Its own /dev/null mount would need a hostPath volume, which no Pod Security
    # level above privileged admits.


def test_a_gpu_pod_gets_exactly_what_the_plugin_allocated(toolkit_config):
    objects = rendered()
    plugin_config = objects[("ConfigMap", "nvidia-device-plugin-config")]["data"]["config.yaml"]
    [container] = GREEDY_POD["containers"]
    granted = with_allocation(oci_view(container, []),
                              allocation(plugin_config, ["GPU-0f3a"]))
    assert visible_devices(toolkit_config, granted) == ["GPU-0f3a"]


def test_the_plugin_and_the_exporter_still_see_every_gpu(toolkit_config):
    objects = rendered()
    for kind, name in (("DaemonSet", "nvidia-device-plugin"),
                       ("DaemonSet", "dcgm-exporter")):
        pod = objects[(kind, name)]["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert visible_devices(toolkit_config, oci_view(container, pod["volumes"])) == ["all"], name


def tolerated(taint: Taint, tolerations: list[dict]) -> bool:
    """Kubernetes' rule (k8s.io/api core/v1 toleration.go ToleratesTaint)."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.effect:
            continue
        if toleration.get("key") and toleration["key"] != taint.key:
            continue
        if toleration.get("operator", "Equal") == "Exists" or \
                toleration.get("value") == taint.value:
            return True
    return False


def test_the_runtime_class_lends_no_gpu_toleration(toolkit_config):
    objects = rendered()
    runtime_class = objects[("RuntimeClass", "nvidia")]
    # The RuntimeClass admission adds scheduling.tolerations to every pod naming it.
    lent = runtime_class["scheduling"].get("tolerations", [])
    assert not tolerated(GPU_TAINT, GREEDY_POD.get("tolerations", []) + lent), \
        "the nvidia RuntimeClass lets a pod without a GPU request onto tainted GPU nodes"
    assert runtime_class["scheduling"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    # The GPU node's own daemons tolerate it themselves.
    for name in ("nvidia-device-plugin", "dcgm-exporter"):
        pod = objects[("DaemonSet", name)]["spec"]["template"]["spec"]
        assert tolerated(GPU_TAINT, pod["tolerations"]), name


def test_the_rendered_objects_pass_kubernetes_validate_strict(tmp_path):
    objects = list(rendered().values())
    report = validate_strict(objects, tmp_path / "gpu.yaml")
    assert report.count(" passed for resource ") == len(objects), report
