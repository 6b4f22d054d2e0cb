"""The monitoring add-on's files through the tools that read them: Prometheus' promtool
(config, rules, and the alerts run on synthetic series), Grafana's dashboard model
(grafana-foundation-sdk), and the exporter's counters file behind every panel."""

import csv
import json
import re
import subprocess

import pytest
import yaml

from components.addons.monitoring.dashboard import PANELS, gpu_dashboard
from components.addons.monitoring.manifests import COUNTERS, prometheus_config
from components.addons.monitoring.rules import GpuNodeGroup, alert_rules
from config.model import GpuSettings
from config.monitoring import AlertSettings, MonitoringSettings
from tests.builders import require_tool

# Runs a program beyond Python and bash (moto's server, promtool, curl, shellcheck):
# not in `make quick`.
pytestmark = pytest.mark.tools

GROUPS = (GpuNodeGroup(4, node="moscow"), GpuNodeGroup(8, pool="h100"))


def exported_metrics() -> set[str]:
    """What the exporter's -f file makes it export (DCGM field name = metric name; the
    `label` rows become labels, not series)."""
    rows = [line for line in COUNTERS.read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return {row[0].strip() for row in csv.reader(rows) if row[1].strip() != "label"}


def write_rules(tmp_path, groups=GROUPS, gpu=GpuSettings(), alerts=AlertSettings()):
    rules = tmp_path / "gpu-alerts.rules.yml"
    rules.write_text(yaml.safe_dump(alert_rules(groups, gpu, alerts), sort_keys=False))
    return rules


def test_prometheus_config_and_rules_pass_promtool(tmp_path):
    promtool = require_tool("promtool")
    write_rules(tmp_path)
    config = prometheus_config(MonitoringSettings(), rules_dir=str(tmp_path))
    # Debian's promtool is built without the Kubernetes service discovery ("field
    # kubernetes_sd_configs not found"): the same jobs with file discovery in its place;
    # the Kubernetes blocks are compared with what they must say.
    for job in config["scrape_configs"]:
        targets = tmp_path / f"{job['job_name']}.json"
        targets.write_text("[]")
        job["file_sd_configs"] = [{"files": [str(targets)]}]
        assert job.pop("kubernetes_sd_configs") == [
            {"role": "pod", "namespaces": {"names": [job_namespace(job["job_name"])]}}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # The rules file was found and read with it.
    assert "SUCCESS: 10 rules found" in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


def job_namespace(job: str) -> str:
    return {"dcgm-exporter": "kube-system", "kube-state-metrics": "monitoring"}[job]


def test_rules_pass_promtool_check_rules_without_duplicates(tmp_path):
    promtool = require_tool("promtool")
    result = subprocess.run([promtool, "check", "rules", str(write_rules(tmp_path))],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 10 rules found" in result.stdout


# promtool test rules: each alert fires on a sick series and stays quiet on a healthy one.
# GPU 0 is healthy, GPU 1 sick; series as the DCGM exporter labels them.
GPU = 'Hostname="moscow", gpu="{n}", modelName="NVIDIA A100", node="moscow"'
ALERT_TESTS = {
    "GpuEccUncorrectableErrors": [
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "3x20", "0x10 1x10"),
    ],
    "GpuRowRemapFailure": [
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "0x20", "0x10 1x10"),
    ],
    "GpuTemperatureHigh": [
        ("DCGM_FI_DEV_GPU_TEMP", "84x20", "70x5 92x15"),
    ],
    "GpuThermalThrottling": [
        ("DCGM_FI_DEV_THERMAL_VIOLATION", "0x20", "0x5 0+60000000000x15"),
    ],
}


def _rendered(rule: dict, labels: dict, value: str) -> dict:
    """The rule's annotations with its templates filled in, as Prometheus fills them."""
    def fill(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m[1]], text)
        return text.replace("{{ $value }}", value)
    return {key: fill(text) for key, text in rule["annotations"].items()}


