"""What EC2 instances that bootstrap themselves share (the cloud controller and the GPU
pools): secrets in SSM SecureStrings; the step bundle and each machine's boot plan in a
private S3 bucket (`BootStore`); an instance role that may read only its own parameters and
those two objects, and report its boot; and a small cloud-init user data,
boot/bootstrap.sh, that fetches both with that role, checks them against the digests it
carries and runs the plan's steps in order, stopping at the first failure
(boot/run-boot.sh). Its size no longer grows with the steps or their inputs."""

import base64
import email
import gzip
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Optional

import pulumi
import pulumi_aws as aws

from components.aws.buckets import private_bucket
from components.common.bundle import Bundle, step_bundle
from components.common.step_text import (
    Script,
    bundle_stdin,
    envelope,
    read_script,
    step_header,
)
from components.common.shell_text import python_without_docs, without_comment_lines
from components.hosts.steps import HostStep
from contract import ports

# EC2 refuses larger user data, even compressed.
USER_DATA_LIMIT_BYTES = 16384
EC2_SSH_PORT = ports.SSH
BOOTSTRAP = Script("boot/bootstrap.sh", standalone=True)
RECEIVE = "bundle/receive.sh"
S3_GET = "boot/s3-get.py"
BOOT_STEP = "boot"


def secret_parameter(name: str, parameter_name: str, value: pulumi.Input[str],
                     tags: Optional[dict], opts: pulumi.ResourceOptions,
                     key_id: Optional[pulumi.Input[str]] = None) -> aws.ssm.Parameter:
    """A SecureString, encrypted with the cluster's key `key_id` (components/aws/
    backup_policies.py) or else the account's AWS-managed SSM key."""
    return aws.ssm.Parameter(name, name=parameter_name, type="SecureString",
                             value=pulumi.Output.secret(value), tags=tags, key_id=key_id,
                             opts=opts)



def instance_policy(read_arns: Sequence[str], status_path: str,
                    object_arns: Sequence[str] = ()) -> str:
    """All an instance may do in AWS: read its own parameters (the AWS-managed SSM key
    decrypts them for any caller allowed to read them), read the objects its boot fetches
    (the bundle and its plan; their bucket's key needs no grant: components/aws/buckets.py)
    and write or delete its boot status below `status_path`."""
    # arn:aws:ssm:REGION:ACCOUNT:parameter/NAME (https://docs.aws.amazon.com/service-
    # authorization/latest/reference/list_awssystemsmanager.html): the same account and region.
    prefix = read_arns[0].split(":parameter/", 1)[0]
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadItsParameters", "Effect": "Allow", "Action": ["ssm:GetParameter"],
         "Resource": sorted(read_arns)},
        {"Sid": "ReportItsBoot", "Effect": "Allow",
         "Action": ["ssm:PutParameter", "ssm:DeleteParameter"],
         "Resource": f"{prefix}:parameter{status_path}/*"},
    ] + ([{"Sid": "FetchItsBoot", "Effect": "Allow", "Action": ["s3:GetObject"],
           "Resource": sorted(object_arns)}] if object_arns else [])})


def instance_profile(name: str, reads: Sequence[aws.ssm.Parameter], status_path: str,
                     tags: dict, opts: pulumi.ResourceOptions,
                     objects: Sequence[pulumi.Input[str]] = ()) -> aws.iam.InstanceProfile:
    """An instance role (and its profile) limited to `instance_policy`; `objects`: the ARNs
    of the S3 objects its boot fetches."""
    return boot_profile(name, instance_role(name, tags, opts), reads, status_path, opts,
                        objects)


