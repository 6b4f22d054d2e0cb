"""Prometheus alert rules for the GPUs: XID errors (by who causes them), uncorrectable ECC
errors and failed row remapping, heat, an exporter that is down, and nodes offering fewer
GPUs than the stack configures for them (generated from hosts[].gpus and pools[].gpus)."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from config.hosts import Host, WorkerPool
from config.model import GpuSettings
from config.monitoring import AlertSettings
from contract.names import POOL_LABEL

RULES_FILE = "gpu-alerts.rules.yml"
DCGM_JOB = "dcgm-exporter"
KUBE_STATE_METRICS_JOB = "kube-state-metrics"
# kube-state-metrics writes a node label allowed by --metric-labels-allowlist as
# label_<name with every other character as _> (kube-state-metrics docs/metrics/cluster/node-metrics.md).
POOL_METRIC_LABEL = "label_" + "".join(c if c.isalnum() else "_" for c in POOL_LABEL)
# NVIDIA's XID catalog, what each code means and what to do.
XID_CATALOG = "https://docs.nvidia.com/deploy/xid-errors/"
# DCGM_EXP_XID_ERRORS_COUNT (dcgm-exporter 4.5.3-4.8.2 internal/pkg/collector/
# xid_collector.go:39-75, expcollector.go:39-109): per GPU, one series per XID seen in the
# last window (label `xid`, value how many times), or one series at 0 without `xid`. A
# series of an XID goes away once the window has passed it, so its alert resolves then.
XID_WINDOW_MINUTES = 5
# Raised by a program's own fault, not the GPU's: 13 graphics engine exception, 31 GPU
# memory page fault, 43 GPU stopped processing, 45 preemptive cleanup (NVIDIA's XID
# catalog, "Xid Error Listing": only "User App Error" among their causes, or none other
# than a driver error; the Ampere+ catalog's immediate action for them is RESTART_APP).
APPLICATION_XIDS = (13, 31, 43, 45)
# The GPU or its board: 48 double-bit ECC error, 63 and 64 row remapping / page retirement
# recorded and failed, 74 NVLink error, 79 fallen off the bus, 92 high single-bit ECC rate,
# 94 and 95 contained and uncontained ECC errors (the same catalog: "HW Error", and the
# actions RESET_GPU, RESTART_BM or CONTACT_SUPPORT).
HARDWARE_XIDS = (48, 63, 64, 74, 79, 92, 94, 95)


@dataclass(frozen=True)
class GpuNodeGroup:
    """Nodes that should offer `gpus` GPUs each: one host (by node name) or a pool's nodes."""

    gpus: int
    node: Optional[str] = None
    pool: Optional[str] = None

    @property
    def selector(self) -> str:
        if self.node is not None:
            return f'kube_node_info{{node="{self.node}"}}'
        return f'kube_node_labels{{{POOL_METRIC_LABEL}="{self.pool}"}}'

    @property
    def name(self) -> str:
        return f"host {self.node}" if self.node is not None else f"pool {self.pool}"

    @property
    def config_key(self) -> str:
        """The key that gives the GPUs, as an alert label (one rule per group)."""
        return f"hosts[{self.node}].gpus" if self.node is not None else f"pools[{self.pool}].gpus"


def gpu_node_groups(hosts: Iterable[Host], pools: Iterable[WorkerPool]) -> tuple[GpuNodeGroup, ...]:
    """The hosts that run workloads with GPUs, and the pools with GPUs, in config order."""
    return (tuple(GpuNodeGroup(host.gpus, node=host.name) for host in hosts
                  if host.gpus and host.runs_workloads)
            + tuple(GpuNodeGroup(pool.gpus, pool=pool.name) for pool in pools if pool.gpus))


def expected_allocatable(gpus: int, gpu: GpuSettings) -> Optional[int]:
    """nvidia.com/gpu a node with `gpus` GPUs offers: each GPU time-sliced into
    `timeSlicingReplicas` (k8s-device-plugin README, "Shared Access to GPUs"); with the
    single MIG strategy at least one per GPU; None with mixed, which offers
    nvidia.com/mig-<profile> resources instead (README, "MIG support")."""
    if gpu.mig_strategy == "mixed":
        return None
    if gpu.mig_strategy == "single":
        return gpus
    return gpus * gpu.time_slicing_replicas


def _alert(name: str, expr: str, severity: str, summary: str, description: str,
           for_minutes: int = 0) -> dict:
    rule = {"alert": name, "expr": expr}
    if for_minutes:
        rule["for"] = f"{for_minutes}m"
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def _xids(codes: tuple[int, ...]) -> str:
    return "|".join(map(str, codes))


