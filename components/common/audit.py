"""The API server's audit log (https://kubernetes.io/docs/tasks/debug/debug-cluster/audit/):
its policy, and the rotation both distributions pass to kube-apiserver.

The first rule that matches an event decides its level ("Audit policy": "the first matching
rule sets the audit level of the event"), so the order below matters:
- None for the noisy read-only traffic of the system's own components (kube-proxy's
  watches, the nodes' and controllers' reads, health checks), as the example policy of that
  page does;
- Metadata (who, what, when; never the body) for Secrets, ConfigMaps and tokens: their
  bodies are the secrets themselves;
- RequestResponse for RBAC changes: who granted what to whom, in full;
- Metadata for everything else."""

import yaml

# kube-apiserver flags (https://kubernetes.io/docs/reference/command-line-tools-reference/
# kube-apiserver/): days to keep, files to keep, megabytes per file. 30/10/100 are the
# values CIS Kubernetes Benchmark 1.2.17-1.2.19 asks for.
ROTATION = {"audit-log-maxage": "30", "audit-log-maxbackup": "10", "audit-log-maxsize": "100"}

_READS = ["get", "list", "watch"]
_WRITES = ["create", "update", "patch", "delete", "deletecollection"]


def policy() -> str:
    """The audit.k8s.io/v1 Policy."""
    rules = [
        # kube-proxy watching endpoints and services (the page's example policy, first rule).
        {"level": "None", "users": ["system:kube-proxy"], "verbs": ["watch"],
         "resources": [{"group": "", "resources": ["endpoints", "services", "services/status"]},
                       {"group": "discovery.k8s.io", "resources": ["endpointslices"]}]},
        # Nodes and the control plane's own components reading what they run on.
        {"level": "None", "userGroups": ["system:nodes"], "verbs": _READS},
        {"level": "None", "users": ["system:kube-scheduler", "system:kube-controller-manager",
                                    "system:apiserver"], "verbs": _READS},
        # Leader election and node heartbeats: leases, written every few seconds.
        {"level": "None", "resources": [{"group": "coordination.k8s.io",
                                         "resources": ["leases"]}]},
        # Health and discovery endpoints.
        {"level": "None", "nonResourceURLs": ["/healthz*", "/livez*", "/readyz*", "/version",
                                              "/openapi*", "/api*", "/metrics"]},
        # Bodies of these are secrets: metadata only, whoever asks.
        {"level": "Metadata", "resources": [
            {"group": "", "resources": ["secrets", "configmaps", "serviceaccounts/token"]},
            {"group": "authentication.k8s.io", "resources": ["tokenreviews"]},
            {"group": "certificates.k8s.io", "resources": ["certificatesigningrequests"]}]},
        # Changes of who may do what, with their bodies.
        {"level": "RequestResponse", "verbs": _WRITES, "resources": [
            {"group": "rbac.authorization.k8s.io",
             "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"]}]},
        {"level": "Metadata"},
    ]
    document = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                # No RequestReceived stage: each request is logged once, when answered.
                "omitStages": ["RequestReceived"], "rules": rules}
    return yaml.safe_dump(document, sort_keys=False)
