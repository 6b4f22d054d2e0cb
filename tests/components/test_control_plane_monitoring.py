"""Prometheus on the controllers through promtool: the API servers' scrape job in a config
promtool accepts, and the alerts run on synthetic `up` series: one controller of three
down is a warning naming it, two down is critical, the only controller down is critical.
Prometheus may read the API servers' /metrics and nothing else."""

import subprocess

import pytest
import yaml

from components.addons.monitoring.control_plane import (APISERVER_JOB, apiserver_job,
                                                        control_plane_rules, metrics_reader)
from components.addons.monitoring.install import MonitoringArgs, monitoring_manifests
from components.addons.monitoring.manifests import prometheus_config
from config.model import GpuSettings
from config.monitoring import AlertSettings, MonitoringSettings
from tests.builders import require_tool
from tests.pki import Authority

pytestmark = pytest.mark.tools

THREE = (("c1", "192.168.2.1"), ("c2", "192.168.2.2"), ("c3", "192.168.2.3"))


def promtool(*args: str) -> str:
    result = subprocess.run([require_tool("promtool"), *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def rules_file(tmp_path, controllers: int):
    path = tmp_path / "control-plane.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "control-plane", "rules":
                                                control_plane_rules(controllers, AlertSettings())}]}))
    return path


def test_the_apiserver_job_passes_promtool(tmp_path):
    assert apiserver_job(THREE, 6443)["authorization"] == {
        "credentials_file": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    # promtool opens the token and CA files: a pod's, stood in for here.
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("stand-in token\n")
    (account / "ca.crt").write_text(Authority.create().cert_pem)
    config = prometheus_config(MonitoringSettings(), rules_dir=str(tmp_path),
                               apiservers=apiserver_job(THREE, 6443, str(account)))
    # Debian's promtool has no Kubernetes discovery: the pod jobs are left out here
    # (tests/components/test_monitoring.py checks them); the static job is checked whole.
    config["scrape_configs"] = [j for j in config["scrape_configs"]
                                if j["job_name"] == APISERVER_JOB]
    (tmp_path / "gpu-alerts.rules.yml").write_text(yaml.safe_dump(
        {"groups": [{"name": "control-plane", "rules": control_plane_rules(3, AlertSettings())}]}))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    out = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert "SUCCESS: 2 rules found" in out
    [job] = config["scrape_configs"]
    assert [c["targets"] for c in job["static_configs"]] == [
        ["192.168.2.1:6443"], ["192.168.2.2:6443"], ["192.168.2.3:6443"]]
    assert [c["labels"]["node"] for c in job["static_configs"]] == ["c1", "c2", "c3"]


# ControlPlaneMajorityDown as it fires for 3 controllers.
MAJORITY_DOWN = [{"exp_labels": {"severity": "critical"}, "exp_annotations": {
    "summary": "Fewer than 2 of 3 controllers' API servers answer",
    "description": "etcd needs a majority of its members to accept writes: the cluster "
                   "cannot change until enough controllers are back (docs/day-2.md, "
                   "Restoring the control plane)."}}]


def _up(node: str, values: str) -> dict:
    return {"series": f'up{{job="{APISERVER_JOB}", node="{node}", instance="{node}:6443"}}',
            "values": values}


def test_one_controller_down_warns_naming_it_and_two_down_is_critical(tmp_path):
    rules = rules_file(tmp_path, 3)
    down = {"job": APISERVER_JOB, "node": "c2", "instance": "c2:6443", "severity": "warning"}
    one_down = {"interval": "1m", "input_series": [
        _up("c1", "1x20"), _up("c2", "1x5 0x15"), _up("c3", "1x20")],
        "alert_rule_test": [
            {"eval_time": "4m", "alertname": "ControllerApiServerDown", "exp_alerts": []},
            {"eval_time": "15m", "alertname": "ControllerApiServerDown", "exp_alerts": [{
                "exp_labels": down, "exp_annotations": {
                    "summary": "The API server of controller c2 does not answer",
                    "description": "The other controllers serve the cluster while 2 of 3 "
                                   "are up. Run `gpu-cluster doctor` and look at the "
                                   "controller's distribution service."}}]},
            {"eval_time": "15m", "alertname": "ControlPlaneMajorityDown", "exp_alerts": []}]}
    two_down = {"interval": "1m", "input_series": [
        _up("c1", "1x20"), _up("c2", "1x5 0x15"), _up("c3", "1x5 0x15")],
        "alert_rule_test": [
            {"eval_time": "15m", "alertname": "ControlPlaneMajorityDown",
             "exp_alerts": MAJORITY_DOWN}]}
    # Every target down, or gone: count() of nothing is no series, `or vector(0)` is 0.
    all_gone = {"interval": "1m", "input_series": [
        _up("c1", "1x5 stale"), _up("c2", "1x5 stale"), _up("c3", "1x5 stale")],
        "alert_rule_test": [
            {"eval_time": "15m", "alertname": "ControlPlaneMajorityDown",
             "exp_alerts": MAJORITY_DOWN}]}
    _run(tmp_path, rules, [one_down, two_down, all_gone])


def test_the_only_controller_down_is_critical(tmp_path):
    rules = rules_file(tmp_path, 1)
    assert [r["alert"] for r in control_plane_rules(1, AlertSettings())] == [
        "ControllerApiServerDown"]
    test = {"interval": "1m", "input_series": [_up("c1", "1x5 0x15")], "alert_rule_test": [
        {"eval_time": "15m", "alertname": "ControllerApiServerDown", "exp_alerts": [{
            "exp_labels": {"job": APISERVER_JOB, "node": "c1", "instance": "c1:6443",
                           "severity": "critical"},
            "exp_annotations": {
                "summary": "The API server of controller c1 does not answer",
                "description": "The cluster's only controller: nothing reaches the API. Run "
                               "`gpu-cluster doctor` and look at the controller's "
                               "distribution service."}}]}]}
    _run(tmp_path, rules, [test])


def _run(tmp_path, rules, tests) -> None:
    file = tmp_path / "tests.yml"
    file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m",
                                    "tests": tests}, sort_keys=False))
    assert "SUCCESS" in promtool("test", "rules", str(file))


def test_prometheus_may_read_the_api_servers_metrics_and_nothing_else():
    role, binding = metrics_reader("prometheus", "monitoring", {})
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prometheus",
                                    "namespace": "monitoring"}]
    manifests = monitoring_manifests(MonitoringArgs(
        monitoring=MonitoringSettings(), gpu=GpuSettings(), gpu_nodes=(), gpu_node_taints=(),
        storage_class="nfs", provider=None, depends_on=[], controllers=THREE))
    kinds = [(m["kind"], m["metadata"]["name"]) for m in manifests]
    assert ("ClusterRole", "gpu-cluster-prometheus-apiserver-metrics") in kinds
    [config] = [m for m in manifests if m["kind"] == "ConfigMap"
                and m["metadata"]["name"] == "prometheus"]
    scraped = yaml.safe_load(config["data"]["prometheus.yml"])
    assert APISERVER_JOB in [j["job_name"] for j in scraped["scrape_configs"]]
    rules = yaml.safe_load(config["data"]["gpu-alerts.rules.yml"])
    assert "control-plane" in [g["name"] for g in rules["groups"]]
