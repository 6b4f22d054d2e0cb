"""Team pods cannot speak NFS to the shared storage's servers (the NFS export trusts the uid
a client sends, and a pod's packets leave from its node's address, which the export admits):
each team namespace's NetworkPolicy, evaluated as the spec defines it (tests/security/
netpol.py), refuses a team pod the NFS server's and EFS mount targets' ports and leaves the
API (through the `kubernetes` Service), DNS and everything else as reachable as before; a
team user cannot add a NetworkPolicy that opens them again (the guard's CEL expression run
by a CEL engine, with Kubernetes' authorizer answered from the stack's RBAC objects)."""

import ipaddress

import pytest

from config.cloud import efs_mount_target_addresses
from preview.stack_file import read_stack
from tests.builders import (PROJECT_DIR, bare_metal_config, example_plan, require_tool,
                            shared_preview)
from tests.k8s_tools import validate_strict
from tests.rbac import Rbac, Request, stack_rbac_objects
from tests.security.netpol import Destination, egress_allowed

TEAM_LABEL = "gpu-cluster/team"
TEAM_POD = {"app.kubernetes.io/name": "trainer"}
NFS_PORTS = [(2049, "TCP"), (2049, "UDP"), (111, "TCP"), (111, "UDP"),
             # mountd, lockd and statd take ports rpcbind hands out unless nfs.conf fixes
             # them (rpc.mountd(8), nfs.conf(5)); serve-nfs fixes none.
             (20048, "TCP"), (32767, "UDP"), (45000, "TCP")]


def _rke2_team_nfs_on_a_worker():
    values = bare_metal_config(workers=2)
    values["kubernetes"] = {"distribution": "rke2"}
    values["storage"] = {"nfs": {"host": "gpu001", "path": "/srv/nfs"}}
    values["access"] = {"teams": [{"name": "vision"}]}
    return shared_preview(values)


def _k0s_team_external_nfs_and_efs():
    values = bare_metal_config(workers=2)
    values["storage"] = {"nfs": {"server": "192.168.2.50", "default": True},
                         "efs": {"mountTargetAddress": "10.40.0.20", "anonymousNfs": True}}
    values["access"] = {"teams": [{"name": "vision"}, {"name": "nlp"}]}
    return shared_preview(values)


CASES = {
    "lab": lambda: example_plan("lab"),
    "prod": lambda: example_plan("prod"),
    "rke2, NFS on a worker": _rke2_team_nfs_on_a_worker,
    "k0s, external NFS server and EFS": _k0s_team_external_nfs_and_efs,
}


def _numbers(value):
    """Plan inputs carry JSON numbers as floats; Kubernetes reads integral ones as ints."""
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _kind(plan, kind: str) -> list[dict]:
    return [_numbers(dict(r.inputs)) for r in plan.resources
            if r.type.endswith(f":{kind}") and r.type.startswith("kubernetes:")]


def storage_servers(plan) -> list[str]:
    """Where the cluster's volumes are: the provisioners' NFS_SERVER, EFS's mount targets."""
    servers = [env["value"] for deployment in _kind(plan, "Deployment")
               for container in deployment["spec"]["template"]["spec"]["containers"]
               for env in container.get("env", []) if env["name"] == "NFS_SERVER"]
    servers += [r.inputs["ipAddress"] for r in plan.resources
                if r.type == "aws:efs/mountTarget:MountTarget" and r.inputs.get("ipAddress")]
    return sorted(set(servers))


def api_endpoint(plan) -> tuple[str, int]:
    """The `kubernetes` Service's endpoint, where the API server advertises itself (its
    --advertise-address and --secure-port: k0s spec.api.address and port, RKE2's
    advertise-address and 6443), read by bash from the controller's install step."""
    import subprocess

    import yaml

    for resource in plan.resources:
        stdin = resource.inputs.get("stdin") if resource.name.endswith("install-controller") \
            else None
        if not stdin:
            continue
        # The exports ahead of the step's function, which would run the step.
        head = (stdin["value"] if isinstance(stdin, dict) else stdin).split(
            "\ngpu_cluster_step() {", 1)[0]

        def variable(name: str) -> str:
            return subprocess.run(["bash", "-c", f'{head}\nprintf %s "${{{name}:-}}"'],
                                  capture_output=True, text=True, check=True).stdout

        k0s = variable("K0S_CONFIG")
        if k0s:
            api = yaml.safe_load(k0s)["spec"]["api"]
            return api["address"], api["port"]
        return yaml.safe_load(variable("RKE2_CONFIG"))["advertise-address"], 6443
    raise AssertionError("no install-controller step with the cluster's config")


