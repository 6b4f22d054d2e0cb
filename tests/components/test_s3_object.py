"""s3-object.py, the S3 client the controller's backups upload with. Its PUT is signed as
botocore signs it; end to end, run as a subprocess over real HTTP on loopback, it uploads
to moto's server with a role session the fake IMDSv2 of test_ssm_parameter.py hands out,
and moto (IAM authentication on) checks the signature and the role's policy. Nothing here
leaves 127.0.0.1."""

import base64
import datetime
import hashlib
import json
import subprocess
from unittest import mock

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from components.common.step_text import SCRIPTS_DIR, SSM_READER
from tests.components import test_ssm_parameter as ssm_tests
from tests.components.test_ssm_parameter import (
    CREDENTIALS,
    PYTHON,
    REGION,
    TIMEOUT_SECONDS,
    boto3_client,
    post,
)

# Runs a program beyond Python and bash (moto's server, promtool, curl, shellcheck):
# not in `make quick`.
pytestmark = pytest.mark.tools

# test_ssm_parameter.py's fixtures: moto's server on loopback and a fake IMDSv2.
aws, imds_server, imds = ssm_tests.aws, ssm_tests.imds_server, ssm_tests.imds
SCRIPT = SCRIPTS_DIR / "aws" / "s3-object.py"
BUCKET = "dev-backups-0123456789"
PREFIX = "dev/control-plane"
KEY = f"arn:aws:kms:{REGION}:123456789012:key/0d1e2f30-0000-4000-8000-000000000000"


def client_module(monkeypatch):
    monkeypatch.setenv("SSM_CLIENT", str(SCRIPTS_DIR / SSM_READER.path))
    namespace = {"__name__": "s3_object"}
    exec(compile(SCRIPT.read_text(), str(SCRIPT), "exec"), namespace)
    return namespace


def test_the_put_is_signed_as_botocore_signs_it(monkeypatch):
    monkeypatch.delenv("S3_ENDPOINT_URL", raising=False)
    client = client_module(monkeypatch)
    body = b"snapshot bytes"
    url, host, path = client["object_url"](REGION, BUCKET, f"{PREFIX}/k0s snapshot")
    assert url == f"https://{BUCKET}.s3.{REGION}.amazonaws.com/{PREFIX}/k0s%20snapshot"
    now = datetime.datetime(2026, 11, 23, 3, 30, 5, tzinfo=datetime.timezone.utc)
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    # Signed by ssm-parameter.py's sigv4, the instance clients' one signer.
    headers = client["signed_put_headers"](client["ssm_client"](), CREDENTIALS, REGION, host,
                                           path, body, now, md5)
    request = AWSRequest(method="PUT", url=url, data=body,
                         headers={"Content-Type": "application/octet-stream",
                                  "Content-MD5": md5})
    signer = S3SigV4Auth(Credentials(CREDENTIALS["AccessKeyId"],
                                     CREDENTIALS["SecretAccessKey"], CREDENTIALS["Token"]),
                         "s3", REGION)
    with mock.patch("botocore.auth.get_current_datetime",
                    return_value=now.replace(tzinfo=None)):
        signer.add_auth(request)
    assert headers["authorization"] == request.headers["Authorization"]


def role_session(endpoint: str) -> dict:
    """A session of a role that may put objects under PREFIX of BUCKET only, as the
    controller's role (components/aws/backup_policies.py backup_writer_policy)."""
    from components.aws.backup_policies import backup_writer_policy

    setup = {"AccessKeyId": "AKIAMOTOSETUP", "SecretAccessKey": "setup"}
    iam, sts = boto3_client("iam", endpoint, setup), boto3_client("sts", endpoint, setup)
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
        "Action": "sts:AssumeRole"}]}
    arn = iam.create_role(RoleName="gpu-cluster-controller",
                          AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName="gpu-cluster-controller", PolicyName="backups",
                        PolicyDocument=backup_writer_policy(f"arn:aws:s3:::{BUCKET}", PREFIX, KEY))
    session = sts.assume_role(RoleArn=arn, RoleSessionName="i-0123")["Credentials"]
    return {key: session[key] for key in ("AccessKeyId", "SecretAccessKey")} | {
        "Token": session["SessionToken"]}


