"""The API server's audit policy, judged as kube-apiserver does: the first rule that matches a
request sets its level (k8s.io/apiserver pkg/audit/policy/checker.go, ruleMatches: users,
userGroups, verbs, resources by group, nonResourceURLs with a trailing `*` as prefix), on
representative requests; and both distributions start the API server with it and its
rotation. kubernetes-validate has no schema for audit.k8s.io/v1 Policy (it is no served
API), so the fields are checked against the types of k8s.io/apiserver pkg/apis/audit/v1
(types.go: Policy, PolicyRule, GroupResources) here."""

import fnmatch
from typing import Optional

import pytest
import yaml

from components.common import audit
from components.distributions.k0s_api import AUDIT_LOG_FILE as K0S_LOG, AUDIT_POLICY_FILE as K0S_POLICY
from components.distributions.rke2 import AUDIT_POLICY_FILE as RKE2_POLICY
from tests.builders import example_plan

POLICY_FIELDS = {"apiVersion", "kind", "rules", "omitStages", "omitManagedFields"}
RULE_FIELDS = {"level", "users", "userGroups", "verbs", "resources", "namespaces",
               "nonResourceURLs", "omitStages", "omitManagedFields"}
GROUP_RESOURCE_FIELDS = {"group", "resources", "resourceNames"}
LEVELS = {"None", "Metadata", "Request", "RequestResponse"}


def level(policy: dict, user: str, verb: str, groups: tuple[str, ...] = (),
          group: Optional[str] = None, resource: Optional[str] = None,
          path: Optional[str] = None) -> str:
    for rule in policy["rules"]:
        if "users" in rule and user not in rule["users"]:
            continue
        if "userGroups" in rule and not set(groups) & set(rule["userGroups"]):
            continue
        if "verbs" in rule and verb not in rule["verbs"]:
            continue
        if path is not None:
            if "resources" in rule or "nonResourceURLs" not in rule:
                if "resources" in rule:
                    continue
            elif not any(fnmatch.fnmatchcase(path, pattern) for pattern in rule["nonResourceURLs"]):
                continue
        else:
            if "nonResourceURLs" in rule:
                continue
            if "resources" in rule and not any(
                    g.get("group", "") == group and resource in g.get("resources", [resource])
                    for g in rule["resources"]):
                continue
        return rule["level"]
    return "None"


@pytest.fixture(scope="module")
def policy() -> dict:
    return yaml.safe_load(audit.policy())


def test_the_policy_uses_only_audit_v1_fields(policy):
    assert policy["apiVersion"] == "audit.k8s.io/v1" and policy["kind"] == "Policy"
    assert set(policy) <= POLICY_FIELDS
    for rule in policy["rules"]:
        assert set(rule) <= RULE_FIELDS and rule["level"] in LEVELS
        for group in rule.get("resources", []):
            assert set(group) <= GROUP_RESOURCE_FIELDS


REQUESTS = [
    # Secrets, ConfigMaps and tokens: metadata only, whoever asks, even an admin's write.
    (("alice", "get", (), "", "secrets"), "Metadata"),
    (("admin", "create", ("system:masters",), "", "secrets"), "Metadata"),
    (("alice", "list", (), "", "configmaps"), "Metadata"),
    (("system:serviceaccount:vision:default", "create", (), "", "serviceaccounts/token"),
     "Metadata"),
    (("system:node:gpu01", "get", ("system:nodes",), "", "secrets"), "None"),
    # RBAC changes with their bodies; reading RBAC is metadata.
    (("admin", "create", ("system:masters",), "rbac.authorization.k8s.io", "rolebindings"),
     "RequestResponse"),
    (("alice", "patch", (), "rbac.authorization.k8s.io", "clusterroles"), "RequestResponse"),
    (("alice", "get", (), "rbac.authorization.k8s.io", "roles"), "Metadata"),
    # Noisy read-only system traffic.
    (("system:kube-proxy", "watch", (), "discovery.k8s.io", "endpointslices"), "None"),
    (("system:kube-scheduler", "list", (), "", "pods"), "None"),
    (("system:node:gpu01", "update", ("system:nodes",), "coordination.k8s.io", "leases"), "None"),
    # A team user's pods and jobs.
    (("alice", "create", (), "", "pods"), "Metadata"),
    (("alice", "delete", (), "kubeflow.org", "mpijobs"), "Metadata"),
    (("system:kube-scheduler", "create", (), "", "pods/binding"), "Metadata"),
]


@pytest.mark.parametrize("request_,expected", REQUESTS, ids=[
    f"{r[0][0]}-{r[0][1]}-{r[0][4]}" for r in REQUESTS])
def test_each_request_is_logged_at_its_level(policy, request_, expected):
    user, verb, groups, group, resource = request_
    assert level(policy, user, verb, groups, group, resource) == expected


def test_health_checks_are_not_logged(policy):
    assert level(policy, "system:anonymous", "get", path="/readyz") == "None"
    assert level(policy, "system:anonymous", "get", path="/livez/etcd") == "None"
    assert level(policy, "alice", "get", path="/logs") == "Metadata"


def test_each_request_is_logged_once_when_answered(policy):
    assert policy["omitStages"] == ["RequestReceived"]


def controller_stdin(stack: str) -> str:
    """What the controller's install step gets on stdin (a secret: the value inside)."""
    texts = [r.inputs["stdin"] for r in example_plan(stack).resources
             if r.name.endswith("install-controller") and "stdin" in r.inputs]
    assert texts, stack
    return "\n".join(t["value"] if isinstance(t, dict) else t for t in texts)


def test_k0s_starts_the_api_server_with_the_policy_and_rotation():
    stdin = controller_stdin("lab")
    for flag, value in {"audit-policy-file": K0S_POLICY, "audit-log-path": K0S_LOG,
                        **audit.ROTATION}.items():
        assert f"{flag}: " in stdin and value in stdin, flag
    assert audit.policy().splitlines()[0] in stdin


def test_rke2_starts_the_api_server_with_the_policy_and_rotation():
    stdin = controller_stdin("rke2")
    assert f"audit-policy-file: {RKE2_POLICY}" in stdin
    for flag, value in audit.ROTATION.items():
        assert f"- {flag}={value}" in stdin
    assert "pod-security-admission-config-file: /etc/rancher/rke2/gpu-cluster-pss.yaml" in stdin
