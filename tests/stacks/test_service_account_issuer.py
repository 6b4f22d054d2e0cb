"""The hybrid stack with storage.efs.issuerBucket, as the preview renders it: the issuer's
bucket with its two public documents (the key set from the key the controller prints), IAM's
OpenID Connect provider for it, the EFS role only the EFS CSI driver's node service account
may assume (evaluated, tests/iam_evaluator.py), and the controller's API server told to
issue under it."""

import json

import pytest

from components.aws import service_account_issuer as issuer
from preview import aws_mocks
from tests.builders import ISSUER_BUCKET
from tests.iam_evaluator import ALLOW, ANONYMOUS, IMPLICIT_DENY, Principal, Request, evaluate
from tests import rbac

BUCKET = ISSUER_BUCKET
ISSUER = f"https://{BUCKET}.s3.us-east-1.amazonaws.com"


@pytest.fixture(scope="module")
def plan(efs_issuer_plan):
    return efs_issuer_plan


def _one(plan, type_: str):
    [found] = plan.of_type(type_)
    return found


def test_the_bucket_publishes_two_documents_and_nothing_else(plan):
    bucket = next(r for r in plan.of_type("aws:s3/bucket:Bucket")
                  if r.inputs.get("bucket") == BUCKET)
    arn = f"arn:aws:s3:::{BUCKET}"
    [policy] = [r.inputs["policy"] for r in plan.of_type("aws:s3/bucketPolicy:BucketPolicy")
                if r.name.startswith(bucket.name.removesuffix("-bucket"))]
    nobody = Principal("anyone", ANONYMOUS)
    tls = {"aws:SecureTransport": "true"}
    objects = {r.inputs["key"]: r.inputs for r in plan.of_type("aws:s3/bucketObjectv2:BucketObjectv2")
               if r.name.startswith(bucket.name.removesuffix("-bucket"))}
    assert sorted(objects) == sorted([issuer.DISCOVERY_KEY, issuer.JWKS_KEY])
    for key in objects:
        assert evaluate(nobody, Request("s3:GetObject", f"{arn}/{key}", tls), policy) == ALLOW
    assert evaluate(nobody, Request("s3:GetObject", f"{arn}/else", tls), policy) == IMPLICIT_DENY
    assert evaluate(nobody, Request("s3:ListBucket", arn, tls), policy) == IMPLICIT_DENY
    [access] = [r.inputs for r in plan.of_type("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
                if r.name.startswith(bucket.name.removesuffix("-bucket"))]
    # Public through the policy only, never through ACLs.
    assert access["blockPublicAcls"] and access["ignorePublicAcls"]
    document = json.loads(objects[issuer.DISCOVERY_KEY]["content"])
    assert document["issuer"] == ISSUER
    assert document["jwks_uri"] == f"{ISSUER}/openid/v1/jwks"
    [key] = json.loads(objects[issuer.JWKS_KEY]["content"])["keys"]
    assert key["kty"] == "RSA" and key["alg"] == "RS256" and len(key["kid"]) == 43


def test_only_the_efs_node_service_account_assumes_the_role(plan):
    provider = _one(plan, "aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    assert provider.inputs["url"] == ISSUER
    assert provider.inputs["clientIdLists"] == ["sts.amazonaws.com"]
    provider_arn = aws_mocks.resource(provider.type, provider.name, provider.inputs)[1]["arn"]
    [role] = [r for r in plan.of_type("aws:iam/role:Role") if r.name.endswith("-efs-node")]
    host = ISSUER.removeprefix("https://")
    caller = Principal("the cluster's issuer", provider_arn)

    def assume(sub: str) -> str:
        return evaluate(caller, Request("sts:AssumeRoleWithWebIdentity", "role", {
            f"{host}:sub": sub, f"{host}:aud": "sts.amazonaws.com"}),
            role.inputs["assumeRolePolicy"], resource_policy_required=True)

    assert assume("system:serviceaccount:kube-system:efs-csi-node-sa") == ALLOW
    assert assume("system:serviceaccount:kube-system:efs-csi-controller-sa") == IMPLICIT_DENY
    assert assume("system:serviceaccount:vision:default") == IMPLICIT_DENY


def test_the_controller_issues_under_the_bucket_and_reads_its_key_after_install(plan):
    stdin = plan.redact(plan.named("control-plane-install-controller").inputs["stdin"])
    assert f"service-account-issuer: {ISSUER}" in stdin
    assert "--service-account-issuer=https://kubernetes.default.svc" in stdin
    step = plan.named("control-plane-service-account-key")
    assert any("install-controller" in d for d in step.dependencies)


def test_the_preview_names_the_key_of_the_public_bucket(plan):
    [warning] = [w for w in plan.warnings if "storage.efs.issuerBucket" in str(w)]
    assert f"the bucket {BUCKET} is public" in str(warning)
    assert "kube-system:efs-csi-node-sa" in str(warning)


def test_no_team_user_can_get_a_token_of_the_efs_node_service_account(plan):
    """Its tokens are the EFS role: a team user can neither request one (TokenRequest),
    nor run a pod under it or read secrets in kube-system, nor impersonate it."""
    cluster = rbac.Rbac.of(rbac.stack_rbac_objects(plan))
    name = "efs-csi-node-sa"
    requests = [
        rbac.Request("create", "", "serviceaccounts", "token", name, "kube-system"),
        rbac.Request("create", "", "pods", namespace="kube-system"),
        rbac.Request("create", "apps", "daemonsets", namespace="kube-system"),
        rbac.Request("get", "", "secrets", namespace="kube-system"),
        rbac.Request("update", "", "serviceaccounts", name=name, namespace="kube-system"),
        rbac.Request("impersonate", "", "serviceaccounts", name=name, namespace="kube-system"),
    ]
    for user in ("alice", "bob", "dana"):
        for request in requests:
            assert not cluster.allowed(user, request), (user, request)
    # The cluster administrator can: the check sees the rules that grant it.
    assert cluster.allowed("root", requests[0])
