"""Each failure mode, made in the recorded healthy cluster the way it shows in the API or on
a host, is found with its verdict, naming what it is about; the healthy cluster passes."""

import base64
import datetime
import json

import pytest
import yaml

from contract.stack import read as read_stack
from doctor.checks.every import run
from doctor.findings import OK, PROBLEM, UNCHECKED, WARNING, exit_code
from tests.doctor.cluster import PLUGIN_PODS, nvml_log, stamp, token_secret


def findings(cluster, check=None):
    found = run(cluster.context())
    return [f for f in found if check is None or f.check == check]


def bad(cluster, check):
    return [f for f in findings(cluster, check) if f.verdict != OK]


def test_the_healthy_cluster_passes(cluster):
    found = findings(cluster)
    assert [f for f in found if f.verdict != OK] == []
    assert exit_code(found) == 0
    checks = {f.check for f in found}
    # Every check had something to look at.
    assert checks >= {"node-registered", "node-ready", "node-address", "gpu-allocatable",
                      "gpu-device-plugin", "default-storage-class", "pvc-bound", "mysql",
                      "namespace-terminating", "certificate-expiry", "join-tokens",
                      "host-address", "host-routes", "host-mtu", "host-inotify",
                      "host-resolv-conf", "host-gpus", "etcd-quorum"}
    mysql = {f.subject for f in found if f.check == "mysql"}
    assert mysql == {"pod kubeflow/katib-mysql-7c5b9d8f6-x2r4m", "pod kubeflow/mysql-5b8d9c7f4-qp6vn"}


# --- GPUs ---------------------------------------------------------------------------------

def test_gpu_allocatable_missing(cluster):
    del cluster.find("nodes", "madrid")["status"]["allocatable"]["nvidia.com/gpu"]
    [finding] = bad(cluster, "gpu-allocatable")
    assert (finding.verdict, finding.subject) == (PROBLEM, "node madrid")
    assert "no nvidia.com/gpu allocatable (hosts[madrid].gpus is 4)" in finding.message


def test_gpu_allocatable_below_config(cluster):
    cluster.find("nodes", "campos")["status"]["allocatable"]["nvidia.com/gpu"] = "3"
    [finding] = bad(cluster, "gpu-allocatable")
    assert (finding.verdict, finding.subject) == (PROBLEM, "node campos")
    assert finding.message == "3 nvidia.com/gpu allocatable, hosts[campos].gpus is 4"


def test_time_slicing_and_mig_are_not_missing_gpus(cluster):
    cluster.find("nodes", "campos")["status"]["allocatable"]["nvidia.com/gpu"] = "16"
    madrid = cluster.find("nodes", "madrid")["status"]["allocatable"]
    del madrid["nvidia.com/gpu"]
    madrid["nvidia.com/mig-1g.10gb"] = "7"
    assert bad(cluster, "gpu-allocatable") == []


def test_pool_nodes_are_held_to_their_pool(cluster):
    node = cluster.find("nodes", "campos")
    node["metadata"]["name"] = "ip-10-0-12-7"
    node["metadata"]["labels"]["gpu-cluster/pool"] = "a100"
    node["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    cluster.pools = [{"name": "a100", "count": 2, "gpus": 8}]
    [gpu] = bad(cluster, "gpu-allocatable")
    assert gpu.subject == "node ip-10-0-12-7"
    assert gpu.message == "4 nvidia.com/gpu allocatable, pool a100's gpus is 8"
    registered = {f.subject: f for f in bad(cluster, "node-registered")}
    assert registered["pool a100"].message == "1 of 2 nodes registered"
    assert bad(cluster, "node-known") == []


def test_a_scaling_pool_is_held_to_its_minimum_not_its_first_size(cluster):
    # count 2 was the size the group started at; cluster-autoscaler may leave min.
    cluster.pools = [{"name": "a100", "count": 2, "min": 0, "max": 4, "gpus": 8}]
    assert bad(cluster, "node-registered") == []
    cluster.pools[0]["min"] = 1
    [registered] = bad(cluster, "node-registered")
    assert registered.message == "0 of at least 1 nodes registered"


def test_the_pools_output_gives_the_doctor_its_minimum(tmp_path):
    outputs = tmp_path / "outputs.json"
    kubeconfig = {"clusters": [{"name": "c", "cluster": {"server": "https://192.168.2.1:6443"}}],
                  "users": [{"name": "u", "user": {}}],
                  "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}
    outputs.write_text(json.dumps({
        "kubeconfig": yaml.safe_dump(kubeconfig), "nodes": [],
        "pools": [{"name": "a100", "count": 2, "min": 0, "max": 4, "gpus": 8},
                  {"name": "old", "count": 3, "gpus": 0}]}))
    stack = read_stack(None, str(outputs), None)
    assert [(p.count, p.min, p.fewest) for p in stack.pools] == [(2, 0, 0), (3, None, 3)]


def test_nvml_error_in_the_device_plugin_log(cluster):
    pod = cluster.find("pods", PLUGIN_PODS["madrid"])
    status = pod["status"]["containerStatuses"][0]
    status["restartCount"] = 7
    status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message":
                       "back-off 5m0s restarting failed container=nvidia-device-plugin"}}
    key = ("kube-system", PLUGIN_PODS["madrid"], "nvidia-device-plugin", True)
    cluster.logs[key] = nvml_log()
    [finding] = bad(cluster, "gpu-device-plugin")
    assert finding.verdict == PROBLEM
    assert finding.subject == f"pod kube-system/{PLUGIN_PODS['madrid']}"
    # The plugin's own line, without klog's header, before the error it leads to.
    assert finding.message == "on node madrid: Failed to initialize NVML: ERROR_DRIVER_NOT_LOADED"
    assert "madrid" in finding.fix


