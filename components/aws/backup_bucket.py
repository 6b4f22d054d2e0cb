"""The S3 bucket the control plane's snapshots go to on the AWS layouts: private, encrypted
and TLS only (components/aws/buckets.py), versioned, each snapshot a new version of one
object, the newest `retention` versions kept by its lifecycle. The controller's role may
only put that object."""

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aws.buckets import private_bucket

# Each snapshot is a new version of this object below the cluster's prefix.
SNAPSHOT_OBJECT = "snapshot"


def backup_prefix(cluster_name: str) -> str:
    """The key prefix the controller may write below."""
    return f"{cluster_name}/control-plane"


def backup_writer_policy(bucket_arn: str, prefix: str) -> str:
    """All the controller may do with the bucket: put objects below `prefix`. It cannot
    read, list or delete them, nor an older version (a compromised controller cannot
    destroy the snapshots the lifecycle keeps). The bucket's key needs no KMS grant
    (components/aws/buckets.py)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "PutItsSnapshots", "Effect": "Allow", "Action": ["s3:PutObject"],
        "Resource": f"{bucket_arn}/{prefix}/*"}]})


@dataclass
class BackupBucketArgs:
    cluster_name: str
    # How many snapshots are kept: the current version and retention - 1 older ones.
    retention: int


class BackupBucket(pulumi.ComponentResource):
    def __init__(self, name: str, args: BackupBucketArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:BackupBucket", name, None, opts)
        # The snapshots outlive the stack: `pulumi destroy` leaves the bucket and its
        # settings in the account (retain_on_delete), as it leaves EFS data.
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        self.bucket = private_bucket(name, args.cluster_name, "backups", keep)
        bucket = self.bucket.id
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning", bucket=bucket,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled"),
            opts=keep)
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle", bucket=bucket, rules=[lifecycle_rule(args.retention)],
            # S3 refuses noncurrent-version rules until versioning is configured.
            opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(
                depends_on=[versioning])))
        self.object_key = f"{backup_prefix(args.cluster_name)}/{SNAPSHOT_OBJECT}"
        self.location = pulumi.Output.concat("s3://", self.bucket.bucket, "/", self.object_key)
        self.register_outputs({"location": self.location})

    def allow_writes_by(self, name: str, role: pulumi.Input[str], cluster_name: str,
                        opts: pulumi.ResourceOptions) -> aws.iam.RolePolicy:
        """Lets `role` (the controller's instance role) put the snapshots."""
        return aws.iam.RolePolicy(
            name, role=role,
            policy=self.bucket.arn.apply(
                lambda arn: backup_writer_policy(arn, backup_prefix(cluster_name))),
            opts=opts)


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
