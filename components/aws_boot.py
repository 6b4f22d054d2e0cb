"""What EC2 instances that bootstrap themselves share (the cloud controller and the GPU
pools): a secret in an SSM SecureString, an instance role that may read only that one
parameter, and cloud-init user data that runs the same step scripts as SSH would."""

import base64
import email
import gzip
import json
from collections.abc import Sequence
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import pulumi
import pulumi_aws as aws

# EC2 refuses larger user data, even compressed.
USER_DATA_LIMIT_BYTES = 16384


def secret_parameter(name: str, parameter_name: str, value: pulumi.Input[str], tags: dict,
                     opts: pulumi.ResourceOptions) -> aws.ssm.Parameter:
    """A SecureString (encrypted with the account's AWS-managed SSM key)."""
    return aws.ssm.Parameter(name, name=parameter_name, type="SecureString",
                             value=pulumi.Output.secret(value), tags=tags, opts=opts)


def read_parameter_policy(parameter_arn: str) -> str:
    """All an instance may do in AWS: read its one parameter (the AWS-managed SSM key
    decrypts it for any caller allowed to read the parameter)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Action": ["ssm:GetParameter"], "Resource": parameter_arn}]})


def instance_profile_reading(name: str, parameter: aws.ssm.Parameter, tags: dict,
                             opts: pulumi.ResourceOptions) -> aws.iam.InstanceProfile:
    """An instance role (and its profile) whose only permission is reading `parameter`."""
    role = aws.iam.Role(
        name,
        assume_role_policy=json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole"}]}),
        tags=tags, opts=opts)
    aws.iam.RolePolicy(f"{name}-read-parameter", role=role.id,
                       policy=parameter.arn.apply(read_parameter_policy), opts=opts)
    return aws.iam.InstanceProfile(name, role=role.name, opts=opts)


def boot_user_data(parts: Sequence[pulumi.Input[str]],
                   cloud_config: str = "") -> pulumi.Output[str]:
    """cloud-init runs each script part in order, as root, once per instance; an optional
    #cloud-config part comes first. Gzipped and base64-encoded."""
    return pulumi.Output.all(*parts).apply(
        lambda scripts: multipart_gzip_base64(list(scripts), cloud_config))


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
    """The user data before base64: what EC2's 16 KiB limit applies to."""
    message = MIMEMultipart()
    if cloud_config:
        message.attach(MIMEText(cloud_config, "cloud-config"))
    for index, script in enumerate(scripts):
        part = MIMEText(script, "x-shellscript")
        part.add_header("Content-Disposition", "attachment", filename=f"{index:02d}.sh")
        message.attach(part)
    return gzip.compress(message.as_bytes(), mtime=0)
