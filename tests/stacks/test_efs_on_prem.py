"""The hybrid stack with storage.efs.issuerBucket, as the preview renders it: the on-prem
nodes run the EFS CSI driver, which off EC2 reads its instance id and region from the Node
(aws-efs-csi-driver v3.4.1 pkg/cloud/k8s_metadata.go:33-59), and mount with IAM and TLS;
the file system policy and the roles' trust evaluated for each principal
(tests/iam_evaluator.py); the security group open to node addresses only."""

import json
import re

import pytest

from components.addons import efs_csi
from preview import aws_mocks
from tests import rbac
from tests.builders import ISSUER_BUCKET, hybrid_config, preview
from tests.iam_evaluator import (ALLOW, ANONYMOUS, EFS_CLIENT_ACTIONS, EXPLICIT_DENY,
                                 IMPLICIT_DENY, Principal, Request, efs_client_request,
                                 evaluate)

BUCKET = ISSUER_BUCKET
ISSUER_HOST = f"{BUCKET}.s3.us-east-1.amazonaws.com"
ACCOUNT = aws_mocks.PREVIEW_ACCOUNT
MOUNT, WRITE, ROOT = EFS_CLIENT_ACTIONS
# What the driver finds in a Node's providerID off EC2 (k8s_metadata.go:49-53, Go's
# leftmost-first match, as Python's re.search for this expression).
DRIVER_INSTANCE_ID = re.compile("i-[a-z0-9]+$|[a-z0-9]{32}")
# The AWS cloud controller manager's reading of a providerID (kubernetes/cloud-provider-aws
# v1.36.1 pkg/providers/v1/instances.go:39 and :61-90): an EC2 instance only for `i-...`.
CCM_INSTANCE_ID = re.compile("^i-[^/]*$")


@pytest.fixture(scope="module")
def plan(efs_issuer_plan):
    return efs_issuer_plan


def arn_of(resource) -> str:
    return aws_mocks.resource(resource.type, resource.name, resource.inputs)[1]["arn"]


def role(plan, suffix: str):
    [found] = [r for r in plan.of_type("aws:iam/role:Role") if r.name.endswith(suffix)]
    return found


def principal(plan, suffix: str) -> Principal:
    found = role(plan, suffix)
    policies = tuple(json.loads(p.inputs["policy"])
                     for p in plan.of_type("aws:iam/rolePolicy:RolePolicy")
                     if found.urn in p.property_dependencies["role"])
    return Principal(found.name, arn_of(found), policies)


def efs(plan, who: Principal, action: str, tls: bool = True) -> str:
    [policy] = [r.inputs["policy"] for r in
                plan.of_type("aws:efs/fileSystemPolicy:FileSystemPolicy")]
    [file_system] = plan.of_type("aws:efs/fileSystem:FileSystem")
    return evaluate(who, efs_client_request(action, arn_of(file_system), tls), policy)


def test_the_file_system_wants_iam_and_tls_and_root_only_for_the_node_role(plan):
    controller = principal(plan, "control-plane-host-role")
    node = principal(plan, "-sa-issuer-efs-node")
    provisioner = principal(plan, "-sa-issuer-efs-controller")
    for action in (MOUNT, WRITE, ROOT):
        assert efs(plan, controller, action) == ALLOW, action
        assert efs(plan, controller, action, tls=False) == EXPLICIT_DENY, action
    # The on-prem nodes' driver mounts and writes through access points, never as root.
    assert efs(plan, node, MOUNT) == ALLOW and efs(plan, node, WRITE) == ALLOW
    assert efs(plan, node, ROOT) == EXPLICIT_DENY
    assert efs(plan, node, MOUNT, tls=False) == EXPLICIT_DENY
    everyone_allowed = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "elasticfilesystem:*", "Resource": "*"}]}
    team_user = Principal("team user", f"arn:aws:iam::{ACCOUNT}:user/alice", (everyone_allowed,))
    for who in (provisioner, team_user, Principal("anonymous NFS client", ANONYMOUS)):
        for action in (MOUNT, WRITE, ROOT):
            assert efs(plan, who, action) == EXPLICIT_DENY, (who.name, action)


def test_each_role_admits_one_service_account_s_token_for_sts(plan):
    [provider] = plan.of_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    issuer = Principal("the cluster's issuer", arn_of(provider))

    def assume(suffix: str, service_account: str, audience: str = "sts.amazonaws.com") -> str:
        return evaluate(issuer, Request("sts:AssumeRoleWithWebIdentity", "role", {
            f"{ISSUER_HOST}:sub": f"system:serviceaccount:{service_account}",
            f"{ISSUER_HOST}:aud": audience}),
            role(plan, suffix).inputs["assumeRolePolicy"], resource_policy_required=True)

    node, controller = "kube-system:efs-csi-node-sa", "kube-system:efs-csi-controller-sa"
    assert assume("-efs-node", node) == ALLOW
    assert assume("-efs-controller", controller) == ALLOW
    assert assume("-efs-node", controller) == IMPLICIT_DENY
    assert assume("-efs-controller", node) == IMPLICIT_DENY
    for suffix in ("-efs-node", "-efs-controller"):
        assert assume(suffix, "vision:default") == IMPLICIT_DENY
        assert assume(suffix, "kube-system:default") == IMPLICIT_DENY
        assert assume(suffix, node.replace("kube-system", "vision")) == IMPLICIT_DENY
        assert assume(suffix, node, audience="vision") == IMPLICIT_DENY
    # A team user's own credentials are no web identity of the issuer.
    user = Principal("team user", f"arn:aws:iam::{ACCOUNT}:user/alice")
    assert evaluate(user, Request("sts:AssumeRoleWithWebIdentity", "role", {}),
                    role(plan, "-efs-node").inputs["assumeRolePolicy"],
                    resource_policy_required=True) == IMPLICIT_DENY