def test_failed_to_initialize_nvml_is_found_in_the_current_log(cluster):
    key = ("kube-system", PLUGIN_PODS["moscow"], "nvidia-device-plugin", False)
    cluster.logs[key] += ("E1123 06:01:12.004512       1 factory.go:112] Failed to initialize "
                          "NVML: Driver/library version mismatch\n")
    [finding] = bad(cluster, "gpu-device-plugin")
    assert finding.subject == f"pod kube-system/{PLUGIN_PODS['moscow']}"
    assert finding.message == ("on node moscow: Failed to initialize NVML: Driver/library "
                               "version mismatch")


def test_gpu_node_without_a_device_plugin(cluster):
    cluster.items("pods").remove(cluster.find("pods", PLUGIN_PODS["campos"]))
    [finding] = bad(cluster, "gpu-device-plugin")
    assert (finding.verdict, finding.subject) == (PROBLEM, "node campos")


# --- nodes --------------------------------------------------------------------------------

def _ready(node: dict) -> dict:
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


def test_node_not_ready(cluster, now):
    ready = _ready(cluster.find("nodes", "madrid"))
    ready.update(status="Unknown", reason="NodeStatusUnknown",
                 message="Kubelet stopped posting node status.",
                 lastTransitionTime=stamp(now - datetime.timedelta(minutes=20)))
    [finding] = bad(cluster, "node-ready")
    assert (finding.verdict, finding.subject) == (PROBLEM, "node madrid")
    assert "Ready is Unknown" in finding.message
    assert "Kubelet stopped posting node status." in finding.message
    assert "kubectl cordon madrid" in finding.fix


def test_node_ready_false(cluster):
    ready = _ready(cluster.find("nodes", "campos"))
    ready.update(status="False", reason="KubeletNotReady",
                 message="container runtime network not ready: NetworkReady=false reason:"
                         "NetworkPluginNotReady message:Network plugin returns error: cni "
                         "plugin not initialized")
    [finding] = bad(cluster, "node-ready")
    assert "Ready is False" in finding.message and "cni plugin not initialized" in finding.message


def test_stale_heartbeat(cluster, now):
    _ready(cluster.find("nodes", "moscow"))["lastHeartbeatTime"] = stamp(
        now - datetime.timedelta(minutes=42))
    [finding] = bad(cluster, "node-ready")
    assert (finding.verdict, finding.subject) == (WARNING, "node moscow")
    assert "last heartbeat is 42 minutes old" in finding.message


def test_heartbeat_within_the_report_frequency_is_fresh(cluster, now):
    _ready(cluster.find("nodes", "moscow"))["lastHeartbeatTime"] = stamp(
        now - datetime.timedelta(minutes=5))
    assert bad(cluster, "node-ready") == []


def test_configured_worker_without_a_node(cluster):
    cluster.items("nodes").remove(cluster.find("nodes", "campos"))
    [finding] = bad(cluster, "node-registered")
    assert (finding.verdict, finding.subject) == (PROBLEM, "node campos")
    assert "192.168.2.4" in finding.message