def _unit_test(alert: str, series: list, rule: dict, labels: dict, value: str) -> dict:
    input_series = []
    for metric, healthy, sick in series:
        input_series.append({"series": f"{metric}{{{GPU.format(n=0)}}}", "values": healthy})
        input_series.append({"series": f"{metric}{{{GPU.format(n=1)}}}", "values": sick})
    return {"interval": "1m", "input_series": input_series, "alert_rule_test": [
        {"eval_time": "5m", "alertname": alert, "exp_alerts": []},
        {"eval_time": "20m", "alertname": alert, "exp_alerts": [
            {"exp_labels": labels, "exp_annotations": _rendered(rule, labels, value)}]},
    ]}


def test_gpu_alerts_fire_on_sick_gpus_only(tmp_path):
    promtool = require_tool("promtool")
    rules = write_rules(tmp_path)
    by_name = {rule["alert"]: rule for group in yaml.safe_load(rules.read_text())["groups"]
               for rule in group["rules"]}
    values = {"GpuTemperatureHigh": "92"}
    tests = []
    for alert, series in ALERT_TESTS.items():
        rule = by_name[alert]
        labels = {"Hostname": "moscow", "gpu": "1", "modelName": "NVIDIA A100",
                  "node": "moscow", **rule["labels"]}
        tests.append(_unit_test(alert, series, rule, labels, values.get(alert, "")))
    down = {"job": "dcgm-exporter", "node": "madrid", "severity": "warning"}
    exporter_down = {"interval": "1m", "input_series": [
        {"series": 'up{job="dcgm-exporter", node="moscow"}', "values": "1x20"},
        {"series": 'up{job="dcgm-exporter", node="madrid"}', "values": "1x5 0x15"},
    ], "alert_rule_test": [
        {"eval_time": "5m", "alertname": "GpuExporterDown", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "GpuExporterDown", "exp_alerts": [{
            "exp_labels": down,
            "exp_annotations": _rendered(by_name["GpuExporterDown"], down, "0")}]},
    ]}
    # The severities docs/monitoring.md tells apart.
    assert {name: rule["labels"]["severity"] for name, rule in by_name.items()} == {
        "GpuXidHardwareError": "critical", "GpuXidError": "warning",
        "GpuXidApplicationError": "info", "GpuEccUncorrectableErrors": "critical",
        "GpuRowRemapFailure": "critical", "GpuTemperatureHigh": "warning",
        "GpuThermalThrottling": "warning", "GpuExporterDown": "warning",
        "GpusMissingFromAllocatable": "critical"}
    run_unit_tests(promtool, tmp_path, rules, tests + [exporter_down])


# As the exporter writes them (dcgm-exporter 4.5.3-4.8.2 expcollector.go:83-105): per GPU,
# one series per XID of the last window, or one at 0 without `xid`; a series that leaves
# the scrape is marked stale by Prometheus (promtool: `stale`).
WINDOW = 'window_size_in_ms="300000"'


def _xid_series(n: int, xid: int, first: int) -> list[dict]:
    """GPU n reports `xid` once at minute `first`; the window holds it for 5 minutes. The
    last-XID gauge keeps it for ever, as DCGM does."""
    gpu = GPU.format(n=n)
    return [
        {"series": f"DCGM_FI_DEV_XID_ERRORS{{{gpu}}}", "values": f"0x{first - 1} {xid}x{40 - first}"},
        {"series": f"DCGM_EXP_XID_ERRORS_COUNT{{{gpu}, {WINDOW}}}",
         "values": f"0x{first - 1} stale _x4 0x{35 - first}"},
        {"series": f'DCGM_EXP_XID_ERRORS_COUNT{{{gpu}, {WINDOW}, xid="{xid}"}}',
         "values": f"_x{first} 1x4 stale"},
    ]


