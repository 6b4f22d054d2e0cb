"""Add-ons under the mocks: GPUs only on GPU nodes, one default StorageClass, data
retained on hard NFS mounts, the MPI operator pinned and ordered after the nodes."""


import pytest

from config import versions
from components.common.step_text import step_inputs
from preview.engine import unwrap_secrets
from tests.builders import TEST_AGE_RECIPIENT, bare_metal_config, preview, shared_preview
from tests.stacks.test_credential_rotation import changed
from tests.stacks.steps import waits_for

STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"


def deps(plan, name: str) -> set[str]:
    return waits_for(plan, name)


def device_plugin(plan) -> dict:
    [daemon_set] = [r for r in plan.of_type(DAEMON_SET)
                    if r.inputs["metadata"]["name"] == "nvidia-device-plugin"]
    return daemon_set.inputs["spec"]["template"]["spec"]


def test_device_plugin_runs_only_where_the_bootstrap_labels_gpu_nodes():
    values = bare_metal_config(workers=2)
    values["hosts"][0]["role"] = "controller+worker"  # a node without GPUs
    plan = preview(values)
    pod = device_plugin(plan)
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["runtimeClassName"] == "nvidia"
    labels = {r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels", {})
              for r in plan.of_type("kubernetes:core/v1:NodePatch")}
    assert set(labels) == {"controller", "gpu000", "gpu001"}
    selected = {name for name, node in labels.items()
                if all(node.get(k) == v for k, v in pod["nodeSelector"].items())}
    assert selected == {"gpu000", "gpu001"}
    [runtime_class] = plan.of_type("kubernetes:node.k8s.io/v1:RuntimeClass")
    assert runtime_class.inputs["handler"] == "nvidia"
    assert runtime_class.inputs["scheduling"]["nodeSelector"] == pod["nodeSelector"]


def test_device_plugin_tolerates_the_gpu_hosts_taints():
    values = bare_metal_config(workers=2)
    # A node without GPUs: its taints keep other pods away and are none of the plugin's.
    values["hosts"][0]["role"] = "controller+worker"
    values["hosts"][0]["taints"] = [{"key": "infra", "effect": "NoSchedule"}]
    values["hosts"][1]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    values["hosts"][2]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                    {"key": "team", "value": "vision", "effect": "NoExecute"}]
    pod = device_plugin(preview(values))
    assert {(t["key"], t["effect"]) for t in pod["tolerations"]} == {
        ("nvidia.com/gpu", "NoSchedule"), ("dedicated", "NoSchedule"), ("team", "NoExecute")}
    assert all(t["operator"] == "Exists" for t in pod["tolerations"])


# The plugin passes GPUs as volume mounts; CAP_SYS_ADMIN (the toolkit's "privileged") lets
# its own NVIDIA_VISIBLE_DEVICES=all through, as the upstream chart sets it for that strategy.
PLUGIN_FLAGS = {"plugin": {"deviceListStrategy": "volume-mounts"}}
SYS_ADMIN = {"capabilities": {"add": ["SYS_ADMIN"]}}


