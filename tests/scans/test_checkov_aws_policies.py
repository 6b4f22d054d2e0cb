"""checkov over the AWS policies the example stacks render: the backups' KMS key policy,
bucket policy, restore role (trust and permissions), the controller's writer policy and the
EFS file system policy, as the CloudFormation resources that carry the same documents
(checkov's cloudformation framework reads them; the program itself is Pulumi). No finding
may remain but those tests/scans/checkov_skips.py AWS lists with their reason."""

import fnmatch
import json

import pytest

from tests.builders import example_plan
from tests.scans import checkov_skips
from tests.scans.test_checkov import assert_accepted, checkov, failures

# The example stacks on AWS.
STACKS = ["dev", "prod", "rke2"]


def _one(plan, type_: str, suffix: str):
    [found] = [r for r in plan.of_type(type_) if r.name.endswith(suffix)]
    return found


def template(plan) -> dict:
    """The stack's policies, each on the CloudFormation resource that holds such a document."""
    policy = "aws:iam/rolePolicy:RolePolicy"
    resources = {
        "BackupKey": {"Type": "AWS::KMS::Key", "Properties": {
            "EnableKeyRotation": _one(plan, "aws:kms/key:Key", "-backups-key").inputs[
                "enableKeyRotation"],
            "KeyPolicy": json.loads(_one(plan, "aws:kms/key:Key", "-backups-key").inputs["policy"])}},
        "BackupBucketPolicy": {"Type": "AWS::S3::BucketPolicy", "Properties": {
            "Bucket": "backups", "PolicyDocument": json.loads(_one(
                plan, "aws:s3/bucketPolicy:BucketPolicy", "-backups-policy").inputs["policy"])}},
        "RestoreRole": {"Type": "AWS::IAM::Role", "Properties": {
            "AssumeRolePolicyDocument": json.loads(_one(
                plan, "aws:iam/role:Role", "-backups-restore").inputs["assumeRolePolicy"]),
            "Policies": [{"PolicyName": "restore-read", "PolicyDocument": json.loads(
                _one(plan, policy, "-backups-restore-read").inputs["policy"])}]}},
        "ControllerBackupWriter": {"Type": "AWS::IAM::Policy", "Properties": {
            "PolicyName": "backup-writer", "Roles": ["controller"],
            "PolicyDocument": json.loads(_one(plan, policy, "-backup-writer").inputs["policy"])}},
    }
    efs = [r for r in plan.of_type("aws:efs/fileSystemPolicy:FileSystemPolicy")]
    if efs:
        resources["SharedFileSystem"] = {"Type": "AWS::EFS::FileSystem", "Properties": {
            "Encrypted": True, "FileSystemPolicy": json.loads(efs[0].inputs["policy"])}}
    return {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    root = tmp_path_factory.mktemp("aws-policies")
    for stack in STACKS:
        (root / f"{stack}.json").write_text(json.dumps(template(example_plan(stack)), indent=1))
    return root


def test_the_rendered_aws_policies_pass_checkov(templates):
    reports = checkov(templates, ["cloudformation"])
    assert {report["check_type"] for report in reports} == {"cloudformation"}
    checked = sum(r["summary"]["passed"] + r["summary"]["failed"] for r in reports)
    assert checked >= 40, "checkov checked almost nothing: were the templates found?"
    assert_accepted(
        [failed for _, failed in failures(reports)], checkov_skips.AWS,
        lambda skip, failed: skip.check == failed["check_id"]
        and fnmatch.fnmatchcase(_key(failed), skip.where),
        lambda failed: f"{failed['check_id']} {failed['check_name']}: {_key(failed)}")


def _key(failed: dict) -> str:
    """`<stack>:<logical id>`, as checkov_skips.AWS names a policy."""
    stack = failed["file_path"].strip("/").removesuffix(".json")
    return f"{stack}:{failed['resource'].split('.')[-1]}"


def test_the_controllers_autoscaler_policy_passes_checkov(tmp_path):
    """cluster-autoscaler's grant on the controllers' roles (components/aws/
    autoscaler_policy.py; on cloud stacks with RKE2, which no example stack is), whole."""
    from components.aws.autoscaler_policy import autoscaler_policy

    (tmp_path / "autoscaler.json").write_text(json.dumps({
        "AWSTemplateFormatVersion": "2010-09-09", "Resources": {"ControllerAutoscaler": {
            "Type": "AWS::IAM::Policy", "Properties": {
                "PolicyName": "cluster-autoscaler", "Roles": ["controller"],
                "PolicyDocument": autoscaler_policy("dev", "us-west-2")}}}}, indent=1))
    reports = checkov(tmp_path, ["cloudformation"])
    assert reports and all(r["summary"]["passed"] > 0 for r in reports)
    assert failures(reports) == []
