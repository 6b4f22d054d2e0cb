"""Who may use a team's Kubeflow profile: each `access.users` entry with an email, in the
teams of its `namespaces`, with its role, as a Kubeflow contributor managed by hand
(kubeflow/website content/en/docs/components/central-dash/profiles.md, "Manage Contributors
Manually": a RoleBinding and an Istio AuthorizationPolicy named and annotated as KFAM's).
A user removed from config loses both with the next `pulumi up`.

A team's Profile is owned by an identity of its own that no login gives (an address under
`.invalid`, RFC 2606 section 2): nobody can add contributors from the dashboard (only the
owner may), so config is the whole list, and no login owns every profile."""

import re

from config.access import Team, User

# The profile controller's and KFAM's settings (kubeflow/manifests 26.03
# applications/profiles/upstream/manager/kustomization.yaml:9-13).
USERID_HEADER = "kubeflow-userid"
GATEWAY_PRINCIPAL = "cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account"
PIPELINES_UI_PRINCIPAL = "cluster.local/ns/kubeflow/sa/ml-pipeline-ui"
# The config's roles as KFAM's (kubeflow/dashboard v2.0.0 components/access-management/kfam/
# bindings.go:40-45: admin, edit and view name ClusterRoles kubeflow-admin/-edit/-view).
KUBEFLOW_ROLES = {"admin": "admin", "edit": "edit", "view": "view"}
OWNER_DOMAIN = "profiles.gpu-cluster.invalid"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-cluster"}


def profile_owner(team: str) -> str:
    """The owner of the team's Profile: no Dex user or connector can log in as it."""
    return f"{team}@{OWNER_DOMAIN}"


def binding_name(email: str, role: str) -> str:
    """KFAM's name for a contributor's objects (bindings.go getBindingName): user-<email with
    every run of other characters than letters and digits as '-', lower case>-clusterrole-
    <role>."""
    return re.sub(r"[^a-z0-9]+", "-", f"user-{email}-clusterrole-{role}".lower())


def contributors(team: Team, users: list[User]) -> list[tuple[User, str]]:
    """The users of `team` who log in to Kubeflow, with their Kubeflow role."""
    return [(user, KUBEFLOW_ROLES[user.role]) for user in users
            if user.email and team.name in user.namespaces]


def contributor_objects(team: Team, users: list[User]) -> list[dict]:
    """Per contributor of the team: the RoleBinding and the AuthorizationPolicy KFAM would
    make (bindings.go Create, :79-155), labelled with the user like their other bindings."""
    objects = []
    for user, role in contributors(team, users):
        metadata = {"name": binding_name(user.email, role), "namespace": team.name,
                    "labels": {**MANAGED_BY, "gpu-cluster/user": user.name},
                    "annotations": {"user": user.email, "role": role}}
        objects.append({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": f"kubeflow-{role}"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": user.email}]})
        objects.append({
            "apiVersion": "security.istio.io/v1beta1", "kind": "AuthorizationPolicy",
            "metadata": dict(metadata),
            "spec": {"rules": [{
                "from": [{"source": {"principals": [GATEWAY_PRINCIPAL,
                                                    PIPELINES_UI_PRINCIPAL]}}],
                "when": [{"key": f"request.headers[{USERID_HEADER}]",
                          "values": [user.email]}]}]}})
    return objects
