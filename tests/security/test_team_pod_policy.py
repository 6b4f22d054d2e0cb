"""The teams' ValidatingAdmissionPolicy, its expressions run by a CEL engine (PyPI
common-expression-language) on representative pods, as the API server runs each validation
with `object` and `request` bound (https://kubernetes.io/docs/reference/access-authn-authz/
validating-admission-policy/#validation-expression); the binding selects the teams'
namespaces as the stacks label them."""

import pytest

from components.access.queues import TEAM_LABEL
from components.access.team_policy import CONTROLLER_TAINT_KEYS, POLICY_NAME
from components.distributions.rke2 import SERVER_ONLY_TAINT
from preview.stack_file import EXAMPLE_STACKS
from tests.builders import bare_metal_config, example_plan, shared_preview

cel = pytest.importorskip("cel", reason="common-expression-language is not installed "
                                        "(requirements-dev.txt)")

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "vision"},
       "spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}


def _pod_policy(plan) -> dict:
    """The pod policy and its binding, by kind (the NetworkPolicy guard has its own name)."""
    return {r.inputs["kind"]: r.inputs for r in plan.resources
            if r.type.startswith("kubernetes:admissionregistration.k8s.io/v1:")
            and POLICY_NAME in (r.inputs["metadata"]["name"],
                                r.inputs.get("spec", {}).get("policyName"))}


@pytest.fixture(scope="module")
def policy_objects():
    values = bare_metal_config(workers=1)
    values["access"] = {"teams": [{"name": "vision"}, {"name": "nlp",
                                                       "podSecurity": "baseline"}]}
    plan = shared_preview(values)
    found = _pod_policy(plan)
    namespaces = [r.inputs for r in plan.resources if r.type == "kubernetes:core/v1:Namespace"]
    return found, namespaces


def refusals(policy_objects, spec_changes: dict, operation: str = "CREATE") -> list[str]:
    """The messages of the validations that refuse the pod (empty: admitted)."""
    found, _ = policy_objects
    pod = {**POD, "spec": {**POD["spec"], **spec_changes}}
    context = {"object": pod, "oldObject": None,
               "request": {"operation": operation, "namespace": "vision"}}
    return [v["message"] for v in found["ValidatingAdmissionPolicy"]["spec"]["validations"]
            if cel.evaluate(v["expression"], context) is not True]


CASES = {
    "plain pod": ({}, "CREATE", 0),
    "claim of the storage class": ({"volumes": [{"name": "d", "persistentVolumeClaim": {
        "claimName": "data"}}]}, "CREATE", 0),
    "inline nfs volume": ({"volumes": [{"name": "d", "emptyDir": {}}, {"name": "x", "nfs": {
        "server": "192.168.2.1", "path": "/srv/nfs"}}]}, "CREATE", 1),
    "inline nfs volume, on update": ({"volumes": [{"name": "x", "nfs": {
        "server": "192.168.2.1", "path": "/"}}]}, "UPDATE", 1),
    "GPU taint toleration": ({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                               "effect": "NoSchedule"}]}, "CREATE", 0),
    "the API server's not-ready toleration": ({"tolerations": [{
        "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
        "tolerationSeconds": 300}]}, "CREATE", 0),
    "tolerates CriticalAddonsOnly": ({"tolerations": [{"key": "CriticalAddonsOnly",
                                                       "operator": "Exists"}]}, "CREATE", 1),
    "tolerates the control-plane taint": ({"tolerations": [{
        "key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
        "effect": "NoSchedule"}]}, "CREATE", 1),
    "tolerates every taint": ({"tolerations": [{"operator": "Exists"}]}, "CREATE", 1),
    "adds a controller toleration later": ({"tolerations": [{
        "key": "CriticalAddonsOnly", "operator": "Exists"}]}, "UPDATE", 1),
    "names its node": ({"nodeName": "controller"}, "CREATE", 1),
    "scheduled pod updated": ({"nodeName": "gpu000"}, "UPDATE", 0),
}


@pytest.mark.parametrize("case", CASES)
def test_the_team_policy_refuses_what_it_should_and_nothing_else(policy_objects, case):
    changes, operation, expected = CASES[case]
    assert len(refusals(policy_objects, changes, operation)) == expected, case


