"""The S3 bucket the control plane's snapshots go to on the AWS layouts: private and TLS
only (components/aws/buckets.py), encrypted under a customer-managed KMS key, versioned,
each snapshot a new version of one object, the newest `retention` versions kept by its
lifecycle and each locked for backup.lockDays (S3 Object Lock). The controller's role may
only put that object; only the restore role reads and decrypts it
(components/aws/backup_policies.py). The key also encrypts the controller's SSM
SecureStrings."""

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.aws.backup_policies import (
    backup_bucket_policy,
    backup_key_policy,
    backup_writer_policy,
    restore_policy,
    restore_trust_policy,
)
from components.aws.buckets import private_bucket
from components.aws.ssm_paths import cluster_prefix
from components.aws.tags import CLUSTER_TAG

# Each snapshot is a new version of this object below the cluster's prefix.
SNAPSHOT_OBJECT = "snapshot"


def backup_prefix(cluster_name: str) -> str:
    """The key prefix the controller may write below."""
    return f"{cluster_name}/control-plane"


@dataclass(frozen=True, kw_only=True)
class BackupBucketArgs:
    cluster_name: str
    # How many snapshots are kept: the current version and retention - 1 older ones.
    retention: int
    region: str
    # backup.lockDays and backup.restorePrincipals.
    lock_days: int = 7
    restore_principals: Sequence[str] = field(default_factory=tuple)


class BackupBucket(pulumi.ComponentResource):
    def __init__(self, name: str, args: BackupBucketArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:BackupBucket", name, None, opts)
        # The snapshots outlive the stack: `pulumi destroy` leaves the bucket and its
        # settings in the account (retain_on_delete), as it leaves EFS data.
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        prefix = backup_prefix(args.cluster_name)
        caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        account = caller.arn.apply(lambda arn: f"arn:{arn.split(':')[1]}:iam::"
                                               f"{arn.split(':')[4]}:root")
        self.restore_role = aws.iam.Role(
            f"{name}-restore", description=f"{args.cluster_name}: reads and decrypts the "
            "control plane's snapshots",
            assume_role_policy=account.apply(
                lambda root: restore_trust_policy(args.restore_principals, root)),
            # Kept with the key whose policy names it.
            opts=keep)
        self.bucket = private_bucket(
            name, args.cluster_name, "backups", keep,
            encryption_key=lambda bucket: self._create_key(name, args, bucket, keep),
            policy=lambda arn: self.restore_role.arn.apply(
                lambda role: backup_bucket_policy(arn, role)))
        bucket = self.bucket.id
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning", bucket=bucket,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled"),
            opts=keep)
        after_versioning = pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(
            depends_on=[versioning]))
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle", bucket=bucket, rules=[lifecycle_rule(args.retention)],
            # S3 refuses noncurrent-version rules until versioning is configured.
            opts=after_versioning)
        # Object Lock on the existing versioned bucket, without replacing it (the Bucket's
        # own object_lock_enabled would): S3 enables it through PutObjectLockConfiguration
        # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock-configure.html,
        # "Enable Object Lock when creating a new S3 bucket" / "...on an existing bucket").
        # Governance mode: only a principal allowed s3:BypassGovernanceRetention (an
        # administrator) can remove a version before its date; the lifecycle waits for it.
        aws.s3.BucketObjectLockConfiguration(
            f"{name}-object-lock", bucket=bucket, object_lock_enabled="Enabled",
            rule=aws.s3.BucketObjectLockConfigurationRuleArgs(
                default_retention=aws.s3.BucketObjectLockConfigurationRuleDefaultRetentionArgs(
                    mode="GOVERNANCE", days=args.lock_days)),
            opts=after_versioning)
        aws.iam.RolePolicy(f"{name}-restore-read", role=self.restore_role.id,
                           policy=self.bucket.arn.apply(lambda arn: restore_policy(arn, prefix)),
                           opts=keep)
        self.object_key = f"{backup_prefix(args.cluster_name)}/{SNAPSHOT_OBJECT}"
        self.location = pulumi.Output.concat("s3://", self.bucket.bucket, "/", self.object_key)
        self.register_outputs({"location": self.location,
                               "restoreRole": self.restore_role.arn})

    def _create_key(self, name: str, args: BackupBucketArgs, bucket: aws.s3.Bucket,
                    keep: pulumi.ResourceOptions) -> pulumi.Output[str]:
        """The snapshots' key, whose policy names the bucket and the restore role; kept
        after a destroy with the bucket, as its snapshots cannot be read without it. AWS
        rotates its material yearly (enable_key_rotation)."""
        self.key = aws.kms.Key(
            f"{name}-key", description=f"{args.cluster_name}: the control plane's snapshots",
            enable_key_rotation=True, deletion_window_in_days=30,
            policy=pulumi.Output.all(self.restore_role.arn, bucket.arn).apply(
                lambda v: backup_key_policy(
                    args.region, v[1], v[0], _parameters(args.region, v[0], args.cluster_name),
                    (CLUSTER_TAG, args.cluster_name))),
            opts=keep)
        aws.kms.Alias(f"{name}-key-alias",
                      name=f"alias/gpu-cluster/{args.cluster_name}/backups",
                      target_key_id=self.key.key_id, opts=pulumi.ResourceOptions(parent=self))
        return self.key.arn

    def allow_writes_by(self, name: str, role: pulumi.Input[str], cluster_name: str,
                        opts: pulumi.ResourceOptions) -> aws.iam.RolePolicy:
        """Lets `role` (the controller's instance role) put the snapshots."""
        return aws.iam.RolePolicy(
            name, role=role,
            policy=pulumi.Output.all(self.bucket.arn, self.key.arn).apply(
                lambda v: backup_writer_policy(v[0], backup_prefix(cluster_name), v[1])),
            opts=opts)


def _parameters(region: str, role_arn: str, cluster_name: str) -> str:
    """The ARN pattern of the cluster's SSM parameters (arn:aws:ssm:REGION:ACCOUNT:
    parameter/NAME, the account the role's)."""
    parts = role_arn.split(":")
    return f"arn:{parts[1]}:ssm:{region}:{parts[4]}:parameter{cluster_prefix(cluster_name)}/*"


def lifecycle_rule(retention: int) -> aws.s3.BucketLifecycleConfigurationRuleArgs:
    """Keeps the `retention` newest versions: the current one and retention - 1 older
    ones (NewerNoncurrentVersions); the rest go a day after they became noncurrent."""
    return aws.s3.BucketLifecycleConfigurationRuleArgs(
        id="keep-retention-snapshots", status="Enabled",
        filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
        noncurrent_version_expiration=(
            aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=1,
                newer_noncurrent_versions=retention - 1 if retention > 1 else None)),
        abort_incomplete_multipart_upload=(
            aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                days_after_initiation=1)))
