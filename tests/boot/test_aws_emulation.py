"""The boot sandbox with AWS emulated in it (tests/boot/aws_emulation.py): hand-written
user data runs the real python3 on s3-get.py's boot text to fetch an object from S3 and on
ssm-parameter.py's to read a SecureString and report its status to SSM, with the role
credentials IMDSv2 hands out at 169.254.169.254, every request signed and checked against
the role's policy."""

import hashlib
import json
import shlex

from components.aws.boot import multipart_gzip_base64
from components.common.bundle import SCRIPTS_DIR
from components.common.step_text import SSM_READER
from components.common.shell_text import python_without_docs
from tests.boot.aws_emulation import AwsEmulation
from tests.boot.cloud_init import INSTANCE_ID, STAGES, boot_again, run_user_data

REGION = "eu-central-1"
BUCKET = "dev-boot-0123456789"
KEY = "dev/bundles/steps-3f2a.tar.gz"
BUNDLE = bytes(range(256)) * 512
BUNDLE_SHA256 = hashlib.sha256(BUNDLE).hexdigest()
OTHER_KEY = "dev/plans/gpu-a100-0.plan"
TOKEN_PARAMETER = "/gpu-cluster/dev/join-token"
TOKEN = "K10abc::node:0123456789abcdef"
STATUS = f"/gpu-cluster/dev/boot-status/{INSTANCE_ID}"
# The programs as boot user data carries them.
S3_GET = python_without_docs((SCRIPTS_DIR / "boot" / "s3-get.py").read_text())
SSM = python_without_docs(SSM_READER.text())
IMDS_V1_GET = ("import urllib.request as r; "
               "r.urlopen('http://169.254.169.254/latest/meta-data/instance-id', timeout=5)")
# Where the first part puts what it fetched (the sandbox's own /var/lib).
FETCHED = "/var/lib/gpu-cluster/boot/steps.tar.gz"
JOIN_TOKEN_FILE = "/var/lib/gpu-cluster/boot/join-token"


def policy(key: str) -> str:
    """The instance role's: get object `key` of the bucket, read the token, write its
    status. moto authorizes SSM calls against "*" (aws_emulation.py), S3 calls against
    the object's ARN."""
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/{key}"},
        {"Effect": "Allow", "Action": ["ssm:GetParameter", "ssm:PutParameter"],
         "Resource": "*"},
    ]})


def emulation(allowed_key: str) -> AwsEmulation:
    return AwsEmulation(policy=policy(allowed_key), region=REGION, bucket=BUCKET,
                        objects={KEY: BUNDLE, OTHER_KEY: b"another machine's plan\n"},
                        parameters={TOKEN_PARAMETER: ("SecureString", TOKEN)},
                        dump_paths=("/gpu-cluster/dev",))


def user_data() -> str:
    """Two shell parts: the first fetches the bundle, checks its sha256 and reads the join
    token; the second reports the boot's status to SSM under the instance's id."""
    ssm = f"SSM={shlex.quote(SSM)}\n"
    fetch = f"""#!/bin/bash
set -euo pipefail
S3_GET={shlex.quote(S3_GET)}
{ssm}mkdir -p {FETCHED.rsplit('/', 1)[0]}
python3 - {REGION} {BUCKET} {KEY} {FETCHED} <<<"$S3_GET"
sha256sum --check --strict <<<"{BUNDLE_SHA256}  {FETCHED}"
python3 - get {REGION} {TOKEN_PARAMETER} <<<"$SSM" >{JOIN_TOKEN_FILE}
"""
    report = f"""#!/bin/bash
set -euo pipefail
{ssm}# IMDSv1 (no token) is refused.
if python3 -c {shlex.quote(IMDS_V1_GET)} 2>/dev/null; then
  echo "IMDSv1 answered" >&2
  exit 1
fi
id="$(python3 - instance-id <<<"$SSM")"
status=ready
[[ -f {JOIN_TOKEN_FILE} ]] || status="fetch failed"
python3 - put {REGION} "/gpu-cluster/dev/boot-status/$id" "$status" <<<"$SSM"
"""
    return multipart_gzip_base64([fetch, report])