def test_the_policy_denies_and_binds_to_every_team_namespace_whatever_its_level(policy_objects):
    found, namespaces = policy_objects
    policy, binding = found["ValidatingAdmissionPolicy"], found["ValidatingAdmissionPolicyBinding"]
    assert policy["metadata"]["name"] == binding["spec"]["policyName"] == POLICY_NAME
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"]["validationActions"] == ["Deny"]
    [expression] = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert expression == {"key": TEAM_LABEL, "operator": "Exists"}
    teams = {n["metadata"]["name"]: n["metadata"]["labels"] for n in namespaces
             if TEAM_LABEL in n["metadata"].get("labels", {})}
    # The baseline team is bound too: baseline admits nfs volumes, the policy does not.
    assert set(teams) == {"vision", "nlp"}
    assert teams["nlp"]["pod-security.kubernetes.io/enforce"] == "baseline"
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [{"apiGroups": [""], "apiVersions": ["v1"],
                      "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]


def test_the_controllers_taints_are_those_the_policy_refuses_tolerating():
    # RKE2's server-only taint (components/distributions/rke2.py); k0s taints a controller
    # that runs a kubelet node-role.kubernetes.io/control-plane (k0s docs/worker-node-config.md)
    # and runs none on a plain controller (docs/architecture/index.md).
    assert SERVER_ONLY_TAINT.split("=")[0] in CONTROLLER_TAINT_KEYS
    assert "node-role.kubernetes.io/control-plane" in CONTROLLER_TAINT_KEYS


def _rke2_with_teams():
    values = bare_metal_config(workers=1)
    values["kubernetes"] = {"distribution": "rke2"}
    values["access"] = {"teams": [{"name": "vision"}]}
    return shared_preview(values)


PLANS = {**{stack: (lambda stack=stack: example_plan(stack)) for stack in EXAMPLE_STACKS},
         "rke2 bare metal with a team": _rke2_with_teams}


@pytest.mark.parametrize("stack", PLANS)
def test_no_team_pod_can_land_on_a_controller(stack):
    """A k0s controller runs no kubelet (K0S_ENABLE_WORKER false: k0s
    docs/architecture/index.md, "no container engine or kubelet running on controllers")
    but on the AWS layouts, where it runs one with k0s's control-plane taint
    (K0S_CONTROL_PLANE_TAINT, v1.36.3+k0s.2 cmd/controller/controller.go:721-730); an RKE2
    server runs one, tainted CriticalAddonsOnly. The team policy refuses to let a team's pod
    tolerate either taint."""
    plan = PLANS[stack]()
    texts = [r.inputs["stdin"] for r in plan.resources
             if r.name.endswith("install-controller") and "stdin" in r.inputs]
    stdin = "\n".join(t["value"] if isinstance(t, dict) else t for t in texts)
    assert stdin, stack
    if "K0S_ENABLE_WORKER=" in stdin:
        if "K0S_ENABLE_WORKER='false'" in stdin:
            return
        assert "K0S_CONTROL_PLANE_TAINT='true'" in stdin
        toleration = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                      "effect": "NoSchedule"}
    else:
        assert f"- {SERVER_ONLY_TAINT}" in stdin
        key, rest = SERVER_ONLY_TAINT.split("=")
        value, effect = rest.split(":")
        toleration = {"key": key, "operator": "Equal", "value": value, "effect": effect}
    found = _pod_policy(plan)
    if "ValidatingAdmissionPolicy" not in found:
        # No team: no team pod to keep off it.
        assert not [r for r in plan.resources if r.type == "kubernetes:core/v1:Namespace"
                    and TEAM_LABEL in r.inputs["metadata"].get("labels", {})], stack
        return
    pod = {**POD, "spec": {**POD["spec"], "tolerations": [toleration]}}
    context = {"object": pod, "request": {"operation": "CREATE"}}
    validations = found["ValidatingAdmissionPolicy"]["spec"]["validations"]
    assert any(cel.evaluate(v["expression"], context) is False for v in validations), stack


def test_each_team_s_acceptance_mpijob_passes_the_team_policy(policy_objects):
    """The pods of the teams' acceptance MPIJobs (lab's two teams; prod's, whose GPU hosts
    are tainted, so its pods carry tolerations) pass every validation of the policy."""
    from acceptance import render
    from tests.acceptance.cases import CASES, settings_of

    checked = 0
    for case in ("lab", "prod"):
        for file, objects in render(settings_of(CASES[case])).items():
            for job in (o for o in objects if file.startswith("mpijob-team-")):
                for role, replica in job["spec"]["mpiReplicaSpecs"].items():
                    spec = replica["template"]["spec"]
                    assert refusals(policy_objects, spec) == [], (case, file, role)
                    checked += 1
    assert checked == 6  # lab's two teams, prod's one: launcher and worker each