@pytest.fixture(scope="module", params=CASES)
def case(request):
    plan = CASES[request.param]()
    teams = [n["metadata"]["name"] for n in _kind(plan, "Namespace")
             if TEAM_LABEL in n["metadata"].get("labels", {})]
    policies = _kind(plan, "NetworkPolicy")
    return request.param, plan, teams, policies


def _policies_of(policies, namespace):
    return [p for p in policies if p["metadata"]["namespace"] == namespace]


def test_a_team_pod_cannot_reach_any_port_of_the_storage_servers(case):
    name, plan, teams, policies = case
    servers = storage_servers(plan)
    assert teams and servers, name
    for team in teams:
        for server in servers:
            for port, protocol in NFS_PORTS:
                reached = egress_allowed(_policies_of(policies, team), TEAM_POD,
                                         Destination(server, port, protocol))
                assert not reached, (f"{name}: a pod of team {team} reaches the storage "
                                     f"server {server} on {port}/{protocol}")


@pytest.mark.tools
def test_a_team_pod_keeps_the_api_dns_the_nodes_and_the_internet(case):
    name, plan, teams, policies = case
    api_address, api_port = api_endpoint(plan)
    servers = storage_servers(plan)
    pod_cidr = ipaddress.ip_network("10.244.0.0/16" if "rke2" not in name else "10.42.0.0/16")
    dns_pod = Destination(str(pod_cidr.network_address + 10), 53, "UDP", is_pod=True,
                          namespace_labels={"kubernetes.io/metadata.name": "kube-system"},
                          pod_labels={"k8s-app": "kube-dns"})
    reachable = {
        "the API through the kubernetes Service": Destination(api_address, api_port),
        "CoreDNS over UDP": dns_pod,
        "CoreDNS over TCP": Destination(dns_pod.address, 53, "TCP", is_pod=True),
        "a Kubeflow pod": Destination(str(pod_cidr.network_address + 300), 8888, is_pod=True),
        "the internet": Destination("93.184.216.34", 443),
        "a registry over UDP (QUIC)": Destination("151.101.1.1", 443, "UDP"),
    }
    workers = [w for w in ("192.168.2.2", "192.168.2.3", "192.168.2.4") if w not in servers]
    reachable["a node that serves no storage"] = Destination(workers[0], 10250)
    for team in teams:
        for what, destination in reachable.items():
            assert egress_allowed(_policies_of(policies, team), TEAM_POD, destination), (
                f"{name}: a pod of team {team} no longer reaches {what} ({destination.address})")
        if api_address in servers:
            # The controller serves NFS: its API port, and nothing else of it.
            assert not egress_allowed(_policies_of(policies, team), TEAM_POD,
                                      Destination(api_address, 9443))


def test_the_policy_opens_no_ipv6_destination(case):
    _, _, teams, policies = case
    for team in teams:
        assert not egress_allowed(_policies_of(policies, team), TEAM_POD,
                                  Destination("2001:db8::20", 2049))


def test_prod_s_mount_targets_are_those_of_its_subnets():
    stack_file = read_stack(PROJECT_DIR, "prod")
    from config import load
    settings = load(stack_file.config, stack_file.secret_keys, stack="prod")
    assert storage_servers(example_plan("prod")) == sorted(
        efs_mount_target_addresses(settings.aws.vpc))


def test_the_policy_and_guard_pass_kubernetes_validate_strict(case, tmp_path):
    name, plan, _, policies = case
    require_tool("kubernetes-validate")
    guard = [o for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
             for o in _kind(plan, kind)]
    objects = [{"apiVersion": o["apiVersion"], "kind": o["kind"],
                **{k: v for k, v in o.items() if k not in ("apiVersion", "kind")}}
               for o in [*policies, *guard]]
    assert policies, name
    validate_strict(objects, tmp_path / "objects.yaml")