def test_a_boot_fetches_its_object_and_reports_to_ssm(tmp_path):
    sandbox = tmp_path / "sandbox"

    run = run_user_data(user_data(), sandbox, {}, aws=emulation(KEY))

    assert run.exit_codes == dict.fromkeys(STAGES, 0), run.output + run.aws.log
    assert [(part.name, part.exit_code) for part in run.parts] == [("00.sh", 0), ("01.sh", 0)]
    fetched = sandbox / FETCHED.lstrip("/")
    assert hashlib.sha256(fetched.read_bytes()).hexdigest() == BUNDLE_SHA256
    assert fetched.stat().st_mode & 0o777 == 0o600
    assert (sandbox / JOIN_TOKEN_FILE.lstrip("/")).read_text() == TOKEN
    # What the boot left in SSM, read back after it.
    assert run.aws.value(STATUS) == "ready"
    assert run.aws.parameters[TOKEN_PARAMETER] == {"Type": "SecureString", "Value": TOKEN}
    # moto saw signed requests only, each allowed.
    assert [(r["method"], r["path"], r["target"], r["name"], r["status"])
            for r in run.aws.requests] == [
        ("GET", f"/{BUCKET}/{KEY}", "", "", 200),
        ("POST", "/", "AmazonSSM.GetParameter", TOKEN_PARAMETER, 200),
        ("POST", "/", "AmazonSSM.PutParameter", STATUS, 200)]
    assert all(request["signed"] for request in run.aws.requests)
    # IMDSv2: the one request without a token was refused; every other had a valid one.
    imds = [(r["method"], r["path"], r["token"], r["status"]) for r in run.aws.imds_requests]
    assert ("GET", "/latest/meta-data/instance-id", "missing", 401) in imds
    assert {token for method, _, token, status in imds if method == "GET" and status == 200} \
        == {"valid"}
    assert ("GET", "/latest/meta-data/instance-id", "valid", 200) in imds


def test_an_object_the_role_may_not_get_fails_the_part_naming_it(tmp_path):
    sandbox = tmp_path / "sandbox"

    # The role may get another object of the bucket only; no retries.
    run = run_user_data(user_data(), sandbox, {"S3_GET_RETRY_SECONDS": "0"},
                        aws=emulation(OTHER_KEY))

    assert [(part.name, part.exit_code) for part in run.parts] == [("00.sh", 1), ("01.sh", 0)]
    assert f"s3-get.py: s3://{BUCKET}/{KEY}: HTTP 403 AccessDenied (attempt 1)\n" in run.output
    assert run.exit_codes == {**dict.fromkeys(STAGES, 0), "modules-final": 1}
    assert not (sandbox / FETCHED.lstrip("/")).exists()
    assert run.aws.value(STATUS) == "fetch failed"
    assert [(r["method"], r["path"], r["status"], r["error"]) for r in run.aws.requests][0] == \
        ("GET", f"/{BUCKET}/{KEY}", 403, "AccessDenied")


def test_what_a_boot_wrote_to_ssm_is_there_at_the_next_boot(tmp_path):
    count = f"""#!/bin/bash
set -euo pipefail
SSM={shlex.quote(SSM)}
previous="$(python3 - get {REGION} {STATUS} <<<"$SSM")" || previous="boot 0"
python3 - put {REGION} {STATUS} "boot $((${{previous#boot }} + 1))" <<<"$SSM"
# scripts_user runs once per instance, unless its semaphore is gone (boot/run-boot.sh).
rm -f /var/lib/cloud/instance/sem/config_scripts_user
"""
    aws = AwsEmulation(policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["ssm:GetParameter", "ssm:PutParameter"],
         "Resource": "*"}]}), region=REGION)

    first = run_user_data(multipart_gzip_base64([count]), tmp_path / "sandbox", {}, aws=aws)
    second = boot_again(tmp_path / "sandbox", {}, aws=aws)

    assert [part.exit_code for run in (first, second) for part in run.parts] == [0, 0]
    assert (first.aws.value(STATUS), second.aws.value(STATUS)) == ("boot 1", "boot 2")
    assert [(r["target"], r["status"], r["error"]) for r in first.aws.requests] == [
        ("AmazonSSM.GetParameter", 400, "ParameterNotFound"),
        ("AmazonSSM.PutParameter", 200, "")]
    assert [(r["target"], r["status"]) for r in second.aws.requests] == [
        ("AmazonSSM.GetParameter", 200), ("AmazonSSM.PutParameter", 200)]
