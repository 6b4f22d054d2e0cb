"""Who may do what with the control plane's snapshots on AWS, as policy documents: the
customer-managed KMS key's policy, the bucket's policy, the controller's (writer's) and the
restore role's. Only the restore role decrypts or reads a snapshot; the controller may only
add one (S3 Object Lock keeps each for backup.lockDays: components/aws/backup_bucket.py).
tests/components/test_iam_evaluation.py evaluates them for every principal."""

import json
from collections.abc import Sequence

# What an administrator of the key may do: AWS's default key policy for key administrators
# (https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html
# #key-policy-default-allow-administrators), with kms:CreateAlias for kms:Create* (so no
# kms:CreateGrant: a grant could hand out kms:Decrypt past this policy). No cryptographic
# operation: those follow below, each for whom it is meant.
KEY_ADMINISTRATION = [
    "kms:CreateAlias", "kms:Describe*", "kms:Enable*", "kms:List*", "kms:Put*",
    "kms:Update*", "kms:Revoke*", "kms:Disable*", "kms:Get*", "kms:Delete*",
    "kms:TagResource", "kms:UntagResource", "kms:ScheduleKeyDeletion",
    "kms:CancelKeyDeletion",
]
# What reads the plaintext of something the key encrypted: kms:Decrypt, and kms:ReEncrypt*
# (ReEncryptFrom decrypts under this key to encrypt under another,
# https://docs.aws.amazon.com/kms/latest/APIReference/API_ReEncrypt.html), and a grant
# that could allow either.
DECRYPTING = ["kms:Decrypt", "kms:ReEncrypt*", "kms:CreateGrant"]


def account_of(arn: str) -> str:
    """The account of an ARN (arn:PARTITION:SERVICE:REGION:ACCOUNT:...)."""
    return arn.split(":")[4]


def _partition(arn: str) -> str:
    return arn.split(":")[1]


def _through_s3(region: str, bucket_arn: str) -> dict:
    """Only as S3's server-side encryption of this bucket: with S3 Bucket Keys, S3 asks
    KMS with the bucket's ARN as the encryption context
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html, "Changes to
    note before enabling an S3 Bucket Key"; kms:ViaService,
    https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-via-service)."""
    return {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com",
                             "kms:EncryptionContext:aws:s3:arn": bucket_arn}}


def _through_ssm(region: str, parameters: str) -> dict:
    """Only as Parameter Store's encryption of the cluster's SecureStrings, whose
    encryption context is the parameter's ARN
    (https://docs.aws.amazon.com/systems-manager/latest/userguide/secure-string-parameter-kms-encryption.html,
    "Using the Parameter Store encryption context")."""
    return {"StringEquals": {"kms:ViaService": f"ssm.{region}.amazonaws.com"},
            "StringLike": {"kms:EncryptionContext:PARAMETER_ARN": parameters}}


