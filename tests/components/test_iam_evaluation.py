"""Who may do what with the snapshots and the shared file system, evaluated: the KMS key's
policy, the backup bucket's policy and the EFS file system policy as the dev (cloud) and
prod (hybrid) previews render them, with the identity policies the program gives its roles,
for each principal: a pool node's role, the controller's role, a read-only user, an
administrator and the restore role (tests/iam_evaluator.py follows AWS's documented
evaluation logic). moto 5.2 enforces a key policy's deny only by action name, without
principals or conditions (moto/kms/policy_validator.py), so it cannot answer these."""

import json

import pytest

from preview import aws_mocks
from tests.builders import example_plan
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

ACCOUNT = aws_mocks.PREVIEW_ACCOUNT
# AWS managed policies, as published (https://docs.aws.amazon.com/aws-managed-policy/latest/
# reference/AmazonS3ReadOnlyAccess.html; ReadOnlyAccess's KMS part; AdministratorAccess;
# AmazonElasticFileSystemClientFullAccess).
S3_READ_ONLY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:Get*", "s3:List*", "s3:Describe*",
                                   "s3-object-lambda:Get*", "s3-object-lambda:List*"],
     "Resource": "*"},
    {"Effect": "Allow", "Action": ["kms:Describe*", "kms:Get*", "kms:List*",
                                   "ssm:Describe*", "ssm:Get*", "ssm:List*"], "Resource": "*"}]}
ADMINISTRATOR = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "*", "Resource": "*"}]}
EFS_CLIENT_FULL_ACCESS = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["elasticfilesystem:ClientMount",
                                   "elasticfilesystem:ClientRootAccess",
                                   "elasticfilesystem:ClientWrite",
                                   "elasticfilesystem:DescribeMountTargets"],
     "Resource": "*"}]}


def aws_managed_s3_key_policy(region: str) -> dict:
    """The aws/s3 key's policy (what a bucket encrypted with "aws:kms" and no key id
    uses): every principal of the account, through S3
    (https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#aws-managed-key;
    the aws/s3 key policy as GetKeyPolicy shows it)."""
    return {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": "*"},
        "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*",
                   "kms:DescribeKey"], "Resource": "*",
        "Condition": {"StringEquals": {"kms:CallerAccount": ACCOUNT,
                                       "kms:ViaService": f"s3.{region}.amazonaws.com"}}}]}


def aws_managed_ssm_key_policy(region: str) -> dict:
    """The aws/ssm key's policy, what a SecureString without a KeyId uses: every principal
    of the account, through Parameter Store (as aws/s3's)."""
    policy = aws_managed_s3_key_policy(region)
    policy["Statement"][0]["Condition"]["StringEquals"]["kms:ViaService"] = (
        f"ssm.{region}.amazonaws.com")
    return policy


def arn_of(resource) -> str:
    return aws_mocks.resource(resource.type, resource.name, resource.inputs)[1]["arn"]


