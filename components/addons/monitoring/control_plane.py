"""Prometheus watching the controllers: each controller's API server scraped at its own
address, and the alerts on them.

- A static target per controller, named by its host: the config knows every controller,
  and a target that stops answering stays listed with `up` 0. The `kubernetes` Endpoints
  would drop it instead (the API servers' lease reconciler removes an endpoint whose server
  stopped renewing: kube-apiserver --endpoint-reconciler-type, default "lease"), and
  Prometheus would see one fewer target, not a controller down.
- Read with Prometheus' own service account token, which may GET /metrics and nothing else
  (a ClusterRole with nonResourceURLs; kubernetes.io/docs/reference/access-authn-authz/
  rbac/#role-and-clusterrole), over TLS checked with the cluster CA its pod has: each
  controller's certificate names its own address (ControlPlaneEndpoint.sans).
- One controller's API down is a warning while etcd keeps its majority (the others serve
  the cluster); with one controller, or below the majority, it is critical."""

from collections.abc import Sequence

from config.kubernetes import etcd_majority
from config.monitoring import AlertSettings

APISERVER_JOB = "kubernetes-apiservers"
# Where the kubelet mounts a pod's service account token and the cluster CA
# (kubernetes.io/docs/tasks/run-application/access-api-from-pod/).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def apiserver_job(controllers: Sequence[tuple[str, str]], api_port: int,
                  account_dir: str = SERVICE_ACCOUNT_DIR) -> dict:
    """The scrape job of the controllers' API servers, (name, address) each, with the
    token and CA of `account_dir`."""
    return {"job_name": APISERVER_JOB, "scheme": "https",
            "authorization": {"credentials_file": f"{account_dir}/token"},
            "tls_config": {"ca_file": f"{account_dir}/ca.crt"},
            "static_configs": [{"targets": [f"{address}:{api_port}"], "labels": {"node": name}}
                               for name, address in controllers]}


def metrics_reader(account: str, namespace: str, labels: dict) -> list[dict]:
    """What lets `account` GET the API servers' /metrics, and nothing else."""
    name = f"gpu-cluster-{account}-apiserver-metrics"
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name, "labels": labels},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
    ]


def control_plane_rules(controllers: int, alerts: AlertSettings) -> list[dict]:
    """A controller whose API server does not answer; with several, fewer answering than
    etcd's majority."""
    several = controllers > 1
    rules = [{
        "alert": "ControllerApiServerDown",
        "expr": f'up{{job="{APISERVER_JOB}"}} == 0',
        "for": f"{alerts.for_minutes}m",
        "labels": {"severity": "warning" if several else "critical"},
        "annotations": {
            "summary": "The API server of controller {{ $labels.node }} does not answer",
            "description": (
                f"The other controllers serve the cluster while {etcd_majority(controllers)} "
                f"of {controllers} are up. Run `gpu-cluster doctor` and look at the "
                "controller's distribution service." if several else
                "The cluster's only controller: nothing reaches the API. Run `gpu-cluster "
                "doctor` and look at the controller's distribution service.")}}]
    if several:
        majority = etcd_majority(controllers)
        rules.append({
            "alert": "ControlPlaneMajorityDown",
            "expr": f'(count(up{{job="{APISERVER_JOB}"}} == 1) or vector(0)) < {majority}',
            "for": f"{alerts.for_minutes}m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"Fewer than {majority} of {controllers} controllers' API servers "
                           "answer",
                "description": "etcd needs a majority of its members to accept writes: the "
                               "cluster cannot change until enough controllers are back "
                               "(docs/day-2.md, Restoring the control plane)."}})
    return rules