def backup_key_policy(region: str, bucket_arn: str, restore_role_arn: str,
                      parameters: str, cluster_tag: tuple[str, str]) -> str:
    """The snapshots' key. Administrators of the account manage it but cannot use it to
    decrypt; principals of the account whose own policies allow it (the controller's role,
    backup_writer_policy) may have S3 generate data keys for this bucket: a single-part
    PutObject needs kms:GenerateDataKey only
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html,
    "Permissions"; the upload script sends one PUT, components/scripts/aws/s3-object.py;
    a multipart upload would need kms:Decrypt as well,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html#mpuAndPermissions).
    Only the restore role decrypts, through S3 for this bucket; an explicit deny holds
    that against any identity policy (an explicit deny overrides every allow:
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
    The cluster's SSM SecureStrings (`parameters`, an ARN pattern) are under the same key:
    Parameter Store decrypts them for the roles the program makes, which carry
    `cluster_tag` (aws:PrincipalTag), and for principals whose own policies allow
    kms:Decrypt on the key (administrators); which parameter each may read stays its
    ssm:GetParameter permission. A read-only user's ssm:GetParameter no longer suffices."""
    root = f"arn:{_partition(restore_role_arn)}:iam::{account_of(restore_role_arn)}:root"
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "KeyAdministration", "Effect": "Allow", "Principal": {"AWS": root},
         "Action": KEY_ADMINISTRATION, "Resource": "*"},
        {"Sid": "SnapshotsEncryptedThroughS3", "Effect": "Allow", "Principal": {"AWS": root},
         "Action": "kms:GenerateDataKey", "Resource": "*",
         "Condition": _through_s3(region, bucket_arn)},
        {"Sid": "RestoreRoleDecryptsThroughS3", "Effect": "Allow",
         "Principal": {"AWS": restore_role_arn}, "Action": "kms:Decrypt", "Resource": "*",
         "Condition": _through_s3(region, bucket_arn)},
        # Whoever deploys stores them and reads them back: the provider reads a parameter
        # decrypted after writing it (terraform-provider-aws internal/service/ssm/
        # parameter.go, findParameterByName(..., withDecryption=true)).
        {"Sid": "ClusterSecretsStoredThroughSsm", "Effect": "Allow",
         "Principal": {"AWS": root}, "Action": ["kms:Encrypt", "kms:GenerateDataKey",
                                                "kms:Decrypt"],
         "Resource": "*", "Condition": _through_ssm(region, parameters)},
        {"Sid": "ClusterRolesReadClusterSecretsThroughSsm", "Effect": "Allow",
         "Principal": {"AWS": "*"}, "Action": "kms:Decrypt", "Resource": "*",
         "Condition": {**_through_ssm(region, parameters), "StringEquals": {
             "kms:ViaService": f"ssm.{region}.amazonaws.com",
             "kms:CallerAccount": account_of(restore_role_arn),
             f"aws:PrincipalTag/{cluster_tag[0]}": cluster_tag[1]}}},
        # Parameter Store's own decrypts are held by the statement above instead.
        {"Sid": "NobodyElseDecrypts", "Effect": "Deny", "Principal": "*",
         "Action": DECRYPTING, "Resource": "*",
         "Condition": {"ArnNotEquals": {"aws:PrincipalArn": restore_role_arn},
                       "StringNotEquals": {"kms:ViaService": f"ssm.{region}.amazonaws.com"}}},
    ]})


def backup_bucket_policy(bucket_arn: str, restore_role_arn: str) -> str:
    """TLS only (components/aws/buckets.py), and no principal but the restore role reads a
    snapshot, whatever its own policies allow (aws:PrincipalArn is the role's ARN for any
    of its sessions,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
         "Resource": [bucket_arn, f"{bucket_arn}/*"],
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
        {"Sid": "OnlyTheRestoreRoleReads", "Effect": "Deny", "Principal": "*",
         "Action": ["s3:GetObject", "s3:GetObjectVersion"], "Resource": f"{bucket_arn}/*",
         "Condition": {"ArnNotEquals": {"aws:PrincipalArn": restore_role_arn}}},
    ]})


def backup_writer_policy(bucket_arn: str, prefix: str, key_arn: str) -> str:
    """All the controller may do with the bucket: put objects below `prefix`, which the
    bucket encrypts under its key. It cannot read, list or delete them, nor change their
    retention (a compromised controller cannot destroy the snapshots kept)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "PutItsSnapshots", "Effect": "Allow", "Action": ["s3:PutObject"],
         "Resource": f"{bucket_arn}/{prefix}/*"},
        {"Sid": "EncryptedUnderTheBackupKey", "Effect": "Allow",
         "Action": ["kms:GenerateDataKey"], "Resource": key_arn},
    ]})


def restore_trust_policy(principals: Sequence[str], account_arn: str) -> str:
    """Who may assume the restore role: backup.restorePrincipals, else the account (only
    principals whose own policies allow sts:AssumeRole on it: its administrators;
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html#principal-accounts)."""
    trusted = sorted(principals) or [account_arn]
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "WhoRestores", "Effect": "Allow", "Principal": {"AWS": trusted},
        "Action": "sts:AssumeRole"}]})


def restore_policy(bucket_arn: str, prefix: str) -> str:
    """What a restore needs: list the snapshots' versions and read one (the key's policy
    lets this role decrypt it)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "ListTheSnapshots", "Effect": "Allow", "Action": ["s3:ListBucketVersions"],
         "Resource": bucket_arn, "Condition": {"StringLike": {"s3:prefix": f"{prefix}/*"}}},
        {"Sid": "ReadASnapshot", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:GetObjectVersion"],
         "Resource": f"{bucket_arn}/{prefix}/*"},
    ]})
