"""What EC2 instances that bootstrap themselves share (the cloud controller and the GPU
pools): secrets in SSM SecureStrings, an instance role that may read only those and report
its boot, and cloud-init user data that runs the same step scripts as SSH would, in order,
stopping at the first failure."""

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

from components.hosts.steps import HostStep
from components.common.remote_step import (
    SSM_READER,
    DataFile,
    read_script,
    render_step_functions,
)
from components.common.shell_text import python_without_docs, without_comment_lines

# EC2 refuses larger user data, even compressed.
USER_DATA_LIMIT_BYTES = 16384
EC2_SSH_PORT = 22
BOOT_RUNNER = DataFile("boot/run-step.sh")


def secret_parameter(name: str, parameter_name: str, value: pulumi.Input[str],
                     tags: Optional[dict], opts: pulumi.ResourceOptions) -> aws.ssm.Parameter:
    """A SecureString (encrypted with the account's AWS-managed SSM key)."""
    return aws.ssm.Parameter(name, name=parameter_name, type="SecureString",
                             value=pulumi.Output.secret(value), tags=tags, opts=opts)



def instance_policy(read_arns: Sequence[str], status_path: str) -> str:
    """All an instance may do in AWS: read its own parameters (the AWS-managed SSM key
    decrypts them for any caller allowed to read them) and write or delete its boot status
    below `status_path`."""
    # arn:aws:ssm:REGION:ACCOUNT:parameter/NAME (https://docs.aws.amazon.com/service-
    # authorization/latest/reference/list_awssystemsmanager.html): the same account and region.
    prefix = read_arns[0].split(":parameter/", 1)[0]
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "ReadItsParameters", "Effect": "Allow", "Action": ["ssm:GetParameter"],
         "Resource": sorted(read_arns)},
        {"Sid": "ReportItsBoot", "Effect": "Allow",
         "Action": ["ssm:PutParameter", "ssm:DeleteParameter"],
         "Resource": f"{prefix}:parameter{status_path}/*"},
    ]})


def instance_profile(name: str, reads: Sequence[aws.ssm.Parameter], status_path: str,
                     tags: dict, opts: pulumi.ResourceOptions) -> aws.iam.InstanceProfile:
    """An instance role (and its profile) limited to `instance_policy`."""
    role = aws.iam.Role(
        name,
        assume_role_policy=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole"}]}),
        tags=tags, opts=opts)
    policy = pulumi.Output.all(*[p.arn for p in reads]).apply(
        lambda arns: instance_policy(arns, status_path))
    aws.iam.RolePolicy(f"{name}-read-parameter", role=role.id, policy=policy, opts=opts)
    return aws.iam.InstanceProfile(name, role=role.name, opts=opts)


@dataclass(frozen=True)
class BootReport:
    """Where a booting instance reports: its region and the SSM path its status goes under
    (one parameter per instance id)."""

    region: str
    status_parameter: str


def boot_user_data(host: str, steps: Sequence[HostStep], report: BootReport,
                   cloud_config: str = "") -> pulumi.Output[str]:
    """cloud-init runs each step's part in order, as root, once per instance, and a step
    runs only when the one before it completed; an optional #cloud-config part comes
    first. Gzipped and base64-encoded."""
    names = [list(step.env) for step in steps]
    values = [value for step in steps for value in step.env.values()]

    def render(known: list) -> str:
        rendered, at = [], 0
        for step, keys in zip(steps, names):
            env = dict(zip(keys, known[at:at + len(keys)]))
            rendered.append(HostStep(step.step, step.script, env))
            at += len(keys)
        return multipart_gzip_base64(render_boot_parts(host, rendered, report), cloud_config)

    return pulumi.Output.all(*values).apply(render)


# Where the first part keeps the step libraries for every part (boot/run-step.sh).
BOOT_LIBRARY_DIR = '${GPU_CLUSTER_ROOT:-}/var/lib/gpu-cluster/boot/lib'


def render_boot_parts(host: str, steps: Sequence[HostStep], report: BootReport) -> list[str]:
    """The executable part of each step, for inputs that are all known. The first part
    carries what every part needs once: the SSM client and the step libraries."""
    libraries = sorted({library for step in steps for library in step.script.libraries})
    parts = []
    for index, step in enumerate(steps):
        boot_env = {
            "BOOT_PREVIOUS_STEP": steps[index - 1].step if index else "",
            "BOOT_LAST_STEP": "true" if index == len(steps) - 1 else "false",
            "BOOT_STATUS_PARAMETER": report.status_parameter,
            "AWS_REGION": report.region,
        }
        if index == 0:
            boot_env["SSM_READER"] = python_without_docs(SSM_READER.text())
            boot_env["BOOT_LIBRARIES"] = " ".join(libraries)
            boot_env.update({f"BOOT_LIBRARY_{number}": without_comment_lines(read_script(path))
                             for number, path in enumerate(libraries)})
        parts.append(
            # cloud-init executes a part as a program: without "#!" it fails with "Exec
            # format error. Missing #! in script?" (cloud-init 22.4 cloudinit/subp.py:94).
            "#!/bin/bash\n"
            + render_step_functions(host, step.step, step.script, {**boot_env, **step.env},
                                    boot_libraries=BOOT_LIBRARY_DIR)
            + without_comment_lines(BOOT_RUNNER.text()) + "gpu_cluster_boot_step\n")
    return parts


def multipart_gzip_base64(scripts: list[str], cloud_config: str = "") -> str:
    raw = multipart_gzip(scripts, cloud_config)
    if len(raw) > USER_DATA_LIMIT_BYTES:
        raise ValueError(f"user data is {len(raw)} bytes gzipped, over EC2's 16 KiB")
    return base64.b64encode(raw).decode()


def boot_scripts(user_data: str) -> list[str]:
    """The scripts in user data made by multipart_gzip_base64, in the order they run."""
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