class Stack:
    """The principals and the policies of one previewed stack."""

    def __init__(self, plan):
        self.plan = plan
        [provider] = plan.of_type("pulumi:providers:aws")
        self.region = provider.inputs["region"]
        roles = {r.urn: r for r in plan.of_type("aws:iam/role:Role")}
        policies: dict = {}
        # A policy names its role, or the role of an instance profile (`profile.role`).
        profiles = {r.urn: r.property_dependencies["role"]
                    for r in plan.of_type("aws:iam/instanceProfile:InstanceProfile")}
        for attached in plan.of_type("aws:iam/rolePolicy:RolePolicy"):
            named = attached.property_dependencies["role"]
            [role] = {u for u in named + [v for n in named for v in profiles.get(n, [])]
                      if u in roles}
            policies.setdefault(role, []).append(json.loads(attached.inputs["policy"]))
        # The provider's default tags reach every role (components/aws/tags.py).
        tags = tuple(json.loads(provider.inputs["defaultTags"])["tags"].items())
        self.roles = {r.name: Principal(r.name, arn_of(r), tuple(policies.get(u, ())), tags)
                      for u, r in roles.items()}
        self.read_only = Principal("read-only user", f"arn:aws:iam::{ACCOUNT}:user/auditor",
                                   (S3_READ_ONLY,))
        self.administrator = Principal("administrator", f"arn:aws:iam::{ACCOUNT}:user/admin",
                                       (ADMINISTRATOR,))
        [self.bucket] = [r for r in plan.of_type("aws:s3/bucket:Bucket")
                         if r.name.endswith("-backups-bucket")]
        [self.bucket_policy] = [r.inputs["policy"] for r in
                                plan.of_type("aws:s3/bucketPolicy:BucketPolicy")
                                if r.name.endswith("-backups-policy")]
        keys = [r for r in plan.of_type("aws:kms/key:Key") if r.name.endswith("-backups-key")]
        self.key_arn = arn_of(keys[0]) if keys else f"arn:aws:kms:{self.region}:{ACCOUNT}:alias/aws/s3"
        self.key_policy = (keys[0].inputs["policy"] if keys
                           else aws_managed_s3_key_policy(self.region))
        self.locked = any(r.name.endswith("-backups-object-lock") for r in plan.resources)

    def role(self, suffix: str) -> Principal:
        [found] = [p for name, p in self.roles.items() if name.endswith(suffix)]
        return found

    def _s3(self, who: Principal, action: str) -> str:
        bucket = arn_of(self.bucket)
        cluster = self.bucket.inputs["bucketPrefix"].split("-backups-")[0]
        request = Request(action, f"{bucket}/{cluster}/control-plane/snapshot",
                          {"aws:SecureTransport": "true"})
        return evaluate(who, request, self.bucket_policy)

    def _kms(self, who: Principal, action: str) -> str:
        request = Request(action, self.key_arn, {
            "kms:ViaService": f"s3.{self.region}.amazonaws.com",
            "kms:EncryptionContext:aws:s3:arn": arn_of(self.bucket)})
        return evaluate(who, request, self.key_policy, resource_policy_required=True)

    def reads_secret(self, who: Principal, name: str) -> bool:
        """Whether `who` reads the SecureString `name` decrypted: ssm:GetParameter, then
        Parameter Store's kms:Decrypt as `who`, with the parameter's ARN as context."""
        [parameter] = [p for p in self.plan.of_type("aws:ssm/parameter:Parameter")
                       if p.inputs["name"] == name]
        arn = arn_of(parameter)
        key = parameter.inputs.get("keyId")
        # The preview's mocks name SSM ARNs in a region of their own; AWS, in the stack's.
        in_region = arn.replace(f":{aws_mocks.PREVIEW_REGION}:", f":{self.region}:")
        request = Request("kms:Decrypt", key or f"arn:aws:kms:{self.region}:{ACCOUNT}:alias/aws/ssm", {
            "kms:ViaService": f"ssm.{self.region}.amazonaws.com",
            "kms:EncryptionContext:PARAMETER_ARN": in_region})
        policy = self.key_policy if key else aws_managed_ssm_key_policy(self.region)
        return (evaluate(who, Request("ssm:GetParameter", arn)) == ALLOW
                and evaluate(who, request, policy, resource_policy_required=True) == ALLOW)

    def may(self, who: Principal) -> dict:
        """What `who` may do with a kept snapshot, each as S3 and KMS would decide."""
        delete = self._s3(who, "s3:DeleteObjectVersion") == ALLOW
        if self.locked:  # governance mode: only with s3:BypassGovernanceRetention
            delete = delete and self._s3(who, "s3:BypassGovernanceRetention") == ALLOW
        return {
            "read": self._s3(who, "s3:GetObject") == ALLOW
            and self._kms(who, "kms:Decrypt") == ALLOW,
            "decrypt": self._kms(who, "kms:Decrypt") == ALLOW,
            "put": self._s3(who, "s3:PutObject") == ALLOW
            and self._kms(who, "kms:GenerateDataKey") == ALLOW,
            "delete": delete,
            "shorten its lock": self._s3(who, "s3:PutObjectRetention") == ALLOW,
        }