def test_left_over_node(cluster):
    node = json.loads(json.dumps(cluster.find("nodes", "campos")))
    node["metadata"]["name"] = "lisbon"
    _ready(node)["status"] = "Unknown"
    cluster.items("nodes").append(node)
    [finding] = bad(cluster, "node-known")
    assert (finding.verdict, finding.subject) == (WARNING, "node lisbon")
    assert "kubectl delete node lisbon" in finding.fix


def test_internal_ip_not_the_configured_address(cluster):
    addresses = cluster.find("nodes", "moscow")["status"]["addresses"]
    addresses[0]["address"] = "10.88.0.1"
    [finding] = bad(cluster, "node-address")
    assert (finding.verdict, finding.subject) == (PROBLEM, "node moscow")
    assert finding.message == "InternalIP is 10.88.0.1, configured address is 192.168.2.2"


# --- storage ------------------------------------------------------------------------------

def test_no_default_storage_class(cluster):
    cluster.items("storageclasses")[0]["metadata"]["annotations"] = {}
    [finding] = bad(cluster, "default-storage-class")
    assert finding.verdict == PROBLEM
    assert "storageclass.kubernetes.io/is-default-class" in finding.fix and "nfs" in finding.fix


def test_two_default_storage_classes(cluster):
    other = json.loads(json.dumps(cluster.items("storageclasses")[0]))
    other["metadata"]["name"] = "local-path"
    other["provisioner"] = "rancher.io/local-path"
    cluster.items("storageclasses").append(other)
    [finding] = bad(cluster, "default-storage-class")
    assert finding.verdict == WARNING
    assert "2 default StorageClasses: local-path, nfs" in finding.message
    assert "patch storageclass local-path" in finding.fix and '"false"' in finding.fix


def test_pending_claim_with_its_event(cluster, now):
    claim = json.loads(json.dumps(cluster.items("persistentvolumeclaims")[0]))
    claim["metadata"].update(name="workspace-alice", namespace="kubeflow-user-alice")
    claim["spec"].pop("volumeName")
    claim["status"] = {"phase": "Pending"}
    cluster.items("persistentvolumeclaims").append(claim)
    event = json.loads(json.dumps(cluster.items("events")[0]))
    event["involvedObject"].update(name="workspace-alice", namespace="kubeflow-user-alice")
    event.update(type="Warning", reason="ProvisioningFailed", lastTimestamp=stamp(now),
                 message="failed to provision volume with StorageClass \"nfs\": rpc error: "
                         "code = DeadlineExceeded desc = context deadline exceeded")
    cluster.items("events").append(event)
    [finding] = bad(cluster, "pvc-bound")
    assert (finding.verdict, finding.subject) == (PROBLEM, "pvc kubeflow-user-alice/workspace-alice")
    assert finding.message.startswith("Pending (ProvisioningFailed: failed to provision volume")


def test_claim_waiting_for_its_first_consumer_is_fine(cluster, now):
    claim = cluster.items("persistentvolumeclaims")[0]
    claim["status"] = {"phase": "Pending"}
    event = cluster.items("events")[0]
    event.update(reason="WaitForFirstConsumer",
                 message="waiting for first consumer to be created before binding")
    assert bad(cluster, "pvc-bound") == []


# --- workloads ----------------------------------------------------------------------------

def test_katib_mysql_crash_looping(cluster):
    status = cluster.find("pods", "katib-mysql-7c5b9d8f6-x2r4m")["status"]["containerStatuses"][0]
    status.update(ready=False, started=False, restartCount=23,
                  state={"waiting": {"reason": "CrashLoopBackOff", "message":
                         "back-off 5m0s restarting failed container=katib-mysql pod="
                         "katib-mysql-7c5b9d8f6-x2r4m_kubeflow(3a9f1c2e)"}},
                  lastState={"terminated": {"exitCode": 1, "reason": "Error",
                                            "startedAt": "2026-11-23T05:50:01Z",
                                            "finishedAt": "2026-11-23T05:50:03Z",
                                            "containerID": "containerd://0a1b"}})
    [finding] = bad(cluster, "mysql")
    assert (finding.verdict, finding.subject) == (PROBLEM, "pod kubeflow/katib-mysql-7c5b9d8f6-x2r4m")
    assert finding.message == ("container katib-mysql is CrashLoopBackOff on node campos, 23 "
                               "restarts; last exit Error (code 1)")
    assert "kubectl -n kubeflow logs katib-mysql-7c5b9d8f6-x2r4m --previous" in finding.fix


