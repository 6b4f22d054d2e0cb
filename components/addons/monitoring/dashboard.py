"""The GPU dashboard Grafana is provisioned with: Grafana's dashboard JSON model
(grafana.com/docs/grafana/latest/dashboards/build-dashboards/view-dashboard-json-model/),
one time series or table per concern, over the DCGM exporter's metrics."""

import json

from components.addons.monitoring.rules import XID_WINDOW_MINUTES

DATASOURCE_UID = "prometheus"
DASHBOARD_UID = "gpu-cluster-gpus"
DASHBOARD_FILE = "gpus.json"
# Every series of a node: the exporter's own Hostname label (the node's name).
NODE = 'Hostname=~"$node"'
LEGEND = "{{Hostname}} GPU {{gpu}}"

# (title, PromQL, legend, unit, kind): Grafana's unit ids (percent, celsius, watt, ...) from
# packages/grafana-data/src/valueFormats/categories.ts.
PANELS = (
    ("GPU utilisation", f"DCGM_FI_DEV_GPU_UTIL{{{NODE}}}", LEGEND, "percent", "timeseries"),
    ("Framebuffer memory used",
     f"DCGM_FI_DEV_FB_USED{{{NODE}}} / (DCGM_FI_DEV_FB_USED{{{NODE}}} + "
     f"DCGM_FI_DEV_FB_FREE{{{NODE}}} + DCGM_FI_DEV_FB_RESERVED{{{NODE}}})",
     LEGEND, "percentunit", "timeseries"),
    ("GPU temperature", f"DCGM_FI_DEV_GPU_TEMP{{{NODE}}}", LEGEND, "celsius", "timeseries"),
    ("Memory temperature", f"DCGM_FI_DEV_MEMORY_TEMP{{{NODE}}}", LEGEND, "celsius",
     "timeseries"),
    ("Power draw", f"DCGM_FI_DEV_POWER_USAGE{{{NODE}}}", LEGEND, "watt", "timeseries"),
    ("NVLink bandwidth", f"rate(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{{NODE}}}[5m])", LEGEND,
     "Bps", "timeseries"),
    # The exporter's windowed count, as the XID alerts read it (rules.py): the gauge
    # DCGM_FI_DEV_XID_ERRORS keeps a GPU's last XID for ever (NVIDIA/dcgm-exporter#500).
    (f"XID errors (last {XID_WINDOW_MINUTES} minutes)",
     f"DCGM_EXP_XID_ERRORS_COUNT{{{NODE}}} > 0", LEGEND + " XID {{xid}}", "none", "table"),
    ("Uncorrectable ECC errors (1h)",
     f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{NODE}}}[1h])", LEGEND, "none", "timeseries"),
    ("Thermal throttling", f"rate(DCGM_FI_DEV_THERMAL_VIOLATION{{{NODE}}}[5m]) / 1e9", LEGEND,
     "percentunit", "timeseries"),
    ("Allocatable GPUs per node",
     'kube_node_status_allocatable{resource="nvidia_com_gpu", node=~"$node"}', "{{node}}",
     "none", "timeseries"),
    ("Firing GPU alerts", 'ALERTS{alertstate="firing"}', "{{alertname}}", "none", "table"),
)
PANEL_WIDTH, PANEL_HEIGHT = 12, 8


def _datasource() -> dict:
    return {"type": "prometheus", "uid": DATASOURCE_UID}


def _panel(number: int, title: str, expr: str, legend: str, unit: str, kind: str) -> dict:
    target = {"refId": "A", "datasource": _datasource(), "expr": expr,
              "legendFormat": legend}
    if kind == "table":
        target.update(instant=True, format="table")
    return {
        "id": number + 1,
        "type": kind,
        "title": title,
        "datasource": _datasource(),
        "gridPos": {"x": (number % 2) * PANEL_WIDTH, "y": (number // 2) * PANEL_HEIGHT,
                    "w": PANEL_WIDTH, "h": PANEL_HEIGHT},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [target],
    }


def gpu_dashboard() -> dict:
    return {
        "uid": DASHBOARD_UID,
        "title": "GPUs",
        "description": "NVIDIA GPUs of the cluster, from the DCGM exporter and "
                       "kube-state-metrics (gpu-cluster's monitoring add-on).",
        "tags": ["gpu", "dcgm", "gpu-cluster"],
        "timezone": "browser",
        "editable": False,
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{
            "name": "node",
            "label": "Node",
            "type": "query",
            "datasource": _datasource(),
            "query": {"query": "label_values(DCGM_FI_DEV_GPU_UTIL, Hostname)",
                      "refId": "node"},
            "refresh": 2,
            "includeAll": True,
            "multi": True,
            "allValue": ".*",
            "current": {"text": "All", "value": "$__all"},
        }]},
        "panels": [_panel(number, *panel) for number, panel in enumerate(PANELS)],
    }


def dashboard_json() -> str:
    return json.dumps(gpu_dashboard(), indent=2, sort_keys=True) + "\n"
