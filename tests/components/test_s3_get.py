"""s3-get.py, the downloader boot user data carries. Its GET is signed exactly as
botocore's S3SigV4Auth signs it; end to end, run as a subprocess over real HTTP on
loopback (the boot's shrunk text on stdin, and the file), it downloads from moto's server
with a role session the fake IMDSv2 (conftest.py) hands out, and moto (IAM
authentication on) checks the signature and the role's policy. Nothing here leaves
127.0.0.1."""

import ast
import datetime
import gzip
import hashlib
import json
import os
import subprocess
import time
from unittest import mock

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from components.common.bundle import SCRIPTS_DIR
from components.common.shell_text import python_without_docs
from tests.components.aws_fakes import (CREDENTIALS, PYTHON, REGION, SETUP, TIMEOUT_SECONDS,
                                        boto3_client, post, role_session, unchecked)
from tests.components.fake_imds import FakeImds

# Runs a program beyond Python and bash (moto's server, promtool, curl, shellcheck):
# not in `make quick`.
pytestmark = pytest.mark.tools

SCRIPT = SCRIPTS_DIR / "boot" / "s3-get.py"
TEXT = SCRIPT.read_text()
# What the boot user data carries, run as `python3 - REGION BUCKET KEY FILE`.
BOOT_TEXT = python_without_docs(TEXT)
USAGE = "usage: s3-get.py REGION BUCKET KEY FILE  write object KEY of BUCKET to FILE\n"
BUCKET = "dev-boot-0123456789"
BUNDLE_KEY = "dev/bundles/steps-3f2a.tar.gz"
OTHER_KEY = "dev/plans/control-plane.plan"
# Not text: every byte value, and more than one read's worth.
BUNDLE = bytes(range(256)) * 1024 + b"\x1f\x8b tail"


def client_module():
    namespace = {"__name__": "s3_get"}
    exec(compile(TEXT, str(SCRIPT), "exec"), namespace)
    return namespace


@pytest.mark.parametrize("endpoint, key, token", [
    (None, BUNDLE_KEY, True),
    (None, "dev/plans/gpu pool+1.plan", True),
    ("http://127.0.0.1:5000", BUNDLE_KEY, True),
    ("http://127.0.0.1:5000/", BUNDLE_KEY, False),
], ids=["virtual-hosted", "quoted-key", "path-style", "no-token"])
def test_the_get_is_signed_as_botocore_signs_it(endpoint, key, token, monkeypatch):
    if endpoint:
        monkeypatch.setenv("S3_ENDPOINT_URL", endpoint)
    else:
        monkeypatch.delenv("S3_ENDPOINT_URL", raising=False)
    credentials = CREDENTIALS if token else {
        name: CREDENTIALS[name] for name in ("AccessKeyId", "SecretAccessKey")}
    url, headers = client_module()["signed_get"](credentials, REGION, BUCKET, key,
                                                 "20261127T031505Z")
    quoted = key.replace(" ", "%20").replace("+", "%2B")
    assert url == (f"http://127.0.0.1:5000/{BUCKET}/{quoted}" if endpoint else
                   f"https://{BUCKET}.s3.{REGION}.amazonaws.com/{quoted}")
    request = AWSRequest(method="GET", url=url)
    signer = S3SigV4Auth(Credentials(credentials["AccessKeyId"],
                                     credentials["SecretAccessKey"], credentials.get("Token")),
                         "s3", REGION)
    with mock.patch("botocore.auth.get_current_datetime",
                    return_value=datetime_of("20261127T031505Z")):
        signer.add_auth(request)
    sent = {name.lower(): value for name, value in request.headers.items()}
    assert headers["authorization"] == sent["authorization"]
    # Every header botocore signs and sends, with the same value (urllib adds Host).
    assert {name: value for name, value in headers.items() if name != "host"} == sent
    assert headers["host"] == ("127.0.0.1:5000" if endpoint
                               else f"{BUCKET}.s3.{REGION}.amazonaws.com")


def datetime_of(amz_date: str) -> datetime.datetime:
    return datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")