@pytest.mark.parametrize("gpu, tuning, expected_config, security", [
    ({}, {}, {"version": "v1", "flags": {"migStrategy": "none", **PLUGIN_FLAGS}}, SYS_ADMIN),
    ({"timeSlicingReplicas": 4}, {},
     {"version": "v1", "flags": {"migStrategy": "none", **PLUGIN_FLAGS},
      "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
     SYS_ADMIN),
    ({"migStrategy": "mixed"}, {},
     {"version": "v1", "flags": {"migStrategy": "mixed", **PLUGIN_FLAGS}}, SYS_ADMIN),
    ({}, {"cpuManagerPolicy": "static", "reservedCpus": "0-1"},
     {"version": "v1", "flags": {"migStrategy": "none", **PLUGIN_FLAGS}}, {"privileged": True}),
])
def test_device_plugin_config_and_privileges_follow_the_settings(gpu, tuning, expected_config,
                                                                 security):
    import yaml

    values = bare_metal_config(workers=1)
    values["gpu"], values["tuning"] = gpu, tuning
    plan = preview(values)
    [config_map] = [r for r in plan.of_type("kubernetes:core/v1:ConfigMap")
                    if r.inputs["metadata"]["name"] == "nvidia-device-plugin-config"]
    assert yaml.safe_load(config_map.inputs["data"]["config.yaml"]) == expected_config
    [container] = device_plugin(plan)["containers"]
    assert container["securityContext"] == security
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["CONFIG_FILE"] == "/config/config.yaml"
    assert ("PASS_DEVICE_SPECS" in env) == ("cpuManagerPolicy" in tuning)


def default_classes(plan) -> list[str]:
    return [r.inputs["metadata"]["name"] for r in plan.of_type(STORAGE_CLASS)
            if r.inputs["metadata"]["annotations"][
                "storageclass.kubernetes.io/is-default-class"] == "true"]


STORAGE_CASES = [
    ("nfs served by a host", {"nfs": {"host": "controller"}}, ["nfs"], ["nfs"]),
    ("existing nfs server", {"nfs": {"server": "192.0.2.20", "path": "/export/ml"}}, ["nfs"],
     ["nfs"]),
    ("local path", {"localPath": {"path": "/dfs"}}, ["local-path"], ["local-path"]),
    ("efs by mount target", {"efs": {"mountTargetAddress": "10.0.1.10"}}, ["efs"], ["efs"]),
    ("nfs and efs, efs default", {"nfs": {"server": "192.0.2.20"},
                                  "efs": {"mountTargetAddress": "10.0.1.10", "default": True}},
     ["nfs", "efs"], ["efs"]),
    ("both, nfs default", {"nfs": {"host": "controller", "default": True}, "localPath": {}},
     ["nfs", "local-path"], ["nfs"]),
    ("both, local-path default", {"nfs": {"server": "192.0.2.20"},
                                  "localPath": {"default": True}},
     ["nfs", "local-path"], ["local-path"]),
]


@pytest.mark.parametrize("storage, classes, default",
                         [c[1:] for c in STORAGE_CASES], ids=[c[0] for c in STORAGE_CASES])
def test_exactly_one_default_storage_class_and_data_is_retained(storage, classes, default):
    values = bare_metal_config(workers=1)
    values["storage"] = storage
    plan = preview(values)
    found = plan.of_type(STORAGE_CLASS)
    assert sorted(r.inputs["metadata"]["name"] for r in found) == sorted(classes)
    assert default_classes(plan) == default
    assert plan.outputs["defaultStorageClass"] == (default[0], False)
    for storage_class in found:
        assert storage_class.inputs["reclaimPolicy"] == "Retain"
    provisioners = set()
    for shared in (r for r in found if r.inputs["metadata"]["name"] in ("nfs", "efs")):
        assert shared.inputs["parameters"]["archiveOnDelete"] == "true"
        options = shared.inputs["mountOptions"]
        assert "hard" in options and "soft" not in options
        provisioners.add(shared.inputs["provisioner"])
    # Each shared backend has its own provisioner instance.
    assert len(provisioners) == len([c for c in classes if c in ("nfs", "efs")])


# AWS's recommended NFS mount options for EFS
# (https://docs.aws.amazon.com/efs/latest/ug/mounting-fs-nfs-mount-settings.html).
AWS_EFS_OPTIONS = ["nfsvers=4.1", "rsize=1048576", "wsize=1048576", "hard", "timeo=600",
                   "retrans=2", "noresvport"]


@pytest.mark.parametrize("storage, expected", [
    ({"nfs": {"host": "controller"}}, [o for o in AWS_EFS_OPTIONS if o != "noresvport"]),
    ({"efs": {"mountTargetAddress": "10.0.1.10"}}, AWS_EFS_OPTIONS),
], ids=["nfs", "efs"])
def test_volumes_and_the_provisioners_own_mount_are_hard_by_default(storage, expected):
    """Hard mounts by default: a soft timeout "can cause silent data corruption" (nfs(5)),
    and the databases of Katib and Pipelines live on these volumes."""
    values = bare_metal_config(workers=1)
    values["storage"] = storage
    plan = preview(values)
    [storage_class] = plan.of_type(STORAGE_CLASS)
    assert default_classes(plan) == [storage_class.inputs["metadata"]["name"]]
    [root_volume] = plan.of_type("kubernetes:core/v1:PersistentVolume")
    assert root_volume.inputs["metadata"]["name"].endswith("-root")
    for options in (storage_class.inputs["mountOptions"],
                    root_volume.inputs["spec"]["mountOptions"]):
        assert options == expected
        assert "hard" in options and "soft" not in options


def test_a_cluster_host_serves_nfs_before_the_provisioner_and_never_deletes_data():
    plan = shared_preview(bare_metal_config(workers=1))
    serve = plan.named("controller-serve-nfs")
    # Set up once the host is back from any reboot its preparation needed.
    assert deps(plan, "controller-serve-nfs") == {"controller-verify-boot"}
    assert "delete" not in serve.inputs
    stdin = serve.inputs["stdin"]
    assert "export NFS_EXPORT_PATH='/srv/nfs'" in stdin
    # The one node that runs workloads, by its address; not the LAN, not the controller
    # (which keeps no snapshots there) nor any other office machine.
    assert "export NFS_CLIENT_CIDRS='192.168.2.2/32'" in stdin
    assert ("export NFS_EXPORT_OPTIONS='rw,sync,no_subtree_check,root_squash,anonuid=65534,"
            "anongid=65534'") in stdin
    assert "no_root_squash" not in stdin and "192.168.2.0/24" not in stdin
    deployment = next(r for r in plan.of_type("kubernetes:apps/v1:Deployment")
                      if r.inputs["metadata"]["name"] == "nfs-subdir-external-provisioner")
    assert "controller-serve-nfs" in deps(plan, deployment.name)
    env = {e["name"]: e["value"] for e in
           deployment.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["NFS_SERVER"] == "192.168.2.1" and env["NFS_PATH"] == "/srv/nfs"


@pytest.mark.parametrize("role, backups, clients", [
    # gpu000 serves: its own kubelet mounts it too; the controller only for the snapshots.
    ("controller", True, "192.168.2.2/32 192.168.2.3/32 192.168.2.1/32"),
    ("controller", False, "192.168.2.2/32 192.168.2.3/32"),
    ("controller+worker", False, "192.168.2.1/32 192.168.2.2/32 192.168.2.3/32"),
], ids=["snapshots-there", "backups-off", "controller-runs-workloads"])
def test_the_export_is_open_to_the_machines_that_mount_it_only(role, backups, clients):
    values = bare_metal_config(workers=2)
    values["hosts"][0]["role"] = role
    values["storage"] = {"nfs": {"host": "gpu000", "path": "/srv/nfs"}}
    values["backup"] = ({"recipients": [TEST_AGE_RECIPIENT]} if backups
                        else {"enabled": False})
    plan = preview(values)
    [serve] = [r for r in plan.of_type("command:remote:Command") if r.name == "gpu000-serve-nfs"]
    inputs = step_inputs(unwrap_secrets(serve.inputs["stdin"]))
    assert inputs["NFS_CLIENT_CIDRS"] == clients
    assert inputs["NFS_OWNED_FOLDERS"] == "gpu-cluster-backups"
    assert ",root_squash," in f",{inputs['NFS_EXPORT_OPTIONS']},"


def test_existing_nfs_server_needs_no_host_step():
    values = bare_metal_config(workers=1)
    values["storage"] = {"nfs": {"server": "192.0.2.20", "path": "/export/ml"}}
    plan = preview(values)
    assert not [r for r in plan.of_type("command:remote:Command") if "serve-nfs" in r.name]


def test_mpi_operator_is_pinned_applied_server_side_after_the_nodes():
    plan = shared_preview(bare_metal_config(workers=2))
    [operator] = plan.of_type("kubernetes:yaml/v2:ConfigFile")
    assert operator.inputs["file"] == "vendor/mpi-operator-v0.8.0/deploy/v2beta1/mpi-operator.yaml"
    # A stable name: bumping the version must update in place, never replace (which
    # would delete the CRD and every MPIJob).
    assert operator.name == "test-mpi-operator-manifest"
    assert operator.provider.startswith(plan.named("test-kubernetes").urn)
    for provider in plan.of_type("pulumi:providers:kubernetes"):
        assert provider.inputs["enableServerSideApply"] == "true"
    assert {"gpu000-node-metadata", "gpu001-node-metadata"} <= plan.all_dependencies(operator)


def test_mpi_operator_can_be_left_out():
    values = bare_metal_config(workers=1)
    values["mpi"] = {"operator": False}
    assert not preview(values).of_type("kubernetes:yaml/v2:ConfigFile")


def test_addons_wait_for_every_node():
    plan = shared_preview(bare_metal_config(workers=3))
    nodes = {f"gpu00{i}-node-metadata" for i in range(3)}
    for resource in plan.resources:
        if resource.type.startswith("kubernetes:") and "NodePatch" not in resource.type:
            assert nodes <= plan.all_dependencies(resource), resource.name


def test_addons_wait_for_the_nodes_through_their_provider():
    """The add-ons' provider waits for the one "nodes ready" resource, which waits for the
    ends of each node's steps; the objects name neither: the graph grows with objects plus
    nodes, and the SDK never walks it whole for an object (components/cluster.py)."""
    plan = shared_preview(bare_metal_config(workers=3))
    barrier = plan.named("test-nodes-ready")
    assert barrier.type == "command:local:Command" and "create" not in barrier.inputs
    assert {f"gpu00{i}-{end}" for i in range(3) for end in ("node-metadata", "uncordon-node")
            } == deps(plan, barrier.name)
    addons, nodes = plan.named("test-kubernetes"), plan.named("test-kubernetes-nodes")
    assert barrier.name in deps(plan, addons.name)
    for resource in plan.resources:
        if resource.type.startswith("kubernetes:"):
            used = addons if "NodePatch" not in resource.type else nodes
            assert resource.provider.startswith(used.urn + "::"), resource.name
            if used is addons:
                assert not {barrier.name, *(r.name for r in plan.resources
                                            if r.name.startswith("gpu00"))} & deps(
                    plan, resource.name), resource.name


@pytest.mark.parametrize("storage, reason", [
    ({"nfs": {"host": "controller"}}, "StorageClass nfs: k8s-sigs.io/nfs-subdir-external-"
     "provisioner, reclaim Retain, mount options nfsvers=4.1,rsize=1048576,wsize=1048576,"
     "hard,timeo=600,retrans=2 (default: the only backend configured)"),
    ({"nfs": {"host": "controller"}, "localPath": {"default": True}},
     "StorageClass local-path: rancher.io/local-path, reclaim Retain, mount options - "
     "(default: gpu-cluster:storage.localPath.default is true)"),
])
def test_preview_says_which_storage_backend_is_the_default_and_why(storage, reason):
    from preview.report import tree

    values = bare_metal_config(workers=1)
    values["storage"] = storage
    lines = tree(preview(values)).splitlines()
    assert f"  {reason}" in lines
    assert sum("(default:" in line for line in lines) == 1


def test_feature_discovery_is_an_opt_in_pinned_chart():
    assert not shared_preview(bare_metal_config(workers=1)).of_type("kubernetes:helm.sh/v4:Chart")
    values = bare_metal_config(workers=1)
    values["gpu"] = {"featureDiscovery": True}
    plan = preview(values)
    [chart] = plan.of_type("kubernetes:helm.sh/v4:Chart")
    assert (chart.inputs["chart"], chart.inputs["version"]) == ("nvidia-device-plugin", "0.20.0")
    assert chart.inputs["repositoryOpts"]["repo"] == "https://nvidia.github.io/k8s-device-plugin"
    assert chart.inputs["values"]["devicePlugin"] == {"enabled": False}
    assert "namespace-gpu-feature-discovery" in deps(plan, chart.name)


def test_a_raised_add_on_pin_updates_only_that_add_on_in_place(monkeypatch):
    """An add-on's new release is a new pin in config/versions.py: `pulumi up` updates
    its workload's image, which Kubernetes rolls out (the device plugin's DaemonSet with
    RollingUpdate), and touches nothing else. A changed image replaces no object:
    pulumi-kubernetes replaces a Deployment on a new .spec.selector only and a DaemonSet
    never (provider/pkg/provider/diff.go, forceNew), so both are updates."""
    values = bare_metal_config(workers=2)
    before = preview(values)
    monkeypatch.setattr(versions, "NVIDIA_DEVICE_PLUGIN_IMAGE",
                        "nvcr.io/nvidia/k8s-device-plugin:v0.21.0")
    monkeypatch.setattr(versions, "NFS_SUBDIR_PROVISIONER_IMAGE",
                        "registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:v4.0.3")
    after = preview(values)
    plugin = "kube-system-daemonset-nvidia-device-plugin"
    provisioner = "nfs-provisioner-deployment-nfs-subdir-external-provisioner"
    assert changed(before, after) == {plugin, provisioner}
    assert after.named(plugin).inputs["spec"]["selector"] == before.named(plugin).inputs[
        "spec"]["selector"]
    assert after.named(provisioner).inputs["spec"]["selector"] == before.named(
        provisioner).inputs["spec"]["selector"]
    assert sorted(r.urn for r in before.resources) == sorted(r.urn for r in after.resources)