# The guard: team users may not write NetworkPolicies in their namespaces.

cel = pytest.importorskip("cel", reason="common-expression-language is not installed "
                                        "(requirements-dev.txt)")
NETWORKING = "networking.k8s.io"
# kube-apiserver puts this group's members above every authorizer (kubernetes
# pkg/kubeapiserver/authorizer/config.go: authorizerfactory.NewPrivilegedGroups(
# user.SystemPrivilegedGroup)); the program's admin certificate carries it.
PRIVILEGED_GROUP = "system:masters"


def guard_verdict(plan, user: str, groups: list[str], operation: str,
                  namespace: str = "vision") -> list[str]:
    """The messages of the guard's validations that refuse the request (empty: admitted);
    `authorizer` answers for the request's user from the stack's RBAC objects, as RBAC
    does (tests/rbac.py)."""
    rbac = Rbac.of(stack_rbac_objects(plan))
    guards = [p for p in _kind(plan, "ValidatingAdmissionPolicy")
              if p["spec"]["matchConstraints"]["resourceRules"][0]["resources"]
              == ["networkpolicies"]]
    assert guards, "no admission policy on NetworkPolicies: a team user's own is admitted"
    [policy] = guards
    context = cel.Context()
    context.add_variable("authorizer", {"user": user})
    context.add_variable("request", {"operation": operation, "namespace": namespace,
                                     "userInfo": {"username": user, "groups": groups}})
    context.add_function("group", lambda receiver, group: {**receiver, "group": group})
    context.add_function("resource", lambda receiver, resource: {**receiver,
                                                                  "resource": resource})
    context.add_function("namespace", lambda receiver, ns: {**receiver, "namespace": ns})
    context.add_function("check", lambda receiver, verb: {"allowed": (
        PRIVILEGED_GROUP in groups or rbac.allowed(receiver["user"], Request(
            verb, receiver["group"], receiver["resource"],
            namespace=receiver.get("namespace", "")), groups))})
    context.add_function("allowed", lambda decision: decision["allowed"])
    return [v["message"] for v in policy["spec"]["validations"]
            if cel.evaluate(v["expression"], context) is not True]


GUARD_CASES = {
    # (user, groups, operation, refused)
    "an edit user adds a policy": ("alice", [], "CREATE", True),
    "an edit user changes the storage policy": ("alice", [], "UPDATE", True),
    "an edit user deletes the storage policy": ("alice", [], "DELETE", True),
    "a view user adds one": ("bob", ["researchers"], "CREATE", True),
    "a cluster admin (access.users without namespaces)": ("ops-lead", [], "CREATE", False),
    "the program's admin certificate": ("gpu-cluster-admin", [PRIVILEGED_GROUP], "DELETE",
                                         False),
}


@pytest.mark.parametrize("guard_case", GUARD_CASES)
def test_team_users_cannot_write_network_policies_in_their_namespaces(guard_case):
    user, groups, operation, refused = GUARD_CASES[guard_case]
    plan = example_plan("lab")
    assert bool(guard_verdict(plan, user, groups, operation)) == refused, guard_case


def test_without_the_guard_an_edit_user_could_write_network_policies():
    """Why the guard: Kubernetes' edit role writes NetworkPolicies in its namespace
    (bootstrappolicy policy.go, system:aggregate-to-edit), and policies add up."""
    rbac = Rbac.of(stack_rbac_objects(example_plan("lab")))
    assert rbac.allowed("alice", Request("create", NETWORKING, "networkpolicies",
                                         namespace="vision"))
    assert not rbac.allowed("alice", Request("create", NETWORKING, "networkpolicies"))


def test_the_guard_binds_every_team_namespace():
    plan = example_plan("lab")
    [binding] = [b for b in _kind(plan, "ValidatingAdmissionPolicyBinding")
                 if b["spec"]["policyName"] == "gpu-cluster-team-network-policies"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}