@pytest.mark.parametrize("args", [[], [REGION, BUCKET, BUNDLE_KEY],
                                  [REGION, BUCKET, BUNDLE_KEY, "file", "extra"]])
@pytest.mark.parametrize("stdin", [False, True], ids=["file", "boot"])
def test_a_usage_error_exits_2_with_the_usage(args, stdin):
    command = [PYTHON, "-", *args] if stdin else [PYTHON, str(SCRIPT), *args]
    result = subprocess.run(command, input=BOOT_TEXT if stdin else None, capture_output=True,
                            text=True, timeout=TIMEOUT_SECONDS, env={})
    assert (result.returncode, result.stdout, result.stderr) == (2, "", USAGE)


@pytest.mark.parametrize("text", [TEXT, BOOT_TEXT], ids=["file", "boot"])
def test_it_parses_as_python_3_8(text):
    # Syntax only; INSTANCE_PYTHON runs the tests below with an actual 3.8.
    ast.parse(text, feature_version=(3, 8))


def test_the_boot_text_is_small_and_keeps_the_usage():
    assert BOOT_TEXT.startswith(f'"""{USAGE.rstrip()}"""\n')
    assert "IMDSv2" not in BOOT_TEXT  # the rest of the module docstring
    # Boot user data aims at 4 KiB gzipped in all; this is its share.
    assert len(gzip.compress(BOOT_TEXT.encode(), 9)) < 1700


# End to end: moto's server, the fake IMDSv2, and the client as a subprocess.

