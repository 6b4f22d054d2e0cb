"""What Pod Security levels do not cover in the teams' namespaces, refused by a
ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.30+:
https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/) bound
to every namespace carrying the team label:

- an inline `nfs:` volume, which baseline admits (pod-security-admission policy/
  check_restrictedVolumes.go lists nfs under restricted only): it would mount the shared
  export as root and read every team's claims and the add-ons' databases;
- a way onto a controller: tolerating the taints that keep workloads off it, or naming a
  node (spec.nodeName skips the scheduler, so NoSchedule taints are not checked:
  https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename).

A second policy (network_policy_guard) keeps NetworkPolicies in those namespaces the cluster
admins': a team's own would add to what the storage egress policy allows
(components/access/storage_egress.py).

Team users cannot change their namespace's labels (namespaces are cluster-scoped; Kubernetes'
admin/edit roles grant no write on them), so they cannot step out of the binding."""

from components.access.queues import TEAM_LABEL

POLICY_NAME = "gpu-cluster-team-pods"
# The taints controllers carry: Kubernetes' control-plane role taint (and its old name), which
# k0s sets on a controller that also runs a kubelet (docs/worker-node-config.md), and
# CriticalAddonsOnly, the taint RKE2's docs put on servers that run no workloads
# (docs/install/ha.md). Critical add-ons in kube-system tolerate them; a team's pod may not.
CONTROLLER_TAINT_KEYS = ("node-role.kubernetes.io/control-plane",
                         "node-role.kubernetes.io/master", "CriticalAddonsOnly")


def _cel_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


# Each: (CEL expression over the pod, the message a refused request gets).
VALIDATIONS = (
    ("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.nfs))",
     "inline nfs volumes are refused in team namespaces: use a PersistentVolumeClaim of "
     "the cluster's storage class"),
    # A toleration without a key (operator Exists) tolerates every taint.
    ("!has(object.spec.tolerations) || object.spec.tolerations.all(t, has(t.key) && "
     f"t.key != '' && !(t.key in {_cel_list(CONTROLLER_TAINT_KEYS)}))",
     "team pods may not tolerate the controllers' taints (" + ", ".join(CONTROLLER_TAINT_KEYS)
     + ") nor every taint (a toleration without a key)"),
    # Only at creation: the scheduler's binding sets nodeName on every scheduled pod, and
    # later updates of that pod carry it.
    ("request.operation != 'CREATE' || !has(object.spec.nodeName) || "
     "object.spec.nodeName == ''",
     "team pods are placed by the scheduler: spec.nodeName may not be set"),
)


def team_pod_policy(labels: dict[str, str]) -> list[dict]:
    """The policy and its binding (Deny) to the namespaces labelled TEAM_LABEL."""
    return _denied_in_team_namespaces(
        POLICY_NAME, labels,
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["pods"]},
        [{"expression": expression, "message": message, "reason": "Forbidden"}
         for expression, message in VALIDATIONS])


def _denied_in_team_namespaces(name: str, labels: dict[str, str], rule: dict,
                               validations: list[dict]) -> list[dict]:
    """A ValidatingAdmissionPolicy `name` over the requests of `rule` (closed: an error
    refuses), and its binding that denies what it refuses in the namespaces labelled
    TEAM_LABEL."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [rule]},
            "validations": validations,
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchExpressions": [
                {"key": TEAM_LABEL, "operator": "Exists"}]}},
        },
    }
    return [policy, binding]


GUARD_NAME = "gpu-cluster-team-network-policies"
# The verb each operation is authorized as (kubernetes.io/docs/reference/using-api/
# api-concepts: create, update, delete; a deletecollection is admitted item by item as DELETE).
_VERBS = "{'CREATE': 'create', 'UPDATE': 'update', 'DELETE': 'delete'}[request.operation]"
# Allowed to whoever holds the verb on NetworkPolicies in every namespace (a check without
# .namespace() is cluster-wide, which a RoleBinding never grants): cluster admins, the
# namespace controller, the program's own system:masters identity. Not a team's edit or admin
# role, which Kubernetes gives NetworkPolicy writes in the namespace (bootstrappolicy
# policy.go, system:aggregate-to-edit). `authorizer`: https://kubernetes.io/docs/reference/
# access-authn-authz/validating-admission-policy/#authorization-check
GUARD_EXPRESSION = ("authorizer.group('networking.k8s.io').resource('networkpolicies')"
                    f".check({_VERBS}).allowed()")
GUARD_MESSAGE = ("NetworkPolicies in team namespaces are the cluster admins': the namespace's "
                 "gpu-cluster-storage-egress policy keeps its pods off the shared storage's "
                 "servers, and NetworkPolicies add up, so a team's own policy could open them")


def network_policy_guard(labels: dict[str, str]) -> list[dict]:
    """A policy and binding (Deny) refusing team users' writes of NetworkPolicies in the
    namespaces labelled TEAM_LABEL: creating, changing or deleting one."""
    return _denied_in_team_namespaces(
        GUARD_NAME, labels,
        {"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"],
         "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["networkpolicies"]},
        [{"expression": GUARD_EXPRESSION, "message": GUARD_MESSAGE, "reason": "Forbidden"}])