def xid_rules(gpu: str) -> list[dict]:
    """On the XIDs of the exporter's last window, never on the gauge of the last XID, which
    stays up for ever after one (NVIDIA/dcgm-exporter#500, NVIDIA/DCGM#162). Each alert
    carries the `xid` label; it resolves when the window holds no new one."""
    count = "DCGM_EXP_XID_ERRORS_COUNT"
    seen = (f"{gpu} reported XID {{{{ $labels.xid }}}} {{{{ $value }}}} time(s) in "
            f"{XID_WINDOW_MINUTES} minutes")
    return [
        _alert("GpuXidHardwareError", f'{count}{{xid=~"{_xids(HARDWARE_XIDS)}"}} > 0',
               "critical", seen,
               "The XID points at the GPU or its board (ECC, row remapping, NVLink, off the "
               "bus): drain the node, then reset the GPU or reboot as "
               f"{XID_CATALOG} says for it; if it comes back, have the board checked."),
        _alert("GpuXidError",
               f'{count}{{xid!~"{_xids(APPLICATION_XIDS + HARDWARE_XIDS)}"}} > 0',
               "warning", seen,
               f"Look the XID up in {XID_CATALOG} and follow its action (often: drain the "
               "node, reset the GPU or reboot)."),
        _alert("GpuXidApplicationError", f'{count}{{xid=~"{_xids(APPLICATION_XIDS)}"}} > 0',
               "info", seen,
               "Usually a program's own fault (an illegal memory access, a page fault, a "
               "killed context): tell the job's owner. The same XID on one GPU while the "
               "same program runs well elsewhere points at the GPU."),
    ]


def gpu_health_rules(alerts: AlertSettings) -> list[dict]:
    gpu = "GPU {{ $labels.gpu }} ({{ $labels.modelName }}) on {{ $labels.Hostname }}"
    wait = alerts.for_minutes
    return [
        *xid_rules(gpu),
        _alert("GpuEccUncorrectableErrors",
               "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[15m]) > 0", "critical",
               f"{gpu} had uncorrectable (double-bit) ECC errors",
               "Uncorrectable memory errors kill the processes using the GPU. Drain the node "
               "and reset the GPU; repeated errors mean the board needs replacing."),
        _alert("GpuRowRemapFailure", "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", "critical",
               f"{gpu} failed to remap a memory row",
               "The GPU ran out of spare memory rows: drain the node and have the board "
               "replaced."),
        _alert("GpuTemperatureHigh",
               f"DCGM_FI_DEV_GPU_TEMP > {alerts.gpu_temperature_celsius}", "warning",
               f"{gpu} is at {{{{ $value }}}} C",
               f"Above {alerts.gpu_temperature_celsius} C for {wait} minutes: check the "
               "fans, airflow and the room's cooling.", wait),
        _alert("GpuThermalThrottling",
               "rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) > 0", "warning",
               f"{gpu} is slowed down by heat",
               "The GPU lowers its clocks to stay within its temperature limit: jobs run "
               "slower. Check the cooling.", wait),
        _alert("GpuExporterDown", f'up{{job="{DCGM_JOB}"}} == 0', "warning",
               "The DCGM exporter on {{ $labels.node }} does not answer",
               "Its GPUs are not watched: `kubectl -n kube-system logs -l "
               "app.kubernetes.io/name=dcgm-exporter` on that node.", wait),
    ]


def allocatable_rules(groups: Iterable[GpuNodeGroup], gpu: GpuSettings,
                      alerts: AlertSettings) -> list[dict]:
    """One rule per group: its nodes whose allocatable nvidia.com/gpu is below what the
    config says, or missing (no device plugin, a GPU the driver lost)."""
    rules = []
    for group in groups:
        expected = expected_allocatable(group.gpus, gpu)
        if expected is None:
            continue
        expr = (f"count by (node) ({group.selector}) * {expected} unless on (node) "
                f'(kube_node_status_allocatable{{resource="nvidia_com_gpu"}} >= {expected})')
        rules.append(_alert(
            "GpusMissingFromAllocatable", expr, "critical",
            f"Node {{{{ $labels.node }}}} ({group.name}) offers fewer than {expected} "
            "nvidia.com/gpu",
            f"The config gives it {group.gpus} GPUs. Check the device plugin's pod on the "
            "node and `nvidia-smi` there; a GPU that fell off the bus needs a reboot.",
            alerts.for_minutes))
        rules[-1]["labels"]["config_key"] = group.config_key
    return rules


def alert_rules(groups: Iterable[GpuNodeGroup], gpu: GpuSettings,
                alerts: AlertSettings) -> dict:
    """The rules file Prometheus loads."""
    rule_groups = [{"name": "gpu-health", "rules": gpu_health_rules(alerts)}]
    allocatable = allocatable_rules(groups, gpu, alerts)
    if allocatable:
        rule_groups.append({"name": "gpu-allocatable", "rules": allocatable})
    return {"groups": rule_groups}
