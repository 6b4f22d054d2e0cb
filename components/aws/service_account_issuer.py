"""The cluster's service-account issuer as AWS sees it (hybrid layout): the public OIDC
discovery document and key set STS reads, and the web identity role the EFS CSI driver's
node pods assume with their projected token, so on-prem nodes, which have no instance role,
mount EFS with `iam` and TLS like the controller. The self-hosted recipe this follows:
amazon-eks-pod-identity-webhook SELF_HOSTED_SETUP.md ("Public Issuer", "Provider
creation"); STS reads `<issuer>/.well-known/openid-configuration` and its `jwks_uri`
(https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_providers_create_oidc.html)."""

import base64
import hashlib
import json

import pulumi
import pulumi_aws as aws
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

# The two objects of the issuer's bucket, and nothing else is public.
# Their paths are the API server's own (kubernetes pkg/serviceaccount/openidmetadata.go
# OpenIDConfigPath, JWKSPath).
DISCOVERY_KEY = ".well-known/openid-configuration"
JWKS_KEY = "openid/v1/jwks"
# The token's audience STS is given as the provider's client id (SELF_HOSTED_SETUP.md,
# "Audiences": EKS's default, which the AWS SDKs and efs-utils send nothing to change).
AUDIENCE = "sts.amazonaws.com"
# Where the node pods read their projected token (the path EKS's webhook mounts, which
# AWS_WEB_IDENTITY_TOKEN_FILE names: efs-utils v3.2.0 src/efs_utils_common/
# aws_credentials.py:116-126 and constants.py:180-181 read these two variables).
TOKEN_DIRECTORY = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
TOKEN_FILE = f"{TOKEN_DIRECTORY}/token"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _public_key(pem: str) -> rsa.RSAPublicKey:
    key = serialization.load_pem_public_key(pem.encode())
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("the service-account key is not an RSA key")
    return key


def key_id(pem: str) -> str:
    """The `kid` kube-apiserver puts in the tokens it signs with this key: the unpadded
    base64url of the sha256 of its PKIX (SubjectPublicKeyInfo) DER (kubernetes v1.21.0
    pkg/serviceaccount/jwt.go:89-111 keyIDFromPublicKey, unchanged since; copied in
    amazon-eks-pod-identity-webhook hack/self-hosted/main.go:19-32)."""
    der = _public_key(pem).public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64url(hashlib.sha256(der).digest())


def jwks(pems: list[str]) -> str:
    """The key set: every key the API server verifies tokens with, as RS256 signing keys
    (RFC 7517 section 6.3 `n`, `e`; kubernetes pkg/serviceaccount/openidmetadata.go
    publicJWKSFromKeys: `use` sig, `alg` RS256 for RSA)."""
    keys = []
    for pem in pems:
        numbers = _public_key(pem).public_numbers()
        keys.append({"use": "sig", "kty": "RSA", "kid": key_id(pem), "alg": "RS256",
                     "n": _b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8,
                                                     "big")),
                     "e": _b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8,
                                                     "big"))})
    return json.dumps({"keys": keys}, sort_keys=True)


def discovery_document(issuer: str) -> str:
    """What kube-apiserver itself serves at /.well-known/openid-configuration
    (pkg/serviceaccount/openidmetadata.go openIDMetadata), for the public issuer."""
    return json.dumps({
        "issuer": issuer,
        "jwks_uri": f"{issuer}/{JWKS_KEY}",
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    }, sort_keys=True)


def issuer_host_path(issuer: str) -> str:
    """The issuer without its scheme: the prefix of the provider's condition keys
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_iam-condition-keys.html,
    "Available keys for OIDC federation")."""
    return issuer.removeprefix("https://")


def subject(namespace: str, service_account: str) -> str:
    """A service account's token subject (kubernetes pkg/serviceaccount/util.go
    MakeUsername)."""
    return f"system:serviceaccount:{namespace}:{service_account}"


def web_identity_trust_policy(provider_arn: str, issuer: str, namespace: str,
                              service_account: str) -> str:
    """Only tokens of this one service account, for STS, may assume the role."""
    host_path = issuer_host_path(issuer)
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "OneServiceAccount", "Effect": "Allow",
        "Principal": {"Federated": provider_arn},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {
            f"{host_path}:sub": subject(namespace, service_account),
            f"{host_path}:aud": AUDIENCE}}}]})


