"""`gpu-cluster:monitoring`: the GPU monitoring add-on (DCGM exporter, Prometheus,
kube-state-metrics, Grafana with the GPU dashboard and alerts), on by default, and how
Grafana is reached. Rules that span sections (layout, aws.adminCidrs) are below."""

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field

from config.access import RESERVED_NAMESPACES
from config.model_base import Section
from config.partial import PartialConfig
from config.problems import Problem
from config.storage import STORAGE_CLASS_NAMES, StorageSettings
from config.types import DnsLabel, HostOrIp, IPv4Cidr, Port



def _pattern(regex: str, example: str):
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"'{value}' is not {example}")
        return value
    return AfterValidator(check)


# Prometheus' <duration> ([0-9]+(ms|[smhdwy]), prometheus/common model/time.go ParseDuration),
# in the units that make sense for each key.
ScrapeInterval = Annotated[str, _pattern(r"[1-9][0-9]{0,3}(s|m)", "an interval like 30s or 1m")]
Retention = Annotated[str, _pattern(r"[1-9][0-9]{0,4}(h|d|w)", "a retention like 15d, 72h or 4w")]
Size = Annotated[str, _pattern(r"[1-9][0-9]{0,5}(Mi|Gi|Ti)", "a size like 20Gi")]

GrafanaAccessMode = Literal["portForward", "nodePort", "loadBalancer"]


class GrafanaAccess(Section):
    """How Grafana is reached."""

    # portForward: `kubectl port-forward` with the admin kubeconfig, from any machine that
    # reaches the API (every layout); nodePort: every node on `nodePort`; loadBalancer: a
    # Service of type LoadBalancer (AWS layouts).
    mode: GrafanaAccessMode = "portForward"
    """`portForward` (`kubectl port-forward` with the admin kubeconfig; every layout), `nodePort` or
    `loadBalancer` (hybrid, cloud)."""
    # portForward: the local port in the URL (`kubectl port-forward ... <port>:80`).
    port: Port = 3000
    """The local port in `grafanaUrl` (`portForward`)."""
    node_port: int = Field(default=31300, ge=30000, le=32767)
    """Grafana's node port (`nodePort`)."""
    # loadBalancer: who may connect (default: gpu-cluster:aws.adminCidrs).
    source_ranges: list[IPv4Cidr] = []
    """Who may reach the load balancer; default: `aws.adminCidrs`."""
    # The name users type (a DNS name pointing at the nodes or the load balancer);
    # required with loadBalancer, and with nodePort on cloud.
    hostname: Optional[HostOrIp] = None
    """The name in `grafanaUrl` (required with `loadBalancer`, and with `nodePort` on cloud)."""

    def url(self, workload_addresses: list[str]) -> Optional[str]:
        """The address users open, or None when it is not known in advance."""
        if self.mode == "portForward":
            return f"http://localhost:{self.port}/"
        host = self.hostname or (workload_addresses[0] if self.mode == "nodePort"
                                 and workload_addresses else None)
        if host is None:
            return None
        return f"http://{host}:{self.node_port}/" if self.mode == "nodePort" else f"http://{host}/"


class GrafanaSettings(Section):
    access: GrafanaAccess = GrafanaAccess()
    """How Grafana is reached."""


class AlertSettings(Section):
    # GPU temperature (DCGM_FI_DEV_GPU_TEMP) above which GpuTemperatureHigh fires; data
    # centre GPUs slow down near 85-90 C (their slowdown temperature, `nvidia-smi -q -d
    # TEMPERATURE`).
    gpu_temperature_celsius: int = Field(default=85, ge=40, le=120)
    """`GpuTemperatureHigh` fires above this GPU temperature."""
    # How long a condition lasts before its alert fires.
    for_minutes: int = Field(default=5, ge=0, le=1440)
    """How long a lasting condition (heat, missing GPUs, an exporter down) holds before its alert
    fires."""


class MonitoringSettings(Section):
    enabled: bool = True
    """The monitoring add-on (see [Monitoring](monitoring.md#monitoring)): DCGM exporter,
    kube-state-metrics, Prometheus, Grafana."""
    namespace: DnsLabel = "monitoring"
    """The namespace of Prometheus, kube-state-metrics and Grafana (the exporter runs in
    `kube-system`)."""
    # How often Prometheus scrapes the exporters.
    scrape_interval: ScrapeInterval = "30s"
    """How often Prometheus scrapes and evaluates the alerts (`15s`, `1m`)."""
    # How long Prometheus keeps samples.
    retention: Retention = "15d"
    """How long Prometheus keeps samples (`72h`, `15d`, `4w`)."""
    # Prometheus' volume; none uses the stack's default StorageClass.
    storage_class: Optional[DnsLabel] = None
    """The StorageClass of Prometheus' volume; default: the stack's default StorageClass."""
    storage_size: Size = "20Gi"
    """The size of Prometheus' volume."""
    grafana: GrafanaSettings = GrafanaSettings()
    """Grafana's settings."""
    alerts: AlertSettings = AlertSettings()
    """The GPU alerts' thresholds."""


def monitoring_checks(cfg: PartialConfig) -> list[Problem]:
    monitoring = cfg.monitoring
    if monitoring is None or not monitoring.enabled:
        return []
    access, layout = monitoring.grafana.access, cfg.layout
    key = "monitoring.grafana.access"
    problems = []
    if access.mode == "loadBalancer":
        if layout not in ("hybrid", "cloud"):
            problems.append(Problem(f"{key}.mode", f"loadBalancer needs an AWS layout (hybrid "
                                    f"or cloud), not {layout}; use nodePort or portForward"))
        if access.hostname is None:
            problems.append(Problem(f"{key}.hostname", "is required with loadBalancer: the "
                                    "DNS name users open, pointing at the load balancer"))
    elif access.mode == "nodePort" and layout == "cloud" and access.hostname is None:
        problems.append(Problem(f"{key}.hostname", "is required with nodePort on cloud: pool "
                                "nodes have no fixed addresses; a DNS name resolving to them"))
    if access.mode != "loadBalancer" and access.source_ranges:
        problems.append(Problem(f"{key}.sourceRanges", "is only used with loadBalancer"))
    namespace = monitoring.namespace
    teams = [team.name for team in cfg.access.teams] if cfg.access is not None else []
    if namespace in teams:
        problems.append(Problem("monitoring.namespace", f"'{namespace}' is also the namespace "
                                f"of team access.teams[{teams.index(namespace)}]; its quota "
                                "would hold Prometheus and Grafana: name one of them otherwise"))
    elif namespace in RESERVED_NAMESPACES or namespace.startswith("kube-"):
        problems.append(Problem("monitoring.namespace", f"'{namespace}' is a namespace of "
                                "Kubernetes or of what the program installs"))
    storage = cfg.storage
    if (monitoring.storage_class is not None and storage is not None
            and monitoring.storage_class not in _class_names(storage)):
        problems.append(Problem("monitoring.storageClass", f"'{monitoring.storage_class}' is "
                                "not a StorageClass of this stack (storage: "
                                f"{', '.join(sorted(_class_names(storage)))})"))
    return problems


def _class_names(storage: StorageSettings) -> set[str]:
    return {STORAGE_CLASS_NAMES[name] for name in storage.backends}