def test_mysql_that_restarted_often(cluster):
    cluster.find("pods", "mysql-5b8d9c7f4-qp6vn")["status"]["containerStatuses"][0][
        "restartCount"] = 4
    [finding] = bad(cluster, "mysql")
    assert (finding.verdict, finding.subject) == (WARNING, "pod kubeflow/mysql-5b8d9c7f4-qp6vn")


# --- namespaces ---------------------------------------------------------------------------

def test_namespace_stuck_terminating(cluster, now):
    namespace = cluster.find("namespaces", "kubeflow")
    namespace["metadata"]["deletionTimestamp"] = stamp(now - datetime.timedelta(days=2))
    namespace["status"] = {"phase": "Terminating", "conditions": [
        {"type": "NamespaceDeletionDiscoveryFailure", "status": "False",
         "reason": "ResourcesDiscovered", "message": "All resources successfully discovered",
         "lastTransitionTime": stamp(now)},
        {"type": "NamespaceDeletionGroupVersionParsingFailure", "status": "False",
         "reason": "ParsedGroupVersions", "message": "All legacy kube types successfully parsed",
         "lastTransitionTime": stamp(now)},
        {"type": "NamespaceDeletionContentFailure", "status": "False",
         "reason": "ContentDeleted", "message": "All content successfully deleted, may be "
         "waiting on finalization", "lastTransitionTime": stamp(now)},
        {"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain",
         "message": "Some resources are remaining: profiles.kubeflow.org has 1 resource "
                    "instances", "lastTransitionTime": stamp(now)},
        {"type": "NamespaceFinalizersRemaining", "status": "True",
         "reason": "SomeFinalizersRemain",
         "message": "Some content in the namespace has finalizers remaining: "
                    "profile-finalizer in 1 resource instances", "lastTransitionTime": stamp(now)},
    ]}
    [finding] = bad(cluster, "namespace-terminating")
    assert (finding.verdict, finding.subject) == (PROBLEM, "namespace kubeflow")
    assert "profile-finalizer in 1 resource instances" in finding.message
    assert "profiles.kubeflow.org has 1 resource instances" in finding.message
    assert "ContentDeleted" not in finding.message  # conditions that are False hold nothing


# --- credentials --------------------------------------------------------------------------

@pytest.mark.parametrize("days, verdict, words", [
    (12.5, WARNING, "expires in 12 days"), (-3, PROBLEM, "expired on")])
def test_admin_certificate_near_or_past_its_end(cluster, authority, days, verdict, words):
    cluster.client_certificate = authority.client(days=days)[0]
    [finding] = bad(cluster, "certificate-expiry")
    assert finding.verdict == verdict and words in finding.message
    assert finding.subject.startswith("admin client certificate (")


def test_left_over_join_tokens(cluster, now):
    cluster.items("bootstrap-tokens").extend([
        token_secret("abc123", stamp(now - datetime.timedelta(days=1)), now),
        token_secret("def456", stamp(now + datetime.timedelta(hours=20)), now),
        token_secret("ghi789", None, now)])
    found = {f.subject: f for f in bad(cluster, "join-tokens")}
    assert set(found) == {f"secret kube-system/bootstrap-token-{i}"
                          for i in ("abc123", "def456", "ghi789")}
    assert all(f.verdict == WARNING for f in found.values())
    assert "expired on" in found["secret kube-system/bootstrap-token-abc123"].message
    assert "never expires" in found["secret kube-system/bootstrap-token-ghi789"].message
    text = json.dumps([f.as_dict() for f in found.values()])
    assert "q7z0k3m9x2c5v8b1" not in text  # the secret half is never shown
    assert base64.b64encode(b"q7z0k3m9x2c5v8b1").decode() not in text


def test_a_valid_token_is_expected_with_pools(cluster, now):
    cluster.pools = [{"name": "a100", "count": 0, "gpus": 8}]
    cluster.items("bootstrap-tokens").append(
        token_secret("def456", stamp(now + datetime.timedelta(days=300)), now))
    assert bad(cluster, "join-tokens") == []


# --- what the API refuses -----------------------------------------------------------------

def test_a_list_the_api_refuses_is_could_not_check(cluster):
    cluster.errors["bootstrap-tokens"] = ('GET /api/v1/namespaces/kube-system/secrets answered '
                                          'HTTP 403: secrets is forbidden')
    [finding] = bad(cluster, "join-tokens")
    assert finding.verdict == UNCHECKED and "HTTP 403" in finding.message
    assert exit_code(findings(cluster)) == 2