@pytest.fixture(scope="module", params=["dev", "prod"])
def stack(request):
    return Stack(example_plan(request.param))


NOTHING = {"read": False, "decrypt": False, "put": False, "delete": False,
           "shorten its lock": False}


def test_only_the_restore_role_reads_or_decrypts_a_snapshot(stack):
    assert stack.may(stack.role("-backups-restore")) == {**NOTHING, "read": True,
                                                         "decrypt": True}
    for who in (stack.read_only, stack.administrator, stack.role("control-plane-host-role")):
        may = stack.may(who)
        assert not may["read"] and not may["decrypt"], (who.name, may)
    # Held by explicit denies, which no identity policy can lift.
    assert stack._s3(stack.read_only, "s3:GetObject") == EXPLICIT_DENY
    assert stack._kms(stack.administrator, "kms:Decrypt") == EXPLICIT_DENY
    assert stack._kms(stack.administrator, "kms:ReEncryptFrom") == EXPLICIT_DENY
    assert stack._kms(stack.administrator, "kms:CreateGrant") == EXPLICIT_DENY


def test_the_controller_adds_snapshots_and_destroys_none(stack):
    assert stack.may(stack.role("control-plane-host-role")) == {**NOTHING, "put": True}
    # Under Object Lock: even an administrator deletes a kept version only by bypassing
    # governance retention, on purpose.
    assert stack.locked
    assert stack.may(stack.administrator)["delete"]


def test_a_node_and_a_read_only_user_may_do_nothing_with_them(stack):
    assert stack.may(stack.read_only) == NOTHING
    nodes = [p for name, p in stack.roles.items() if name.endswith("-node")]
    assert len(nodes) == (3 if stack.plan.stack == "dev" else 0)
    for node in nodes:
        assert stack.may(node) == NOTHING, node.name


def test_the_key_is_managed_by_the_accounts_administrators_only(stack):
    for action in ("kms:PutKeyPolicy", "kms:ScheduleKeyDeletion", "kms:DescribeKey"):
        assert stack._kms(stack.administrator, action) == ALLOW, action
        for who in (stack.role("control-plane-host-role"), stack.role("-backups-restore")):
            assert stack._kms(who, action) == IMPLICIT_DENY, (who.name, action)
    # The read-only user describes it (kms:Describe* is in its policy), nothing more.
    assert stack._kms(stack.read_only, "kms:PutKeyPolicy") == IMPLICIT_DENY


def test_who_may_assume_the_restore_role(stack):
    [role] = [r for r in stack.plan.of_type("aws:iam/role:Role")
              if r.name.endswith("-backups-restore")]
    trust = role.inputs["assumeRolePolicy"]
    assume = Request("sts:AssumeRole", arn_of(role))
    # backup.restorePrincipals unset: the account, i.e. whoever's own policies allow it.
    assert evaluate(stack.administrator, assume, trust, resource_policy_required=True) == ALLOW
    for who in (stack.read_only, stack.role("control-plane-host-role")):
        assert evaluate(who, assume, trust, resource_policy_required=True) == IMPLICIT_DENY


def test_the_controllers_secrets_are_read_by_its_role_and_administrators_only():
    stack = Stack(example_plan("dev"))
    ca_key = "/gpu-cluster/dev/control-plane/ca-key"
    [parameter] = [p for p in stack.plan.of_type("aws:ssm/parameter:Parameter")
                   if p.inputs["name"] == ca_key]
    # ssm:GetParameter alone (a read-only user) no longer decrypts it; a pool's node may
    # not get it at all.
    assert not stack.reads_secret(stack.read_only, ca_key)
    assert parameter.inputs["keyId"] == stack.key_arn
    assert stack.reads_secret(stack.role("control-plane-host-role"), ca_key)
    assert stack.reads_secret(stack.administrator, ca_key)
    assert not stack.reads_secret(stack.role("-h100-node"), ca_key)
    assert not stack.reads_secret(stack.role("-backups-restore"), ca_key)


