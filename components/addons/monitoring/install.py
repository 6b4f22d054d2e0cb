"""The monitoring add-on as one component: the objects of manifests.py and grafana.py
through the cluster's provider, Grafana's admin password a random secret of the stack,
and the address users open."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.common import kube
from components.addons.monitoring.control_plane import apiserver_job, control_plane_rules
from components.addons.monitoring.grafana import grafana
from components.addons.monitoring.manifests import (
    GRAFANA_SECRET,
    dcgm_exporter,
    kube_state_metrics,
    prometheus,
)
from components.addons.monitoring.rules import GpuNodeGroup, alert_rules
from config.hosts import Taint
from config.model import GpuSettings
from config.monitoring import MonitoringSettings
from contract import ports

# 24 random bytes: 48 hex characters, safe in any form Grafana's login takes.
PASSWORD_BYTES = 24


@dataclass(frozen=True, kw_only=True)
class MonitoringArgs:
    monitoring: MonitoringSettings
    gpu: GpuSettings
    # Nodes the config gives GPUs, and how many each (gpu_node_groups).
    gpu_nodes: Sequence[GpuNodeGroup]
    # The taints of the nodes with GPUs (gpu_node_taints), which the exporter tolerates.
    gpu_node_taints: Sequence[Taint]
    # Prometheus' volume: monitoring.storageClass, else the stack's default StorageClass.
    storage_class: str
    provider: k8s.Provider
    # The StorageClass the volume is claimed on (the add-ons' provider waits for the nodes).
    depends_on: list
    # nodePort: the addresses of the configured hosts that run workloads.
    workload_addresses: Sequence[str] = ()
    # aws.adminCidrs: who may reach a load balancer when sourceRanges is empty.
    admin_cidrs: Sequence[str] = ()
    # The controllers, (name, address) each, whose API servers Prometheus scrapes at
    # kubernetes.apiPort.
    controllers: Sequence[tuple[str, str]] = ()
    api_port: int = ports.KUBERNETES_API


def namespace_manifest(name: str) -> dict:
    # Every pod here meets the restricted standard; the API refuses any that does not
    # (kubernetes.io/docs/concepts/security/pod-security-admission/#pod-security-levels).
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted"}}}


def monitoring_manifests(args: MonitoringArgs) -> list[dict]:
    """Every object but Grafana's password Secret."""
    monitoring = args.monitoring
    access = monitoring.grafana.access
    if access.mode == "loadBalancer" and not (access.source_ranges or args.admin_cidrs):
        # Never a load balancer open to the world (an empty loadBalancerSourceRanges).
        raise ValueError("a loadBalancer without sourceRanges needs aws.adminCidrs")
    rules = alert_rules(args.gpu_nodes, args.gpu, monitoring.alerts)
    apiservers = None
    if args.controllers:
        rules["groups"].append({"name": "control-plane", "rules": control_plane_rules(
            len(args.controllers), monitoring.alerts)})
        apiservers = apiserver_job(args.controllers, args.api_port)
    return [
        namespace_manifest(monitoring.namespace),
        *dcgm_exporter(args.gpu_node_taints),
        *kube_state_metrics(monitoring.namespace),
        *prometheus(monitoring, rules, args.storage_class, apiservers),
        *grafana(monitoring, args.admin_cidrs),
    ]


class Monitoring(pulumi.ComponentResource):
    url: Optional[str]
    admin_password: pulumi.Output[str]

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:addons:Monitoring", name, None, opts)
        monitoring = args.monitoring
        opts = kube.k8s_provider_opts(args.provider, self, args.depends_on)
        namespace, *rest = monitoring_manifests(args)
        created = [kube.apply(namespace, opts)]
        password = random.RandomBytes(f"{name}-grafana-admin-password", length=PASSWORD_BYTES,
                                      opts=pulumi.ResourceOptions(parent=self))
        self.admin_password = pulumi.Output.secret(password.hex)
        # Before Grafana, which reads it at start.
        created.append(kube.apply(
            {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": GRAFANA_SECRET, "namespace": monitoring.namespace},
             "stringData": {"password": self.admin_password}},
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=created))))
        after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=created))
        self.resources = created + [kube.apply(manifest, after) for manifest in rest]
        self.url = monitoring.grafana.access.url(list(args.workload_addresses))
        self.register_outputs({"url": self.url})