def test_xid_alerts_fire_on_a_new_xid_and_resolve_when_none_comes(tmp_path):
    """GPU 1 falls off the bus (XID 79) at minute 10, GPU 2 runs a faulty program (XID 13)
    at minute 20, GPU 3 reports XID 119 at minute 20, GPU 0 stays healthy. Each alert fires
    at its XID, with its severity, and is gone five minutes later though the gauge of the
    last XID still says 79, 13 and 119."""
    promtool = require_tool("promtool")
    rules = write_rules(tmp_path)
    by_name = {rule["alert"]: rule for group in yaml.safe_load(rules.read_text())["groups"]
               for rule in group["rules"]}
    series = [{"series": f"DCGM_FI_DEV_XID_ERRORS{{{GPU.format(n=0)}}}", "values": "0x40"},
              {"series": f"DCGM_EXP_XID_ERRORS_COUNT{{{GPU.format(n=0)}, {WINDOW}}}",
               "values": "0x40"},
              *_xid_series(1, 79, 10), *_xid_series(2, 13, 20), *_xid_series(3, 119, 20)]

    def fired(alert: str, n: int, xid: int) -> dict:
        labels = {"Hostname": "moscow", "gpu": str(n), "modelName": "NVIDIA A100",
                  "node": "moscow", "window_size_in_ms": "300000", "xid": str(xid),
                  **by_name[alert]["labels"]}
        return {"exp_labels": labels, "exp_annotations": _rendered(by_name[alert], labels, "1")}

    def at(minute: int, alert: str, *expected: dict) -> dict:
        return {"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": list(expected)}

    checks = [at(5, name) for name in ("GpuXidHardwareError", "GpuXidError",
                                       "GpuXidApplicationError")]
    checks += [at(12, "GpuXidHardwareError", fired("GpuXidHardwareError", 1, 79)),
               at(12, "GpuXidError"), at(12, "GpuXidApplicationError"),
               at(22, "GpuXidHardwareError"),
               at(22, "GpuXidApplicationError", fired("GpuXidApplicationError", 2, 13)),
               at(22, "GpuXidError", fired("GpuXidError", 3, 119))]
    # No new XID: every alert resolved, the last-XID gauge notwithstanding.
    checks += [at(minute, name) for minute in (30, 39) for name in (
        "GpuXidHardwareError", "GpuXidError", "GpuXidApplicationError")]
    run_unit_tests(promtool, tmp_path, rules, [
        {"interval": "1m", "input_series": series, "alert_rule_test": checks}])


def run_unit_tests(promtool, tmp_path, rules, tests) -> None:
    file = tmp_path / "tests.yml"
    file.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m",
                                    "tests": tests}, sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", str(file)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


ALLOCATABLE = 'kube_node_status_allocatable{{node="{node}", resource="nvidia_com_gpu"}}'


def test_gpus_missing_from_allocatable_fires_per_configured_count(tmp_path):
    """moscow (a host with 4) offers 4, then 3; an h100 pool node (8) offers 8, another
    none at all (no device plugin); a CPU node is never asked."""
    promtool = require_tool("promtool")
    rules = write_rules(tmp_path)
    series = [
        {"series": 'kube_node_info{node="moscow"}', "values": "1x30"},
        {"series": ALLOCATABLE.format(node="moscow"), "values": "4x10 3x20"},
        {"series": 'kube_node_labels{node="ip-10-0-1-5", label_gpu_cluster_pool="h100"}',
         "values": "1x30"},
        {"series": ALLOCATABLE.format(node="ip-10-0-1-5"), "values": "8x30"},
        {"series": 'kube_node_labels{node="ip-10-0-1-6", label_gpu_cluster_pool="h100"}',
         "values": "1x30"},
        {"series": 'kube_node_labels{node="ip-10-0-1-7", label_gpu_cluster_pool="cpu"}',
         "values": "1x30"},
        {"series": 'kube_node_info{node="cpu01"}', "values": "1x30"},
    ]

    def alert(node, key, gpus):
        return {"exp_labels": {"node": node, "severity": "critical", "config_key": key},
                "exp_annotations": {
                    "summary": f"Node {node} ({key.split('[')[0][:-1]} "
                               f"{key[key.index('[') + 1:key.index(']')]}) offers fewer than "
                               f"{gpus} nvidia.com/gpu",
                    "description": f"The config gives it {gpus} GPUs. Check the device "
                                   "plugin's pod on the node and `nvidia-smi` there; a GPU "
                                   "that fell off the bus needs a reboot."}}

    test = {"interval": "1m", "input_series": series, "alert_rule_test": [
        {"eval_time": "9m", "alertname": "GpusMissingFromAllocatable",
         "exp_alerts": [alert("ip-10-0-1-6", "pools[h100].gpus", 8)]},
        {"eval_time": "25m", "alertname": "GpusMissingFromAllocatable",
         "exp_alerts": [alert("moscow", "hosts[moscow].gpus", 4),
                        alert("ip-10-0-1-6", "pools[h100].gpus", 8)]},
    ]}
    run_unit_tests(promtool, tmp_path, rules, [test])