# The EFS file system: the cloud stack (dev) mounts with IAM and TLS, its policy as the
# preview renders it; the hybrid stack (prod) sets storage.efs.anonymousNfs (its on-prem hosts
# mount with the kernel's NFS client).

def _efs(who: Principal, action: str, policy, tls: bool = True, resource=None) -> str:
    return evaluate(who, efs_client_request(action, resource or FILE_SYSTEM, tls), policy)


FILE_SYSTEM = f"arn:aws:elasticfilesystem:us-west-2:{ACCOUNT}:file-system/fs-0123"
MOUNT, WRITE, ROOT = EFS_CLIENT_ACTIONS
NOBODY = Principal("anonymous NFS client", ANONYMOUS)
# A user whose own policy allows every client action (AWS's managed client policy).
EFS_CLIENT = Principal("EFS client user", f"arn:aws:iam::{ACCOUNT}:user/researcher",
                       (EFS_CLIENT_FULL_ACCESS,))


def _stack_file_system(plan) -> tuple[str, str]:
    [policy] = [r.inputs["policy"] for r in
                plan.of_type("aws:efs/fileSystemPolicy:FileSystemPolicy")]
    [file_system] = plan.of_type("aws:efs/fileSystem:FileSystem")
    return arn_of(file_system), policy


def test_the_cloud_file_system_wants_iam_and_tls_and_its_pool_nodes_only():
    stack = Stack(example_plan("dev"))
    arn, policy = _stack_file_system(stack.plan)
    nodes = [p for name, p in stack.roles.items() if name.endswith("-node")]
    assert len(nodes) == 3
    for node in nodes:
        for action in (MOUNT, WRITE, ROOT):
            assert _efs(node, action, policy, resource=arn) == ALLOW, (node.name, action)
            assert _efs(node, action, policy, tls=False, resource=arn) == EXPLICIT_DENY, (
                node.name, action)
    # Everyone else, with TLS or without, whatever their own policies allow: nothing. The
    # controller runs no kubelet on the cloud layout; a client without IAM is anonymous.
    others = (stack.role("control-plane-host-role"), stack.role("-backups-restore"),
              stack.read_only, stack.administrator, EFS_CLIENT, NOBODY)
    for who in others:
        for action in (MOUNT, WRITE, ROOT):
            assert _efs(who, action, policy, resource=arn) == EXPLICIT_DENY, (who.name, action)


def test_the_policy_without_anonymous_nfs_follows_its_node_roles():
    from components.aws.efs import efs_policy

    stack = Stack(example_plan("prod"))
    controller = stack.role("control-plane-host-role")
    policy = efs_policy(FILE_SYSTEM, [controller.arn], anonymous_nfs=False)
    assert _efs(controller, ROOT, policy) == ALLOW
    assert _efs(controller, MOUNT, policy, tls=False) == EXPLICIT_DENY
    for who in (NOBODY, EFS_CLIENT, stack.read_only, stack.role("-backups-restore")):
        assert _efs(who, MOUNT, policy) == EXPLICIT_DENY, who.name


def test_the_hybrid_file_system_policy_is_explicit_about_anonymous_nfs():
    arn, policy = _stack_file_system(example_plan("prod"))
    assert json.loads(policy)["Statement"][0]["Resource"] == arn
    # anonymousNfs: any client the security group admits is root; through a mount target only.
    request = Request(ROOT, arn, {"elasticfilesystem:AccessedViaMountTarget": "true"})
    assert evaluate(NOBODY, request, policy) == ALLOW
    request.context["elasticfilesystem:AccessedViaMountTarget"] = "false"
    assert evaluate(NOBODY, request, policy) == IMPLICIT_DENY


