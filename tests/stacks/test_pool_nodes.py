"""The EC2 pools' nodes hold no credential that may delete a node, and their join tokens
expire: the cloud example stack and an RKE2 cloud stack through the offline preview, the
RBAC of every identity a pool instance holds evaluated by tests/rbac.py. Who deletes the
node of a gone instance: the AWS cloud controller manager on the controllers
(tests/stacks/test_cloud_controller.py); the controller's watcher holds no Kubernetes
credential on either distribution."""

import base64
import json

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from components.aws.pool_node_cleanup import POOL_TOKEN_TTL, ROTATE_EVERY
from components.common.step_text import step_inputs
from preview import aws_mocks
from preview.engine import unwrap_secrets
from tests.builders import cloud_config, example_plan, shared_preview
from tests.iam_evaluator import ALLOW, Principal, evaluate
from tests.iam_evaluator import Request as AwsRequest
from tests.rbac import Rbac, Request, rule_allows, stack_rbac_objects

POLICY = "aws:iam/rolePolicy:RolePolicy"
PARAMETER = "aws:ssm/parameter:Parameter"
COMMAND = "command:remote:Command"
DELETE_NODE = Request("delete", resource="nodes", name="ip-10-30-1-17")
# The user whose client certificate older releases gave the controller's watcher on k0s,
# bound to a ClusterRole that could get, list and delete nodes.
OLD_WATCHER_USER = "gpu-cluster:pool-node-watcher"
# The kubelet's own identity is authorized by the Node authorizer with these rules on
# nodes (kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go NodeRules:
# "create", "get", "list", "watch" on nodes; "update", "patch" on nodes and nodes/status),
# and no RBAC binding names system:nodes since Kubernetes 1.8.
KUBELET_NODE_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["create", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["update", "patch"]},
]


@pytest.fixture(scope="module")
def dev():
    return example_plan("dev")


def arn(resource) -> str:
    return aws_mocks.resource(resource.type, resource.name, resource.inputs)[1]["arn"]


def pool_readable_values(plan) -> list[str]:
    """The values of every SSM parameter some pool instance role may read."""
    parameters = {arn(p): p for p in plan.of_type(PARAMETER)}
    values = []
    for policy in plan.of_type(POLICY):
        if not policy.name.endswith("-node-read-parameter"):  # a pool's instance role
            continue
        for statement in json.loads(policy.inputs["policy"])["Statement"]:
            if "ssm:GetParameter" in statement["Action"]:
                values += [unwrap_secrets(parameters[a].inputs["value"])
                           for a in statement["Resource"]]
    return values


def client_identities(values: list[str]) -> list[tuple[str, list[str]]]:
    """The (user, groups) of every kubeconfig client certificate among `values`."""
    identities = []
    for value in values:
        try:
            document = yaml.safe_load(value)
        except yaml.YAMLError:
            continue
        for user in (document or {}).get("users", []) if isinstance(document, dict) else []:
            data = user.get("user", {}).get("client-certificate-data")
            if data:
                subject = x509.load_pem_x509_certificate(base64.b64decode(data)).subject
                identities.append((
                    subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
                    [a.value for a in subject.get_attributes_for_oid(
                        NameOID.ORGANIZATION_NAME)]))
    return identities