@pytest.fixture(scope="module")
def bucket(aws):
    """The bucket with both objects (made before authentication is on) and the boot
    role's session."""
    with unchecked(aws.endpoint):
        s3 = boto3_client("s3", aws.endpoint, SETUP)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        s3.put_object(Bucket=BUCKET, Key=BUNDLE_KEY, Body=BUNDLE)
        s3.put_object(Bucket=BUCKET, Key=OTHER_KEY, Body=b"plan of another machine\n")
        # A role that may get exactly one object, BUNDLE_KEY of BUCKET.
        return role_session(aws.endpoint, "gpu-cluster-boot", policy=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{BUCKET}/{BUNDLE_KEY}"}]}))


def download(imds, aws, target, key: str, stdin: bool = True, retry_seconds: str = "0"):
    """s3-get.py as the boot runs it (its shrunk text on stdin), or as a file."""
    command = [PYTHON, "-"] if stdin else [PYTHON, str(SCRIPT)]
    arguments = dict(
        input=BOOT_TEXT if stdin else None, capture_output=True, text=True,
        timeout=TIMEOUT_SECONDS,
        env={"IMDS_ENDPOINT_URL": imds.url, "S3_ENDPOINT_URL": aws.endpoint,
             "S3_GET_RETRY_SECONDS": retry_seconds, "PATH": "/usr/bin:/bin"})
    return subprocess.run([*command, REGION, BUCKET, key, str(target)], **arguments)


@pytest.mark.parametrize("stdin", [True, False], ids=["boot", "file"])
def test_the_allowed_object_is_downloaded_byte_for_byte(imds, aws, bucket, tmp_path, stdin):
    imds.state.credentials = dict(bucket)
    target = tmp_path / "steps.tar.gz"
    target.write_bytes(b"an older bundle")  # replaced

    result = download(imds, aws, target, BUNDLE_KEY, stdin=stdin)

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert hashlib.sha256(target.read_bytes()).hexdigest() == hashlib.sha256(BUNDLE).hexdigest()
    assert target.stat().st_mode & 0o777 == 0o600
    assert [path.name for path in tmp_path.iterdir()] == ["steps.tar.gz"]
    # IMDSv2 only: a token, then the role's name and its credentials with it.
    assert [(method, path) for method, path, _ in imds.state.requests] == [
        ("PUT", "/latest/api/token"),
        ("GET", "/latest/meta-data/iam/security-credentials/"),
        ("GET", f"/latest/meta-data/iam/security-credentials/{FakeImds.ROLE}")]


def test_another_key_of_the_same_bucket_is_denied(imds, aws, bucket, tmp_path):
    imds.state.credentials = dict(bucket)
    target = tmp_path / "boot.plan"

    result = download(imds, aws, target, OTHER_KEY)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (f"s3-get.py: s3://{BUCKET}/{OTHER_KEY}: HTTP 403 AccessDenied "
                             "(attempt 1)\n")
    assert list(tmp_path.iterdir()) == []  # no file, no temporary file left


def test_a_missing_key_is_named_with_no_such_key(imds, aws, tmp_path):
    # The account's own credentials: moto answers NoSuchKey (AWS answers AccessDenied to a
    # role that may not list the bucket).
    post(f"{aws.endpoint}/moto-api/reset-auth", b"inf")
    try:
        imds.state.credentials = {"AccessKeyId": "AKIAMOTOSETUP", "SecretAccessKey": "setup"}
        result = download(imds, aws, tmp_path / "x", "dev/nope")
    finally:
        post(f"{aws.endpoint}/moto-api/reset-auth", b"0")
    assert result.returncode == 1
    assert f"s3://{BUCKET}/dev/nope: HTTP 404 NoSuchKey" in result.stderr


def test_a_wrong_secret_key_is_refused_and_not_printed(imds, aws, bucket, tmp_path):
    imds.state.credentials = dict(bucket, SecretAccessKey="not-the-session-secret")
    result = download(imds, aws, tmp_path / "x", BUNDLE_KEY)
    assert result.returncode == 1 and "HTTP 403 SignatureDoesNotMatch" in result.stderr
    for secret in ("not-the-session-secret", bucket["Token"], bucket["AccessKeyId"]):
        assert secret not in result.stderr


def test_a_network_error_is_named(imds, aws, tmp_path):
    result = subprocess.run(
        [PYTHON, "-", REGION, BUCKET, BUNDLE_KEY, str(tmp_path / "x")], input=BOOT_TEXT,
        capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
        env={"IMDS_ENDPOINT_URL": imds.url, "S3_ENDPOINT_URL": "http://127.0.0.1:9",
             "S3_GET_RETRY_SECONDS": "0", "PATH": "/usr/bin:/bin"})
    assert (result.returncode, result.stderr) == (1, (
        f"s3-get.py: s3://{BUCKET}/{BUNDLE_KEY}: URLError: <urlopen error [Errno 111] "
        "Connection refused> (attempt 1)\n"))


def test_a_role_not_usable_yet_is_tried_again_with_growing_waits(imds, aws, bucket, tmp_path):
    """As in an instance's first seconds: IMDS's tokens are refused (401) until the
    client's second attempt has failed; the third gets through."""
    imds.state.credentials = dict(bucket)
    # Decided when each token is handed out, not by a thread racing the client's requests.
    imds.state.refused_puts = 2
    started = time.monotonic()
    result = download(imds, aws, tmp_path / "steps.tar.gz", BUNDLE_KEY, retry_seconds="30")
    elapsed = time.monotonic() - started

    assert (result.returncode, result.stderr) == (0, "")
    assert (tmp_path / "steps.tar.gz").read_bytes() == BUNDLE
    assert sum(method == "PUT" for method, _, _ in imds.state.requests) == 3
    assert 3 <= elapsed < 10  # waited 1 s, then 2 s


def test_the_retries_stop_when_their_time_is_spent(imds, aws, bucket, tmp_path):
    imds.state.credentials = dict(bucket)
    started = time.monotonic()
    result = download(imds, aws, tmp_path / "x", OTHER_KEY, retry_seconds="1.5")
    elapsed = time.monotonic() - started
    # Waits of 1 s and 0.5 s: three attempts.
    assert result.returncode == 1 and result.stderr.endswith("AccessDenied (attempt 3)\n")
    assert 1.5 <= elapsed < 6


def test_the_file_written_is_only_readable_by_root_whatever_the_umask(imds, aws, bucket,
                                                                      tmp_path):
    imds.state.credentials = dict(bucket)
    previous = os.umask(0)
    try:
        result = download(imds, aws, tmp_path / "steps.tar.gz", BUNDLE_KEY, stdin=False)
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "steps.tar.gz").stat().st_mode & 0o777 == 0o600
