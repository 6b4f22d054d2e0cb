"""The public service-account issuer of the hybrid layout (components/aws/service_account_issuer.py):
its key set verifies a token signed by the cluster's key (signed and verified with the
`cryptography` library, the key picked by the token's `kid` as a relying party does,
RFC 7515 section 4.1.4), its `kid` is the API server's (checked against `openssl`'s own
DER and digest), and who may assume the EFS role and read the bucket, evaluated
(tests/iam_evaluator.py)."""

import base64
import json
import subprocess

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from components.aws import service_account_issuer as issuer
from components.aws.efs import efs_policy
from tests.iam_evaluator import (
    ALLOW,
    ANONYMOUS,
    EFS_CLIENT_ACTIONS,
    EXPLICIT_DENY,
    IMPLICIT_DENY,
    Principal,
    Request,
    efs_client_request,
    evaluate,
)

ACCOUNT = "123456789012"
ISSUER = "https://gpu-issuer.s3.us-west-2.amazonaws.com"
PROVIDER = f"arn:aws:iam::{ACCOUNT}:oidc-provider/gpu-issuer.s3.us-west-2.amazonaws.com"
NAMESPACE, ACCOUNT_NAME = "kube-system", "efs-csi-node-sa"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _key_pair() -> tuple[rsa.RSAPrivateKey, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return key, pem.decode()


def _token(key: rsa.RSAPrivateKey, kid: str, claims: dict) -> str:
    header = _b64url(json.dumps({"alg": "RS256", "kid": kid, "typ": "JWT"}).encode())
    payload = _b64url(json.dumps(claims).encode())
    signature = key.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{payload}.{_b64url(signature)}"


def _verify(token: str, jwks: str) -> dict:
    """A relying party: the key of the token's kid, RS256 (RFC 7518 section 3.3)."""
    header_part, payload_part, signature = token.split(".")
    header = json.loads(_unb64url(header_part))
    [jwk] = [k for k in json.loads(jwks)["keys"] if k["kid"] == header["kid"]]
    assert jwk["kty"] == "RSA" and jwk["alg"] == header["alg"] == "RS256"
    public = rsa.RSAPublicNumbers(int.from_bytes(_unb64url(jwk["e"]), "big"),
                                  int.from_bytes(_unb64url(jwk["n"]), "big")).public_key()
    public.verify(_unb64url(signature), f"{header_part}.{payload_part}".encode(),
                  padding.PKCS1v15(), hashes.SHA256())
    return json.loads(_unb64url(payload_part))


def test_the_key_set_verifies_a_token_of_the_clusters_key_and_no_other():
    key, pem = _key_pair()
    other, _ = _key_pair()
    claims = {"iss": ISSUER, "sub": issuer.subject(NAMESPACE, ACCOUNT_NAME),
              "aud": [issuer.AUDIENCE]}
    jwks = issuer.jwks([pem])
    assert _verify(_token(key, issuer.key_id(pem), claims), jwks) == claims
    # Another key's signature under the same kid is refused; an unknown kid finds no key.
    with pytest.raises(InvalidSignature):
        _verify(_token(other, issuer.key_id(pem), claims), jwks)
    with pytest.raises(ValueError):
        _verify(_token(key, "another-kid", claims), jwks)
    # While the signing key rotates, the set holds both and each verifies its own tokens.
    _, old_pem = _key_pair()
    both = issuer.jwks([old_pem, pem])
    assert _verify(_token(key, issuer.key_id(pem), claims), both) == claims


def test_the_kid_is_the_api_servers_sha256_of_the_der_public_key(tmp_path):
    # keyIDFromPublicKey: base64url (unpadded) of sha256 over x509.MarshalPKIXPublicKey.
    _, pem = _key_pair()
    (tmp_path / "sa.pub").write_text(pem)
    der = subprocess.run(["openssl", "pkey", "-pubin", "-in", str(tmp_path / "sa.pub"),
                          "-outform", "DER"], check=True, capture_output=True).stdout
    digest = subprocess.run(["openssl", "dgst", "-sha256", "-binary"], input=der,
                            check=True, capture_output=True).stdout
    assert issuer.key_id(pem) == _b64url(digest)
    assert len(issuer.key_id(pem)) == 43


def test_a_key_that_is_not_rsa_is_refused():
    pem = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    with pytest.raises(ValueError, match="not an RSA key"):
        issuer.jwks([pem])


def test_the_discovery_document_points_at_the_key_set_of_the_same_issuer():
    document = json.loads(issuer.discovery_document(ISSUER))
    assert document["issuer"] == ISSUER
    assert document["jwks_uri"] == f"{ISSUER}/{issuer.JWKS_KEY}"
    assert document["id_token_signing_alg_values_supported"] == ["RS256"]


def _assume(who: Principal, sub: str, aud: str = issuer.AUDIENCE) -> str:
    host = issuer.issuer_host_path(ISSUER)
    request = Request("sts:AssumeRoleWithWebIdentity", f"arn:aws:iam::{ACCOUNT}:role/efs",
                      {f"{host}:sub": sub, f"{host}:aud": aud})
    trust = issuer.web_identity_trust_policy(PROVIDER, ISSUER, NAMESPACE, ACCOUNT_NAME)
    return evaluate(who, request, trust, resource_policy_required=True)


def test_only_the_efs_node_service_account_assumes_the_role():
    provider = Principal("the cluster's issuer", PROVIDER)
    assert _assume(provider, f"system:serviceaccount:{NAMESPACE}:{ACCOUNT_NAME}") == ALLOW
    # Another account's token (a team's default, the controller's), another audience,
    # another issuer, an IAM user: refused.
    for sub in ("system:serviceaccount:vision:default",
                f"system:serviceaccount:{NAMESPACE}:efs-csi-controller-sa",
                f"system:serviceaccount:vision:{ACCOUNT_NAME}"):
        assert _assume(provider, sub) == IMPLICIT_DENY, sub
    assert _assume(provider, issuer.subject(NAMESPACE, ACCOUNT_NAME),
                   aud="https://kubernetes.default.svc") == IMPLICIT_DENY
    elsewhere = Principal("another issuer", PROVIDER.replace("gpu-issuer", "other"))
    assert _assume(elsewhere, issuer.subject(NAMESPACE, ACCOUNT_NAME)) == IMPLICIT_DENY
    user = Principal("admin", f"arn:aws:iam::{ACCOUNT}:user/admin",
                     ({"Version": "2012-10-17", "Statement": [
                         {"Effect": "Allow", "Action": "*", "Resource": "*"}]},))
    assert _assume(user, issuer.subject(NAMESPACE, ACCOUNT_NAME)) == IMPLICIT_DENY


def test_the_bucket_shows_its_two_documents_and_nothing_else():
    bucket = "arn:aws:s3:::gpu-issuer"
    policy = issuer.issuer_bucket_policy(bucket)
    nobody = Principal("anyone on the internet", ANONYMOUS)
    tls = {"aws:SecureTransport": "true"}
    for key in (issuer.DISCOVERY_KEY, issuer.JWKS_KEY):
        assert evaluate(nobody, Request("s3:GetObject", f"{bucket}/{key}", tls), policy) == ALLOW
        assert evaluate(nobody, Request("s3:PutObject", f"{bucket}/{key}", tls),
                        policy) == IMPLICIT_DENY
        assert evaluate(nobody, Request("s3:GetObject", f"{bucket}/{key}",
                                        {"aws:SecureTransport": "false"}),
                        policy) == EXPLICIT_DENY
    for request in (Request("s3:GetObject", f"{bucket}/other", tls),
                    Request("s3:ListBucket", bucket, tls),
                    Request("s3:DeleteObject", f"{bucket}/{issuer.JWKS_KEY}", tls),
                    Request("s3:PutBucketPolicy", bucket, tls)):
        assert evaluate(nobody, request, policy) == IMPLICIT_DENY, request.action


FILE_SYSTEM = f"arn:aws:elasticfilesystem:us-west-2:{ACCOUNT}:file-system/fs-0123"
MOUNT, WRITE, ROOT = EFS_CLIENT_ACTIONS


def _efs(who: Principal, action: str, policy: str, tls: bool = True) -> str:
    return evaluate(who, efs_client_request(action, FILE_SYSTEM, tls), policy)


def test_the_on_prem_role_mounts_and_writes_and_is_not_root():
    controller = Principal("controller", f"arn:aws:iam::{ACCOUNT}:role/controller")
    on_prem = Principal("on-prem EFS CSI node", f"arn:aws:iam::{ACCOUNT}:role/efs-on-prem")
    policy = efs_policy(FILE_SYSTEM, [controller.arn], anonymous_nfs=False,
                        client_roles=[on_prem.arn])
    for action in (MOUNT, WRITE):
        assert _efs(on_prem, action, policy) == ALLOW
        assert _efs(on_prem, action, policy, tls=False) == EXPLICIT_DENY
    assert _efs(on_prem, ROOT, policy) == EXPLICIT_DENY
    assert _efs(controller, ROOT, policy) == ALLOW
    # The anonymous NFS client (no `iam`) and any other role: nothing.
    for who in (Principal("anonymous NFS client", ANONYMOUS),
                Principal("other", f"arn:aws:iam::{ACCOUNT}:role/other")):
        for action in (MOUNT, WRITE, ROOT):
            assert _efs(who, action, policy) == EXPLICIT_DENY, (who.name, action)
