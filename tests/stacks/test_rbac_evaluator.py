"""The offline RBAC evaluator (tests/rbac.py) against Kubernetes' own cases: the
aggregation controller's TestSyncClusterRole (pkg/controller/clusterroleaggregation/
clusterroleaggregation_controller_test.go) and the matching rules of
pkg/apis/rbac/v1/evaluation_helpers.go, so the access tests rest on Kubernetes' semantics."""

import pytest

from tests.rbac import Rbac, Request, aggregate, rule_allows

HAMMER = [{"verbs": ["hammer"], "resources": ["nails"]},
          {"verbs": ["hammer"], "resources": ["wedges"]}]
CHISEL = [{"verbs": ["chisel"], "resources": ["mortises"]}]
SAW = [{"verbs": ["saw"], "resources": ["boards"]}]


def role(name: str, labels: dict, rules: list) -> dict:
    return {"kind": "ClusterRole", "metadata": {"name": name, "labels": labels}, "rules": rules}


def combined(selectors: list[dict], rules: list = ()) -> dict:
    return {"kind": "ClusterRole", "metadata": {"name": "combined"}, "rules": list(rules),
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": s} for s in selectors]}}


def rules(*groups: list) -> list:
    return [{"apiGroups": [], "resources": r["resources"], "resourceNames": [],
             "nonResourceURLs": [], "verbs": r["verbs"]} for group in groups for r in group]


# Kubernetes' TestSyncClusterRole cases, with the rules they expect "combined" to end with.
AGGREGATION_CASES = [
    ("remove dead rules", [role("hammer", {"foo": "bar"}, HAMMER),
                           combined([{"foo": "bar"}], SAW)], rules(HAMMER)),
    ("strip rules", [role("hammer", {"foo": "not-bar"}, HAMMER),
                     combined([{"foo": "bar"}], HAMMER)], []),
    ("select properly and put in order",
     [role("hammer", {"foo": "bar"}, HAMMER), role("chisel", {"foo": "bar"}, CHISEL),
      role("saw", {"foo": "not-bar"}, SAW), combined([{"foo": "bar"}])],
     rules(CHISEL, HAMMER)),
    ("select properly with multiple selectors",
     [role("hammer", {"foo": "bar"}, HAMMER), role("chisel", {"foo": "bar"}, CHISEL),
      role("saw", {"foo": "not-bar"}, SAW), combined([{"foo": "bar"}, {"foo": "not-bar"}])],
     rules(CHISEL, HAMMER, SAW)),
    ("select properly remove duplicates",
     [role("hammer", {"foo": "bar"}, HAMMER), role("chisel", {"foo": "bar"}, CHISEL),
      role("saw", {"foo": "bar"}, SAW), role("other-saw", {"foo": "not-bar"}, SAW),
      combined([{"foo": "bar"}, {"foo": "not-bar"}])],
     rules(CHISEL, HAMMER, SAW)),
]


@pytest.mark.parametrize("roles, expected", [c[1:] for c in AGGREGATION_CASES],
                         ids=[c[0] for c in AGGREGATION_CASES])
def test_aggregation_matches_the_controller(roles, expected):
    assert aggregate(roles)["combined"]["rules"] == expected


def test_aggregation_follows_chains_to_a_fixed_point_as_the_requeue_does():
    roles = aggregate([
        {"kind": "ClusterRole", "metadata": {"name": "a-top"},
         "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to": "top"}}]}},
        {"kind": "ClusterRole", "metadata": {"name": "b-middle", "labels": {"to": "top"}},
         "aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [
             {"key": "to", "operator": "In", "values": ["middle"]}]}]}},
        role("c-leaf", {"to": "middle"}, SAW),
    ])
    assert roles["a-top"]["rules"] == roles["b-middle"]["rules"] == rules(SAW)


def rule(**fields) -> dict:
    return {"apiGroups": [""], "resources": [], "verbs": [], **fields}


@pytest.mark.parametrize("the_rule, request_, allowed", [
    (rule(verbs=["*"], resources=["pods"]), Request("create", resource="pods"), True),
    (rule(verbs=["get"], resources=["pods"]), Request("create", resource="pods"), False),
    (rule(verbs=["get"], resources=["pods"], apiGroups=["apps"]),
     Request("get", resource="pods"), False),
    (rule(verbs=["get"], resources=["pods"], apiGroups=["*"]),
     Request("get", group="apps", resource="pods"), True),
    # A subresource needs "resource/subresource" or "*/subresource", never the bare resource.
    (rule(verbs=["get"], resources=["pods"]),
     Request("get", resource="pods", subresource="log"), False),
    (rule(verbs=["get"], resources=["pods/log"]),
     Request("get", resource="pods", subresource="log"), True),
    (rule(verbs=["get"], resources=["*/log"]),
     Request("get", resource="nodes", subresource="log"), True),
    (rule(verbs=["get"], resources=["*/log"]), Request("get", resource="log"), False),
    (rule(verbs=["get"], resources=["*"]),
     Request("get", resource="pods", subresource="exec"), True),
    (rule(verbs=["get"], resources=["pods"], resourceNames=["a"]),
     Request("get", resource="pods", name="b"), False),
    (rule(verbs=["get"], resources=["pods"], resourceNames=["a"]),
     Request("get", resource="pods", name="a"), True),
    (rule(verbs=["get"], resources=["pods"], resourceNames=["a"]),
     Request("list", resource="pods"), False),
    ({"nonResourceURLs": ["/healthz/*"], "verbs": ["get"]},
     Request("get", path="/healthz/etcd"), True),
    ({"nonResourceURLs": ["/healthz"], "verbs": ["get"]}, Request("get", path="/livez"), False),
])
def test_rule_matching_follows_the_evaluation_helpers(the_rule, request_, allowed):
    assert rule_allows(request_, the_rule) is allowed


def test_role_bindings_grant_only_in_their_namespace_and_to_their_subjects():
    rbac = Rbac.of([
        role("pod-reader", {}, [rule(verbs=["get"], resources=["pods"])]),
        {"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "vision"},
         "roleRef": {"kind": "ClusterRole", "name": "pod-reader"},
         "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "team"},
                      {"kind": "ServiceAccount", "name": "runner"}]},
    ])
    get_pods = Request("get", resource="pods", namespace="vision")
    assert rbac.allowed("alice", get_pods)
    assert rbac.allowed("carol", get_pods, groups=["team"])
    assert rbac.allowed("system:serviceaccount:vision:runner", get_pods)
    assert not rbac.allowed("system:serviceaccount:nlp:runner", get_pods)
    assert not rbac.allowed("bob", get_pods)
    assert not rbac.allowed("alice", Request("get", resource="pods", namespace="nlp"))
    assert not rbac.allowed("alice", Request("get", resource="pods"))  # cluster-wide