@pytest.mark.parametrize("stack", ["dev", "cloud-rke2"])
def test_no_identity_a_pool_instance_holds_may_delete_a_node(stack, dev):
    plan = dev if stack == "dev" else shared_preview(
        {**cloud_config(), "kubernetes": {"distribution": "rke2"}})
    rbac = Rbac.of(stack_rbac_objects(plan))
    # Credentials the instance's role may read from SSM.
    identities = client_identities(pool_readable_values(plan))
    # Its kubelet; the bootstrap token it joined with (kubernetes bootstrap tokens:
    # system:bootstrap:<id> in system:bootstrappers).
    identities += [("system:node:ip-10-30-1-17", ["system:nodes"]),
                   ("system:bootstrap:abcdef", ["system:bootstrappers"])]
    # Every service account: on the cloud layout the pools are the only workers, so any
    # pod, and its token, may be on the instance.
    identities += [(account, []) for account in sorted({
        f"system:serviceaccount:{s.get('namespace', '')}:{s['name']}"
        for o in stack_rbac_objects(plan) for s in o.get("subjects") or []
        if s["kind"] == "ServiceAccount"})]
    assert len(identities) > 5
    may_delete = [(user, groups) for user, groups in identities
                  if rbac.allowed(user, DELETE_NODE, groups)]
    assert may_delete == []
    assert not any(rule_allows(DELETE_NODE, rule) for rule in KUBELET_NODE_RULES)
    assert not [p for p in plan.of_type(PARAMETER) if "kubeconfig" in p.inputs["name"]]
    # The controller's watcher has no credential either, on k0s as on RKE2: its old user is
    # bound to nothing, and no certificate or kubeconfig is made for it.
    assert not rbac.allowed(OLD_WATCHER_USER, DELETE_NODE)
    assert not [o for o in stack_rbac_objects(plan) if OLD_WATCHER_USER in json.dumps(o)]
    assert not [r.name for r in plan.resources if "pool-node-watcher" in r.name]
    # The evaluator would see a grant: the same objects with one binding more allow it.
    probe = Rbac.of([*stack_rbac_objects(plan), {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "probe"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": OLD_WATCHER_USER}]}])
    assert probe.allowed(OLD_WATCHER_USER, DELETE_NODE)


def test_the_controller_watches_the_pools_with_a_grant_of_its_own(dev):
    [policy] = [p for p in dev.of_type(POLICY) if p.name == "dev-node-cleanup-controller"]
    [role] = [r for r in dev.of_type("aws:iam/role:Role")
              if dev.by_urn[policy.property_dependencies["role"][0]].name == r.name]
    assert role.name == "dev-control-plane-host-role"
    tokens = sorted(arn(p) for p in dev.of_type(PARAMETER)
                    if p.inputs["name"].endswith("/join-token"))
    assert len(tokens) == 3
    document = json.loads(policy.inputs["policy"])
    assert document["Statement"][:2] == [
        {"Sid": "PoolNodeWatcherListsInstances", "Effect": "Allow",
         "Action": ["ec2:DescribeInstances"], "Resource": "*"},
        {"Sid": "PoolTokenRotationWritesTokens", "Effect": "Allow",
         "Action": ["ssm:PutParameter"], "Resource": tokens}]
    # The boot statuses of gone instances: listed and deleted below their path, nothing else.
    controller = Principal("controller", "arn:aws:iam::000000000000:role/c", (document,))
    statuses = tokens[0].split(":parameter/")[0] + ":parameter/gpu-cluster/dev/boot-status"
    allowed = {(action, resource): evaluate(controller, AwsRequest(action, resource)) == ALLOW
               for action in ("ssm:GetParametersByPath", "ssm:DeleteParameter",
                              "ssm:PutParameter", "ssm:GetParameter")
               for resource in (statuses, f"{statuses}/a10g/i-0123456789abcdef0",
                                tokens[0].replace("/a10g/join-token", "/control-plane/ca-key"))}
    assert {key for key, allow in allowed.items() if allow} == {
        ("ssm:GetParametersByPath", statuses),
        ("ssm:GetParametersByPath", f"{statuses}/a10g/i-0123456789abcdef0"),
        ("ssm:DeleteParameter", f"{statuses}/a10g/i-0123456789abcdef0")}
    # No pool role may write a token or list instances.
    for other in dev.of_type(POLICY):
        if other.name.endswith("-node-read-parameter"):
            text = other.inputs["policy"]
            assert "ec2:" not in text and "join-token" not in text.split("ReportItsBoot")[1]


@pytest.mark.parametrize("stack, command", [
    ("dev", "/usr/local/bin/k0s token create --role=worker --expiry"),
    ("cloud-rke2", "/usr/local/bin/rke2 token create --kubeconfig /etc/rancher/rke2/rke2.yaml "
                   "--description gpu-cluster-pool --ttl")])
def test_pool_join_tokens_expire_and_the_controller_renews_them(stack, command, dev):
    plan = dev if stack == "dev" else shared_preview(
        {**cloud_config(), "kubernetes": {"distribution": "rke2"}})
    [step] = [c for c in plan.of_type(COMMAND) if c.name == "control-plane-watch-pools"]
    inputs = step_inputs(unwrap_secrets(step.inputs["stdin"]))
    assert inputs["TOKEN_COMMAND"] == command
    assert (inputs["TOKEN_TTL"], inputs["ROTATE_EVERY"]) == (POOL_TOKEN_TTL, ROTATE_EVERY)
    assert (POOL_TOKEN_TTL, ROTATE_EVERY) == ("24h", "6h")
    tokens = sorted(p.inputs["name"] for p in plan.of_type(PARAMETER)
                    if p.inputs["name"].endswith("/join-token"))
    assert sorted(inputs["POOL_TOKEN_PARAMETERS"].split()) == tokens
    # Each group starts once the first tokens are stored.
    for group in plan.of_type("aws:autoscaling/group:Group"):
        assert step.urn in group.dependencies, group.name
    # The cloud controller manager deletes the nodes: the step hands the watcher no
    # credential, nor a kubectl or the pools' label to find nodes with.
    assert not {"WATCHER_KUBECONFIG", "KUBECTL", "POOL_LABEL"} & set(inputs)
    assert not [name for name, value in inputs.items()
                if "client-certificate-data" in value or "PRIVATE KEY" in value]
