"""Grafana, provisioned from files (grafana.com/docs/grafana/latest/administration/
provisioning/): the Prometheus data source and the GPU dashboard; its admin password a
Secret the program makes; its Service as `monitoring.grafana.access` says."""

from collections.abc import Sequence

import yaml

from components.addons.monitoring.dashboard import DASHBOARD_FILE, DATASOURCE_UID, dashboard_json
from components.addons.monitoring.manifests import (
    GRAFANA_PORT,
    GRAFANA_SECRET,
    GRAFANA_SERVICE,
    PROMETHEUS_PORT,
    RESTRICTED,
    _checksum,
    _labels,
    _meta,
    _selector,
    pod_security,
)
from config import versions
from config.monitoring import MonitoringSettings

DASHBOARDS_DIR = "/var/lib/grafana/dashboards/gpu-cluster"
# The admin password, a file from the Secret GRAFANA_SECRET.
SECRETS_DIR = "/etc/grafana/secrets"


def datasources(namespace: str) -> dict:
    return {"apiVersion": 1, "datasources": [{
        "name": "Prometheus", "uid": DATASOURCE_UID, "type": "prometheus",
        "access": "proxy", "isDefault": True, "editable": False,
        "url": f"http://prometheus.{namespace}.svc:{PROMETHEUS_PORT}",
    }]}


def dashboard_providers() -> dict:
    return {"apiVersion": 1, "providers": [{
        "name": "gpu-cluster", "folder": "GPU cluster", "type": "file",
        "disableDeletion": True, "allowUiUpdates": False,
        "options": {"path": DASHBOARDS_DIR},
    }]}


def grafana_service(monitoring: MonitoringSettings, source_ranges: Sequence[str]) -> dict:
    access = monitoring.grafana.access
    port = {"name": "http", "port": 80, "targetPort": "http"}
    spec: dict = {"selector": _selector("grafana"), "ports": [port]}
    if access.mode == "nodePort":
        spec["type"] = "NodePort"
        port["nodePort"] = access.node_port
    elif access.mode == "loadBalancer":
        spec["type"] = "LoadBalancer"
        spec["loadBalancerSourceRanges"] = list(access.source_ranges or source_ranges)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(GRAFANA_SERVICE, monitoring.namespace), "spec": spec}


def grafana(monitoring: MonitoringSettings, source_ranges: Sequence[str]) -> list[dict]:
    """Every object but the password's Secret (made from a resource's output)."""
    namespace, name = monitoring.namespace, "grafana"
    provisioning = {
        "datasources.yaml": yaml.safe_dump(datasources(namespace), sort_keys=False),
        "dashboards.yaml": yaml.safe_dump(dashboard_providers(), sort_keys=False),
    }
    dashboard = dashboard_json()
    env = {
        # No calls home: the cluster may have no way out (grafana.com/docs/grafana/latest/
        # setup-grafana/configure-grafana/#analytics).
        "GF_ANALYTICS_REPORTING_ENABLED": "false",
        "GF_ANALYTICS_CHECK_FOR_UPDATES": "false",
        "GF_ANALYTICS_CHECK_FOR_PLUGIN_UPDATES": "false",
        "GF_USERS_ALLOW_SIGN_UP": "false",
        "GF_AUTH_ANONYMOUS_ENABLED": "false",
        "GF_SECURITY_ADMIN_USER": "admin",
        "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH": f"{DASHBOARDS_DIR}/{DASHBOARD_FILE}",
    }
    container = {
        "name": name,
        "image": versions.GRAFANA_IMAGE,
        # The password as a file, never in the environment: the image's entrypoint reads
        # GF_<SECTION>_<KEY>__FILE (grafana/grafana packaging/docker/run.sh; Grafana docs,
        # "Configure a Grafana Docker image", Docker secrets).
        "env": [{"name": key, "value": value} for key, value in env.items()] + [
            {"name": "GF_SECURITY_ADMIN_PASSWORD__FILE",
             "value": f"{SECRETS_DIR}/password"}],
        "ports": [{"name": "http", "containerPort": GRAFANA_PORT}],
        "securityContext": RESTRICTED,
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                      "limits": {"memory": "512Mi"}},
        "readinessProbe": {"httpGet": {"path": "/api/health", "port": GRAFANA_PORT}},
        # The upstream chart's: a first start migrates its database for a while.
        "livenessProbe": {"httpGet": {"path": "/api/health", "port": GRAFANA_PORT},
                          "initialDelaySeconds": 60, "timeoutSeconds": 30,
                          "failureThreshold": 10},
        "volumeMounts": [
            {"name": "admin-password", "mountPath": SECRETS_DIR, "readOnly": True},
            {"name": "provisioning", "mountPath": "/etc/grafana/provisioning/datasources/"
             "datasources.yaml", "subPath": "datasources.yaml", "readOnly": True},
            {"name": "provisioning", "mountPath": "/etc/grafana/provisioning/dashboards/"
             "dashboards.yaml", "subPath": "dashboards.yaml", "readOnly": True},
            {"name": "dashboards", "mountPath": DASHBOARDS_DIR, "readOnly": True},
            # Grafana's database (users, preferences): the dashboards and the data source
            # come back from the files on every start.
            {"name": "data", "mountPath": "/var/lib/grafana"},
        ],
    }
    return [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": _meta(f"{name}-provisioning", namespace), "data": provisioning},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(f"{name}-dashboards", namespace),
         "data": {DASHBOARD_FILE: dashboard}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, namespace),
         "spec": {
             "replicas": 1,
             "selector": {"matchLabels": _selector(name)},
             "template": {
                 "metadata": {"labels": _labels(name),
                              "annotations": _checksum(*provisioning.values(), dashboard)},
                 "spec": {
                     # The image's grafana user (grafana-community/helm-charts
                     # charts/grafana/values.yaml securityContext).
                     "securityContext": pod_security(472, owns_volumes=True),
                     "automountServiceAccountToken": False,
                     "containers": [container],
                     "volumes": [
                         {"name": "provisioning", "configMap": {"name": f"{name}-provisioning"}},
                         {"name": "dashboards", "configMap": {"name": f"{name}-dashboards"}},
                         {"name": "data", "emptyDir": {}},
                         # Readable by the pod's fsGroup (the grafana user's group) only.
                         {"name": "admin-password", "secret": {
                             "secretName": GRAFANA_SECRET, "defaultMode": 0o440}},
                     ],
                 },
             },
         }},
        grafana_service(monitoring, source_ranges),
    ]