@pytest.mark.parametrize("gpu, expected", [
    (GpuSettings(), ">= 4)"),
    (GpuSettings(time_slicing_replicas=3), ">= 12)"),
    (GpuSettings(mig_strategy="single"), ">= 4)"),
    (GpuSettings(mig_strategy="mixed"), None),
])
def test_allocatable_expectation_follows_sharing_and_mig(gpu, expected):
    groups = alert_rules([GpuNodeGroup(4, node="moscow")], gpu, AlertSettings())["groups"]
    allocatable = [g for g in groups if g["name"] == "gpu-allocatable"]
    if expected is None:
        assert allocatable == []
    else:
        [rule] = allocatable[0]["rules"]
        assert rule["expr"].endswith(expected)


def test_dashboard_loads_as_a_grafana_dashboard_model_without_losing_a_key():
    sdk = pytest.importorskip("grafana_foundation_sdk",
                              reason="pip install -r requirements-dev.txt")
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models import dashboard, prometheus

    assert sdk
    register_default_plugins()
    source = gpu_dashboard()
    model = dashboard.Dashboard.from_json(json.loads(json.dumps(source)))
    assert [panel.type_val for panel in model.panels] == [kind for *_, kind in PANELS]
    for panel in model.panels:
        [target] = panel.targets
        assert isinstance(target, prometheus.Dataquery), panel.title
    # The model keeps every key it knows; one it does not know would be missing here.
    back = json.loads(json.dumps(model, cls=JSONEncoder))
    assert _missing(source, back) == []


def _missing(source, back, path="") -> list[str]:
    if isinstance(source, dict):
        return [f"{path}/{key}" for key in source if key not in back] + [
            missing for key in source if key in back
            for missing in _missing(source[key], back[key], f"{path}/{key}")]
    if isinstance(source, list):
        return [m for i, (a, b) in enumerate(zip(source, back))
                for m in _missing(a, b, f"{path}[{i}]")]
    return [] if source == back else [f"{path}: {source!r} became {back!r}"]


# Metrics the panels may read besides the exporter's: kube-state-metrics' allocatable
# resources and Prometheus' own ALERTS series.
OTHER_METRICS = {"kube_node_status_allocatable", "ALERTS"}
PROMQL_WORDS = {"rate", "increase", "sum", "by", "on", "label_values"}


def test_every_panel_reads_metrics_the_exporter_exports():
    exported = exported_metrics()
    assert {"DCGM_EXP_XID_ERRORS_COUNT", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_GPU_TEMP",
            "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"} <= exported
    used = set()
    for panel in gpu_dashboard()["panels"]:
        for target in panel["targets"]:
            without_strings = re.sub(r'"[^"]*"', "", target["expr"])
            without_ranges = re.sub(r"\[[^\]]*\]", "", without_strings)
            names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?=\s*[{(]|\s*$|\s*[/+*)-])",
                                   without_ranges)) - PROMQL_WORDS
            names = {n for n in names if n.isupper() or n.startswith(("DCGM", "kube_"))}
            assert names, panel["title"]
            assert names <= exported | OTHER_METRICS, (panel["title"], names - exported)
            used |= names
    # Every concern the issue names has its panel.
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP",
            "DCGM_FI_DEV_POWER_USAGE", "DCGM_EXP_XID_ERRORS_COUNT",
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"} <= used
    # XIDs as the alerts count them, in the exporter's window: never the gauge of the last
    # XID, which stays set after one (NVIDIA/dcgm-exporter#500, NVIDIA/DCGM#162).
    assert "DCGM_FI_DEV_XID_ERRORS" not in used


def test_every_alert_reads_metrics_the_exporter_or_kube_state_metrics_exports():
    exported = exported_metrics() | {"kube_node_status_allocatable", "kube_node_info",
                                     "kube_node_labels", "up"}
    for group in alert_rules(GROUPS, GpuSettings(), AlertSettings())["groups"]:
        for rule in group["rules"]:
            names = set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\{", rule["expr"]))
            names |= set(re.findall(r"\b(DCGM_[A-Z0-9_]+)\b", rule["expr"]))
            assert names and names <= exported, (rule["alert"], names - exported)