@pytest.fixture(scope="module")
def bucket(aws):
    """The bucket (made before authentication is on) and the controller role's session."""
    post(f"{aws.endpoint}/moto-api/reset-auth", b"100")
    setup = {"AccessKeyId": "AKIAMOTOSETUP", "SecretAccessKey": "setup"}
    s3 = boto3_client("s3", aws.endpoint, setup)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    # As components/aws/backup_bucket.py sets it: each version locked, governance mode.
    s3.put_object_lock_configuration(Bucket=BUCKET, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled",
        "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 7}}})
    session = role_session(aws.endpoint)
    post(f"{aws.endpoint}/moto-api/reset-auth", b"0")
    return session


def upload(imds, aws, tmp_path, key: str, content: bytes) -> subprocess.CompletedProcess:
    snapshot = tmp_path / "snapshot"
    snapshot.write_bytes(content)
    return subprocess.run(
        [PYTHON, str(SCRIPT), "put", REGION, BUCKET, key, str(snapshot)],
        capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
        env={"IMDS_ENDPOINT_URL": imds.url, "S3_ENDPOINT_URL": aws.endpoint,
             "SSM_CLIENT": str(SCRIPTS_DIR / SSM_READER.path), "PATH": "/usr/bin:/bin"})


def test_each_upload_is_a_new_version_of_the_object(imds, aws, bucket, tmp_path):
    imds.state.credentials = dict(bucket)
    key = f"{PREFIX}/k0s-snapshot"
    for content in (b"first", b"second"):
        result = upload(imds, aws, tmp_path, key, content)
        assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    # The role may not read what it wrote (backup_writer_policy): read as the account.
    s3 = boto3_client("s3", aws.endpoint, bucket)
    with pytest.raises(s3.exceptions.ClientError, match="AccessDenied"):
        s3.get_object(Bucket=BUCKET, Key=key)
    post(f"{aws.endpoint}/moto-api/reset-auth", b"5")
    try:
        s3 = boto3_client("s3", aws.endpoint, {"AccessKeyId": "AKIAMOTOSETUP",
                                               "SecretAccessKey": "setup"})
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"second"
        versions = s3.list_object_versions(Bucket=BUCKET, Prefix=key)["Versions"]
        assert len(versions) == 2
        # Object Lock: a kept version outlives a delete by anyone without the bypass.
        first = versions[-1]["VersionId"]
        assert s3.head_object(Bucket=BUCKET, Key=key, VersionId=first)[
            "ObjectLockMode"] == "GOVERNANCE"
        with pytest.raises(s3.exceptions.ClientError, match="AccessDenied"):
            s3.delete_object(Bucket=BUCKET, Key=key, VersionId=first)
        assert len(s3.list_object_versions(Bucket=BUCKET, Prefix=key)["Versions"]) == 2
    finally:
        post(f"{aws.endpoint}/moto-api/reset-auth", b"0")


def test_a_key_outside_its_prefix_is_denied(imds, aws, bucket, tmp_path):
    imds.state.credentials = dict(bucket)
    result = upload(imds, aws, tmp_path, "other/k0s-snapshot", b"x")
    assert result.returncode == 1 and result.stdout == ""
    assert "HTTP 403" in result.stderr and "AccessDenied" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_wrong_secret_key_is_refused(imds, aws, bucket, tmp_path):
    imds.state.credentials = dict(bucket, SecretAccessKey="not-the-session-secret")
    result = upload(imds, aws, tmp_path, f"{PREFIX}/k0s-snapshot", b"x")
    assert result.returncode == 1 and "SignatureDoesNotMatch" in result.stderr


def test_a_usage_error_exits_2():
    result = subprocess.run([PYTHON, str(SCRIPT), "get", REGION], capture_output=True,
                            text=True, timeout=TIMEOUT_SECONDS, env={})
    assert result.returncode == 2
    assert result.stderr.startswith("usage: s3-object.py put REGION BUCKET KEY FILE")
