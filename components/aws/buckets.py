"""What every S3 bucket of the program has: no public access, objects owned by the bucket
owner, encrypted with the AWS managed KMS key, and reachable over TLS only. Its users get
what they may do from their own roles' policies."""

import json
from collections.abc import Callable
from typing import Optional

import pulumi
import pulumi_aws as aws

# Bucket names are at most 63 characters; S3 adds 26 to a prefix (bucket_prefix, at most
# 37: terraform-provider-aws internal/service/s3/bucket.go).
_PREFIX_CHARACTERS = 28


def tls_only_policy(bucket_arn: str) -> str:
    """Refuses every request over plain HTTP (aws:SecureTransport,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})


def private_bucket(name: str, cluster_name: str, purpose: str,
                   opts: pulumi.ResourceOptions,
                   encryption_key: Optional[Callable[[aws.s3.Bucket], pulumi.Input[str]]] = None,
                   policy: Callable[[str], pulumi.Input[str]] = tls_only_policy) -> aws.s3.Bucket:
    """`<name>-bucket` named `<cluster>-<purpose>-...` and its settings, each a resource
    named after `name`. SSE-KMS with the AWS managed key needs no KMS grant: its key policy
    lets the account's principals use it through S3
    (https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#aws-managed-key);
    a bucket given `encryption_key` (the ARN of a customer-managed key, made from the
    bucket) is encrypted under that key, whose policy says who may use it. `policy`: the bucket policy from the bucket's ARN,
    at least tls_only_policy's statement."""
    bucket = aws.s3.Bucket(
        f"{name}-bucket", bucket_prefix=f"{cluster_name[:_PREFIX_CHARACTERS]}-{purpose}-",
        tags={"Name": f"{cluster_name}-{purpose}"}, opts=opts)
    aws.s3.BucketPublicAccessBlock(
        f"{name}-public-access", bucket=bucket.id, block_public_acls=True,
        block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
        opts=opts)
    aws.s3.BucketOwnershipControls(
        f"{name}-ownership", bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        opts=opts)
    kms_key_arn = encryption_key(bucket) if encryption_key is not None else None
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{name}-encryption", bucket=bucket.id,
        rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
            apply_server_side_encryption_by_default=(
                aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                    sse_algorithm="aws:kms", kms_master_key_id=kms_key_arn)),
            bucket_key_enabled=True)],
        opts=opts)
    aws.s3.BucketPolicy(f"{name}-policy", bucket=bucket.id,
                        policy=bucket.arn.apply(policy), opts=opts)
    return bucket