def issuer_bucket_policy(bucket_arn: str) -> str:
    """Anyone may read the two public documents (STS reads them without credentials);
    nothing else, and only over TLS."""
    documents = [f"{bucket_arn}/{DISCOVERY_KEY}", f"{bucket_arn}/{JWKS_KEY}"]
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "TheIssuersPublicDocuments", "Effect": "Allow", "Principal": "*",
         "Action": "s3:GetObject", "Resource": documents},
        {"Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
         "Resource": [bucket_arn, f"{bucket_arn}/*"],
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    ]})


ISSUER_BUCKET_WARNING = (
    "storage.efs.issuerBucket: the bucket {bucket} is public for the service-account "
    "issuer's discovery document and key set (public keys only); IAM trusts that issuer for "
    "two roles: one only kube-system:{service_account} may assume, to mount and write EFS "
    "(never as root), one only kube-system:{controller_service_account} may assume, to make "
    "and remove the cluster's access points; each on-prem Node gets spec.providerID "
    "gpu-cluster://<digest>, which the API never lets change once set")

# The role's session: long enough for efs-utils to refresh its credentials between mounts
# (it assumes the role again when they expire), as short as IAM allows otherwise.
_SESSION_SECONDS = 3600


class ServiceAccountIssuer(pulumi.ComponentResource):
    """The public issuer (bucket `storage.efs.issuerBucket`, its two documents), IAM's
    OpenID Connect provider for it, and the role only the EFS CSI driver's node service
    account assumes. The key set follows the controller's key: publish_keys, once the
    controller is installed."""

    def __init__(self, name: str, bucket_name: str, issuer: str, namespace: str,
                 service_account: str, controller_service_account: str,
                 opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:ServiceAccountIssuer", name, None, opts)
        opts = pulumi.ResourceOptions(parent=self)
        self._name, self.issuer = name, issuer
        self.bucket = aws.s3.Bucket(f"{name}-bucket", bucket=bucket_name,
                                    tags={"Name": bucket_name}, opts=opts)
        # Public objects through the bucket policy only: never ACLs.
        access = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access", bucket=self.bucket.id, block_public_acls=True,
            ignore_public_acls=True, block_public_policy=False, restrict_public_buckets=False,
            opts=opts)
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership", bucket=self.bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=opts)
        # SSE-S3, not KMS: STS reads the documents without credentials, so without KMS.
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption", bucket=self.bucket.id,
            rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=(
                    aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="AES256")))],
            opts=opts)
        self._policy = aws.s3.BucketPolicy(
            f"{name}-policy", bucket=self.bucket.id,
            policy=self.bucket.arn.apply(issuer_bucket_policy),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[access]))
        self.discovery = aws.s3.BucketObjectv2(
            f"{name}-discovery", bucket=self.bucket.id, key=DISCOVERY_KEY,
            content=discovery_document(issuer), content_type="application/json", opts=opts)
        self.provider = aws.iam.OpenIdConnectProvider(
            f"{name}-provider", url=issuer, client_id_lists=[AUDIENCE], opts=opts)
        self.role = aws.iam.Role(
            f"{name}-efs-node", max_session_duration=_SESSION_SECONDS,
            description="EFS CSI driver on the on-prem nodes (web identity)",
            assume_role_policy=self.provider.arn.apply(
                lambda arn: web_identity_trust_policy(arn, issuer, namespace, service_account)),
            opts=opts)
        # The driver's controller, which makes and removes the claims' access points
        # (components/aws/efs.py provisioner_policy); it never mounts.
        self.controller_role = aws.iam.Role(
            f"{name}-efs-controller", max_session_duration=_SESSION_SECONDS,
            description="EFS CSI controller on the on-prem nodes (web identity)",
            assume_role_policy=self.provider.arn.apply(
                lambda arn: web_identity_trust_policy(arn, issuer, namespace,
                                                      controller_service_account)),
            opts=opts)
        pulumi.log.warn(ISSUER_BUCKET_WARNING.format(
            bucket=bucket_name, service_account=service_account,
            controller_service_account=controller_service_account),
                        resource=self)
        self.register_outputs({"issuer": issuer, "roleArn": self.role.arn,
                               "controllerRoleArn": self.controller_role.arn})

    def publish_keys(self, public_key_pem: pulumi.Input[str]) -> aws.s3.BucketObjectv2:
        """The key set from the key the controller signs with (ControlPlane
        service_account_key)."""
        return aws.s3.BucketObjectv2(
            f"{self._name}-jwks", bucket=self.bucket.id, key=JWKS_KEY,
            content=pulumi.Output.from_input(public_key_pem).apply(lambda pem: jwks([pem])),
            content_type="application/json", opts=pulumi.ResourceOptions(parent=self))