def instance_role(name: str, tags: dict, opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """A role EC2 instances may take, with no permission yet (boot_profile grants them)."""
    return aws.iam.Role(
        name,
        assume_role_policy=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole"}]}),
        tags=tags, opts=opts)


def boot_profile(name: str, role: aws.iam.Role, reads: Sequence[aws.ssm.Parameter],
                 status_path: str, opts: pulumi.ResourceOptions,
                 objects: Sequence[pulumi.Input[str]] = ()) -> aws.iam.InstanceProfile:
    """`role`'s `instance_policy` and its instance profile."""
    policy = pulumi.Output.all(pulumi.Output.all(*[p.arn for p in reads]),
                               pulumi.Output.all(*objects)).apply(
        lambda arns: instance_policy(arns[0], status_path, arns[1]))
    aws.iam.RolePolicy(f"{name}-read-parameter", role=role.id, policy=policy, opts=opts)
    profile = aws.iam.InstanceProfile(name, role=role.name, opts=opts)
    # The role's ARN, for the policies that name it (the EFS file system's).
    profile.role_arn = role.arn
    return profile


@dataclass(frozen=True)
class BootReport:
    """Where a booting instance reports: its region and the SSM path its status goes under
    (one parameter per instance id)."""

    region: str
    status_parameter: str


class BootStore(pulumi.ComponentResource):
    """The bucket the instances of the stack fetch their boot from, holding the step bundle
    (`bundles/<digest>.tar.gz`, from the tarball's file: the state keeps its path and hash)
    and one plan a machine and content (`plans/<machine>/<sha256>.plan`: an instance
    launched from an older launch template still finds its own while a pool rolls)."""

    def __init__(self, name: str, cluster_name: str, opts: pulumi.ResourceOptions = None,
                 bundle: Optional[Bundle] = None):
        super().__init__("gpu-cluster:aws:BootStore", name, None, opts)
        self.bundle = bundle or step_bundle()
        self._opts = pulumi.ResourceOptions(parent=self)
        self.bucket = private_bucket(name, cluster_name, "boot", self._opts)
        self.bundle_key = f"bundles/{self.bundle.digest}.tar.gz"
        self.bundle_object = aws.s3.BucketObjectv2(
            f"{name}-bundle", bucket=self.bucket.id, key=self.bundle_key,
            source=pulumi.FileAsset(self.bundle.tarball_path()),
            content_type="application/gzip", opts=self._opts)
        self.register_outputs({"bucket": self.bucket.bucket})

    def object_arn(self, key: pulumi.Input[str]) -> pulumi.Output[str]:
        return pulumi.Output.concat(self.bucket.arn, "/", key)


@dataclass(frozen=True)
class MachineBoot:
    """A machine's boot: its user data, and the objects it fetches (its role may read
    them; it must not start before they exist)."""

    user_data: pulumi.Output[str]
    objects: list
    object_arns: list


def machine_boot(name: str, host: str, steps: Sequence[HostStep], store: BootStore,
                 report: BootReport, cloud_config: str = "",
                 opts: Optional[pulumi.ResourceOptions] = None) -> MachineBoot:
    """`<name>-boot-plan`, the plan of `steps` on `host`, and the user data that runs it:
    gzipped and base64-encoded, an optional #cloud-config part first."""
    text = boot_plan(host, steps)
    sha256 = text.apply(lambda plan: hashlib.sha256(plan.encode()).hexdigest())
    key = sha256.apply(lambda digest: f"plans/{host}/{digest}.plan")
    plan = aws.s3.BucketObjectv2(f"{name}-boot-plan", bucket=store.bucket.id, key=key,
                                 content=text, content_type="text/plain", opts=opts)
    bundle = store.bundle
    user_data = pulumi.Output.all(store.bucket.bucket, key, sha256).apply(
        lambda values: multipart_gzip_base64([bootstrap_part(host, {
            "AWS_REGION": report.region,
            "BOOT_STATUS_PARAMETER": report.status_parameter,
            "BOOT_BUCKET": values[0],
            "BOOT_BUNDLE_KEY": store.bundle_key,
            "BOOT_BUNDLE_SHA256": bundle.tarball_sha256,
            "BOOT_BUNDLE_DIGEST": bundle.digest,
            "BOOT_PLAN_KEY": values[1],
            "BOOT_PLAN_SHA256": values[2],
        })], cloud_config))
    return MachineBoot(user_data, [store.bundle_object, plan],
                       [store.object_arn(store.bundle_key), store.object_arn(key)])


def boot_plan(host: str, steps: Sequence[HostStep]) -> pulumi.Output[str]:
    """One line a step, `NAME BASE64`, BASE64 its stdin as over SSH (bundle_stdin), which
    boot/run-boot.sh runs in order. No secret: steps read theirs from SSM."""
    stdins = [envelope(host, step.step, step.script, step.env, render=bundle_stdin)
              for step in steps]
    return pulumi.Output.all(*stdins).apply(lambda texts: "".join(
        f"{step.step} {base64.b64encode(text.encode()).decode()}\n"
        for step, text in zip(steps, texts)))


def plan_steps(plan: str) -> list[tuple[str, str]]:
    """(name, stdin) of each step of a boot plan, in order."""
    return [(name, base64.b64decode(encoded).decode())
            for name, encoded in (line.split(" ", 1) for line in plan.splitlines() if line)]


def bootstrap_part(host: str, env: dict[str, str]) -> str:
    """The user data's shell part: its inputs, bundle/receive.sh as the function
    gpu_cluster_receive, then boot/bootstrap.sh; comments left out. cloud-init executes a
    part as a program: without "#!" it fails with "Exec format error. Missing #! in
    script?" (cloud-init 22.4 cloudinit/subp.py:94)."""
    env = {**env, "S3_GET": python_without_docs(read_script(S3_GET))}
    return ("#!/bin/bash\n" + step_header(host, BOOT_STEP, BOOTSTRAP, env)
            + "gpu_cluster_receive() {\n" + without_comment_lines(read_script(RECEIVE)) + "}\n"
            + without_comment_lines(read_script(BOOTSTRAP.path)))


def multipart_gzip_base64(scripts: list[str], cloud_config: str = "") -> str:
    raw = multipart_gzip(scripts, cloud_config)
    if len(raw) > USER_DATA_LIMIT_BYTES:
        raise ValueError(f"user data is {len(raw)} bytes gzipped, over EC2's 16 KiB")
    return base64.b64encode(raw).decode()


def boot_scripts(user_data: str) -> list[str]:
    """The scripts in user data made by multipart_gzip_base64, in the order they run (the
    bootstrap part)."""
    message = email.message_from_bytes(gzip.decompress(base64.b64decode(user_data)))
    return [part.get_payload(decode=True).decode() for part in message.get_payload()
            if part.get_content_type() == "text/x-shellscript"]


def multipart_gzip(scripts: list[str], cloud_config: str = "") -> bytes:
    """The user data before base64: what EC2's 16 KiB limit applies to. The same scripts
    always give the same bytes (a launch template changes only when its boot does): the
    MIME boundary is a digest of the content, not email's random one, and gzip's
    timestamp is zero."""
    digest = hashlib.sha256("\0".join([cloud_config, *scripts]).encode()).hexdigest()
    message = MIMEMultipart(boundary=f"gpu-cluster-boot-{digest[:32]}")
    if cloud_config:
        message.attach(MIMEText(cloud_config, "cloud-config"))
    for index, script in enumerate(scripts):
        part = MIMEText(script, "x-shellscript")
        part.add_header("Content-Disposition", "attachment", filename=f"{index:02d}.sh")
        message.attach(part)
    return gzip.compress(message.as_bytes(), mtime=0)
