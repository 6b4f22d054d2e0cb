"""The monitoring add-on in whole stacks: on by default on every example stack, off with
monitoring.enabled: false, Grafana's address per access mode, the exporter only on GPU
nodes, Prometheus' volume and alerts from the stack's own config, every object valid."""

import pytest
import yaml

from preview.report import write_artifacts
from preview.stack_file import EXAMPLE_STACKS
from tests.builders import (bare_metal_config, cloud_config, example_plan, preview, require_tool,
                            shared_preview)
from tests.stacks.test_artifacts import validate_manifests

MONITORING = "gpu-cluster:addons:Monitoring"


def objects(plan, kind: str) -> dict:
    """(namespace, name) -> inputs of the monitoring component's objects of one kind."""
    [component] = plan.of_type(MONITORING)
    return {(r.inputs["metadata"].get("namespace"), r.inputs["metadata"]["name"]): r.inputs
            for r in plan.descendants(component) if r.type.endswith(f":{kind}")}


def exporter_pod(plan) -> dict:
    return objects(plan, "DaemonSet")[("kube-system", "dcgm-exporter")]["spec"]["template"][
        "spec"]


@pytest.fixture(scope="module", params=EXAMPLE_STACKS)
def example(request):
    return request.param, example_plan(request.param)


def test_every_example_stack_monitors_its_gpus_by_default(example):
    stack, plan = example
    assert set(objects(plan, "Deployment")) == {
        ("monitoring", "prometheus"), ("monitoring", "grafana"),
        ("monitoring", "kube-state-metrics")}
    assert exporter_pod(plan)["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert plan.outputs["grafanaUrl"] == ("http://localhost:3000/", False)
    password, secret = plan.outputs["grafanaAdminPassword"]
    assert secret and len(password) == 48
    [grafana_secret] = objects(plan, "Secret").values()
    assert plan.redact(grafana_secret)["stringData"]["password"] == "[secret]"


def test_monitoring_can_be_turned_off():
    values = bare_metal_config()
    values["monitoring"] = {"enabled": False}
    plan = preview(values)
    assert plan.of_type(MONITORING) == []
    assert not [r for r in plan.resources if "grafana" in r.name or "dcgm" in r.name]
    assert "grafanaUrl" not in plan.outputs and "grafanaAdminPassword" not in plan.outputs


def test_only_gpu_nodes_run_the_exporter_and_it_tolerates_their_taints():
    values = bare_metal_config(workers=2)
    values["hosts"][0]["role"] = "controller+worker"  # a node without GPUs
    values["hosts"][0]["taints"] = [{"key": "infra", "effect": "NoSchedule"}]
    values["hosts"][2]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]
    plan = preview(values)
    pod = exporter_pod(plan)
    labels = {r.inputs["metadata"]["name"]: r.inputs["metadata"].get("labels", {})
              for r in plan.of_type("kubernetes:core/v1:NodePatch")}
    selected = {name for name, node in labels.items()
                if all(node.get(k) == v for k, v in pod["nodeSelector"].items())}
    assert selected == {"gpu000", "gpu001"}
    # The RuntimeClass schedules its pods onto the same nodes only.
    assert pod["runtimeClassName"] == "nvidia"
    assert {(t["key"], t["effect"]) for t in pod["tolerations"]} == {
        ("nvidia.com/gpu", "NoSchedule"), ("dedicated", "NoExecute")}
    [container] = pod["containers"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["args"] == ["-f", "/etc/dcgm-exporter/counters/counters.csv"]


def rules_of(plan) -> dict:
    config_map = objects(plan, "ConfigMap")[("monitoring", "prometheus")]
    return yaml.safe_load(config_map["data"]["gpu-alerts.rules.yml"])


def test_gpu_missing_alerts_follow_each_host_and_pool_of_the_config():
    values = bare_metal_config(workers=2, gpus=8)
    values["hosts"][2]["gpus"] = 2
    values["gpu"] = {"timeSlicingReplicas": 2}
    [group] = [g for g in rules_of(preview(values))["groups"] if g["name"] == "gpu-allocatable"]
    assert [(r["labels"]["config_key"], r["expr"].split(">= ")[-1]) for r in group["rules"]] == [
        ("hosts[gpu000].gpus", "16)"), ("hosts[gpu001].gpus", "4)")]
    cloud = shared_preview(cloud_config())
    [group] = [g for g in rules_of(cloud)["groups"] if g["name"] == "gpu-allocatable"]
    [rule] = group["rules"]
    assert 'label_gpu_cluster_pool="gpu"' in rule["expr"] and rule["expr"].endswith(">= 4)")


@pytest.mark.parametrize("storage, monitoring, expected", [
    ({"nfs": {"host": "controller", "path": "/srv/nfs"}}, {}, "nfs"),
    ({"nfs": {"server": "192.0.2.20", "default": True}, "localPath": {}}, {}, "nfs"),
    ({"nfs": {"server": "192.0.2.20", "default": True}, "localPath": {}},
     {"storageClass": "local-path", "storageSize": "50Gi"}, "local-path"),
])
def test_prometheus_keeps_its_data_on_the_stack_s_storage(storage, monitoring, expected):
    values = bare_metal_config()
    values["storage"] = storage
    values["monitoring"] = monitoring
    plan = preview(values)
    claim = objects(plan, "PersistentVolumeClaim")[("monitoring", "prometheus")]
    assert claim["spec"]["storageClassName"] == expected
    assert claim["spec"]["resources"]["requests"]["storage"] == monitoring.get(
        "storageSize", "20Gi")
    # The claim waits for the StorageClass (through the storage add-on's objects).
    [component] = plan.of_type(MONITORING)
    [pvc] = [r for r in plan.descendants(component) if r.type.endswith("PersistentVolumeClaim")]
    classes = {r.name for r in plan.of_type("kubernetes:storage.k8s.io/v1:StorageClass")}
    assert classes <= plan.all_dependencies(pvc)


ACCESS_MODES = pytest.mark.parametrize("layout, access, url, service", [
    ("bare-metal", {"mode": "nodePort"}, "http://192.168.2.2:31300/",
     {"type": "NodePort", "nodePort": 31300}),
    ("bare-metal", {"mode": "nodePort", "nodePort": 30999, "hostname": "grafana.lab"},
     "http://grafana.lab:30999/", {"type": "NodePort", "nodePort": 30999}),
    ("cloud", {"mode": "loadBalancer", "hostname": "grafana.example.com"},
     "http://grafana.example.com/",
     {"type": "LoadBalancer", "loadBalancerSourceRanges": ["198.51.100.0/24"]}),
    ("cloud", {"mode": "loadBalancer", "hostname": "grafana.example.com",
               "sourceRanges": ["203.0.113.0/28"]}, "http://grafana.example.com/",
     {"type": "LoadBalancer", "loadBalancerSourceRanges": ["203.0.113.0/28"]}),
    ("cloud", {"mode": "portForward", "port": 3300}, "http://localhost:3300/", {}),
])


def with_grafana_access(layout: str, access: dict) -> dict:
    values = bare_metal_config() if layout == "bare-metal" else cloud_config()
    values["monitoring"] = {"grafana": {"access": access}}
    return values


@ACCESS_MODES
def test_grafana_url_and_service_follow_the_access_mode(layout, access, url, service):
    plan = shared_preview(with_grafana_access(layout, access))
    assert plan.outputs["grafanaUrl"] == (url, False)
    spec = objects(plan, "Service")[("monitoring", "grafana")]["spec"]
    assert spec.get("type") == service.get("type")
    assert spec.get("loadBalancerSourceRanges") == service.get("loadBalancerSourceRanges")
    assert spec["ports"][0].get("nodePort") == service.get("nodePort")


@pytest.mark.tools
@ACCESS_MODES
def test_each_grafana_access_modes_manifests_pass_kubernetes_validate(layout, access, url,
                                                                       service, tmp_path):
    validate = require_tool("kubernetes-validate")
    plan = shared_preview(with_grafana_access(layout, access))
    write_artifacts(plan, tmp_path / "build")
    validate_manifests(plan, tmp_path / "build", validate)


def test_monitoring_namespace_enforces_the_restricted_standard():
    plan = shared_preview(bare_metal_config())
    [namespace] = objects(plan, "Namespace").values()
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # What the restricted standard checks, on every pod placed there.
    for (ns, name), deployment in objects(plan, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"] == {"drop": ["ALL"]}, name
        assert not [v for v in pod.get("volumes", []) if "hostPath" in v], name