def test_only_the_pools_make_and_remove_the_cluster_s_access_points():
    stack = Stack(example_plan("dev"))
    arn, _ = _stack_file_system(stack.plan)
    region, account = arn.split(":")[3:5]
    access_point = f"arn:aws:elasticfilesystem:{region}:{account}:access-point/fsap-0abc"
    ours = {"aws:RequestTag/efs.csi.aws.com/cluster": "true",
            "aws:RequestTag/gpu-cluster/cluster": "dev"}
    tagged = {"aws:ResourceTag/efs.csi.aws.com/cluster": "true",
              "aws:ResourceTag/gpu-cluster/cluster": "dev"}
    create = Request("elasticfilesystem:CreateAccessPoint", arn, ours)
    delete = Request("elasticfilesystem:DeleteAccessPoint", access_point, tagged)
    for node in (p for name, p in stack.roles.items() if name.endswith("-node")):
        assert evaluate(node, create) == ALLOW, node.name
        assert evaluate(node, delete) == ALLOW, node.name
        assert evaluate(node, Request("elasticfilesystem:DescribeMountTargets", arn)) == ALLOW
        # Not on another file system, not untagged, not another cluster's access points.
        other = arn.replace("fs-", "fs-other")
        assert evaluate(node, Request(create.action, other, ours)) == IMPLICIT_DENY
        assert evaluate(node, Request(create.action, arn, {})) == IMPLICIT_DENY
        theirs = {**tagged, "aws:ResourceTag/gpu-cluster/cluster": "prod"}
        assert evaluate(node, Request(delete.action, access_point, theirs)) == IMPLICIT_DENY
        assert evaluate(node, Request("elasticfilesystem:DeleteFileSystem", arn)) == \
            IMPLICIT_DENY
    for who in (stack.role("control-plane-host-role"), stack.role("-backups-restore"),
                stack.read_only):
        assert evaluate(who, create) == IMPLICIT_DENY, who.name
        assert evaluate(who, delete) == IMPLICIT_DENY, who.name


def test_the_evaluator_follows_the_documented_logic():
    """The rules of the module's docstring, each on a policy of one or two statements."""
    user = Principal("user", f"arn:aws:iam::{ACCOUNT}:user/u", (ADMINISTRATOR,))
    other = Principal("other", "arn:aws:iam::111111111111:user/o", (ADMINISTRATOR,))
    request = Request("s3:GetObject", "arn:aws:s3:::b/k")
    deny_unless = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": "s3:get*", "Resource": "arn:aws:s3:::b/*",
        "Condition": {"ArnNotEquals": {"aws:PrincipalArn": "arn:aws:iam::*:role/r"}}}]}
    # An explicit deny beats an allow; action names ignore case; ARN wildcards match.
    assert evaluate(user, request, deny_unless) == EXPLICIT_DENY
    # A negated operator matches a key the request lacks (an anonymous caller).
    assert evaluate(Principal("nobody", ANONYMOUS), request, deny_unless) == EXPLICIT_DENY
    assert evaluate(Principal("r", f"arn:aws:iam::{ACCOUNT}:role/r", (ADMINISTRATOR,)),
                    request, deny_unless) == ALLOW
    # The account as principal delegates: the caller's own policy must allow too.
    to_account = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
        "Action": "kms:Decrypt", "Resource": "*"}]}
    decrypt = Request("kms:Decrypt", "arn:aws:kms:r:1:key/k")
    assert evaluate(user, decrypt, to_account, resource_policy_required=True) == ALLOW
    assert evaluate(Principal("bare", user.arn), decrypt, to_account,
                    resource_policy_required=True) == IMPLICIT_DENY
    # Another account's root is not this account's principal; a key needs its policy.
    assert evaluate(other, decrypt, to_account, resource_policy_required=True) == IMPLICIT_DENY
    assert evaluate(user, decrypt, None, resource_policy_required=True) == IMPLICIT_DENY
    # A missing key fails a plain operator.
    conditional = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "*",
        "Condition": {"StringEquals": {"aws:SourceVpce": "vpce-1"}}}]}
    assert evaluate(Principal("bare", user.arn), request, conditional) == IMPLICIT_DENY
    # An element it does not read is refused, not skipped.
    with pytest.raises(AssertionError, match="NotAction"):
        evaluate(user, request, {"Version": "2012-10-17", "Statement": [{
            "Effect": "Deny", "Principal": "*", "NotAction": "s3:*", "Resource": "*"}]})