def test_only_the_provisioner_role_makes_the_cluster_s_access_points(plan):
    [file_system] = plan.of_type("aws:efs/fileSystem:FileSystem")
    arn = arn_of(file_system)
    create = Request("elasticfilesystem:CreateAccessPoint", arn, {
        "aws:RequestTag/efs.csi.aws.com/cluster": "true",
        "aws:RequestTag/gpu-cluster/cluster": "test"})
    assert evaluate(principal(plan, "-efs-controller"), create) == ALLOW
    assert evaluate(principal(plan, "-efs-node"), create) == IMPLICIT_DENY
    assert evaluate(principal(plan, "-efs-controller"),
                    Request(create.action, arn, {})) == IMPLICIT_DENY


def test_the_security_group_admits_the_node_addresses_only(plan):
    rules = plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    efs_rules = [r.inputs for r in rules if "-efs-" in r.name]
    cidrs = sorted(r["cidrIpv4"] for r in efs_rules if "cidrIpv4" in r)
    assert cidrs and all(c.endswith("/32") for c in cidrs), cidrs
    assert "192.168.2.0/24" not in cidrs
    hosts = {h["address"] for h in hybrid_config()["hosts"]}
    assert hosts <= {c.removesuffix("/32") for c in cidrs}


def test_on_prem_nodes_carry_the_provider_id_and_region_the_driver_reads(plan):
    patches = {r.name: r.inputs for r in plan.of_type("kubernetes:core/v1:NodePatch")
               if r.name.endswith("-node-identity")}
    hosts = [h["name"] for h in hybrid_config()["hosts"]]
    assert sorted(patches) == sorted(f"{h}-node-identity" for h in hosts)
    ids = set()
    for host in hosts:
        inputs = patches[f"{host}-node-identity"]
        provider_id = inputs["spec"]["providerID"]
        assert inputs["metadata"]["labels"] == {"topology.kubernetes.io/region": "us-east-1"}
        # The driver finds 32 hex digits; the cloud controller manager finds no instance,
        # so it neither looks the node up in EC2 nor deletes it as gone.
        assert re.fullmatch("gpu-cluster://[0-9a-f]{32}", provider_id)
        assert DRIVER_INSTANCE_ID.search(provider_id).group() == provider_id[-32:]
        assert not CCM_INSTANCE_ID.match(provider_id.rsplit("/", 1)[-1])
        ids.add(provider_id)
    assert len(ids) == len(hosts)


def test_the_driver_runs_with_its_web_identity_and_mounts_by_address(plan):
    [chart] = [r for r in plan.of_type("kubernetes:helm.sh/v4:Chart")
               if r.name.endswith("-efs-csi")]
    values = chart.inputs["values"]
    for part, suffix in (("node", "-efs-node"), ("controller", "-efs-controller")):
        env = {e["name"]: e["value"] for e in values[part]["env"]}
        assert env["AWS_ROLE_ARN"] == arn_of(role(plan, suffix)), part
        assert env["AWS_REGION"] == "us-east-1"
    [storage_class] = [r.inputs for r in plan.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
                       if r.inputs["metadata"]["name"] == "efs"]
    assert storage_class["provisioner"] == efs_csi.PROVISIONER
    options = storage_class["mountOptions"]
    assert "iam" in options
    [target] = [o for o in options if o.startswith("mounttargetip=")]
    assert re.fullmatch(r"mounttargetip=10\.\d+\.\d+\.\d+", target), target


def test_without_the_issuer_hybrid_nodes_get_no_provider_id():
    plan = preview(hybrid_config())
    assert not [r for r in plan.of_type("kubernetes:core/v1:NodePatch")
                if r.name.endswith("-node-identity")]
    assert all(not r.name.endswith("-efs-csi")
               for r in plan.of_type("kubernetes:helm.sh/v4:Chart"))


def test_no_team_user_can_change_a_node_s_provider_id_or_region(plan):
    cluster = rbac.Rbac.of(rbac.stack_rbac_objects(plan))
    for user in ("alice", "bob", "dana"):
        for verb in ("patch", "update"):
            assert not cluster.allowed(user, rbac.Request(verb, "", "nodes", name="gpu000"))
