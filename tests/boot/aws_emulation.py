"""AWS emulated inside the boot sandbox (cloud_init.py), so that boot user data can fetch
from S3, read and write SSM parameters and get its role's credentials from IMDSv2 as on
an EC2 instance, with every request signed and checked against the role's policy.

What runs where:
- The test process writes SANDBOX_DIR/aws/setup.json (`prepare`: what to seed) and starts
  the sandbox with two more arguments for sandbox.bash: this virtualenv's python and
  aws_in_sandbox.py. After the boot it reads back what the emulation wrote (`read_record`).
- sandbox.bash, PID 1 of the sandbox's new PID, mount, UTS and network namespaces, sets the
  network namespace up before cloud-init's first stage: `lo` up (a new namespace's lo is
  down and alone: no route leaves it, nothing of the host's loopback is in it) and
  169.254.169.254/32 on lo, so the boot's programs reach IMDS at its real address with
  no override. It starts aws_in_sandbox.py with a clean environment and waits for
  SANDBOX_DIR/aws/ready.
- aws_in_sandbox.py, one process in the namespace: moto's server on 127.0.0.1:MOTO_PORT
  (started as moto/moto_server/threaded_moto_server.py:24-34 starts it, behind a recorder
  of the requests) and an IMDSv2 emulator on 169.254.169.254:80 (tokens required, as with
  http_tokens=required). Before `ready` it seeds moto over HTTP with boto3 while moto's
  IAM authentication is still off (moto/settings.py:16-17: INITIAL_NO_AUTH_ACTION_COUNT
  defaults to infinity): region, bucket and objects, SSM parameters (SecureStrings with
  moto's default SSM key), the instance role with the policy given and a session of it
  (sts:AssumeRole, the session named after the instance id), whose credentials IMDS then
  hands out. Then POST /moto-api/reset-auth 0 (moto/moto_api/_internal/responses.py:26-49)
  turns authentication on: moto/core/authorization.py:37-65 checks every later request's
  SigV4 signature (recomputed by botocore from the session's secret key) and the role's
  policy for the action.
- cloud-init's four stages then run as before. The parts inherit cloud-init's environment
  (cloudinit/subp.py:159-163, 291-299, see cloud_init.py), to which `env()` adds
  S3_ENDPOINT_URL and SSM_ENDPOINT_URL (moto serves every service on one port, telling
  them apart by the credential scope of the signature); IMDS needs no override.
- After the last stage sandbox.bash sends the launcher SIGTERM; it turns authentication
  off again, writes the SSM parameters under `dump_paths` (decrypted) to
  SANDBOX_DIR/aws/parameters.json and SANDBOX_DIR/aws/done, and sandbox.bash exits. Its
  requests were written line by line as they were answered (moto-requests.jsonl,
  imds-requests.jsonl). Nothing of moto outlives the namespace: when PID 1 exits the
  kernel kills every process left in the PID namespace (pid_namespaces(7)), and the
  network namespace goes with its last process.

What moto checks and what it does not (moto 5.2):
- S3 requests are authorized against the object's ARN, arn:aws:s3:::BUCKET/KEY
  (moto/core/authorization.py:72-80), so a policy that allows one key refuses another.
- SSM requests are authorized against "*" whatever the parameter (moto/core/responses.py:
  434-442: only services with `_determine_resource` name one), and a statement's Resource
  is a pattern matched against that string (moto/iam/access_control.py:571-575): an SSM
  statement must say "Resource": "*" to allow anything under moto. Its actions are
  checked.

boot_again starts a new emulation from the same seed, with the SSM parameters the last
boot left under `dump_paths` on top: what the instance wrote to SSM survives its reboot,
as in AWS (S3 objects it wrote do not). The role's session is a new one.
"""

import json
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

LAUNCHER = Path(__file__).with_name("aws_in_sandbox.py")
# The sandbox's network namespace is new and empty: any port is free in it.
MOTO_PORT = 5000
MOTO_ENDPOINT = f"http://127.0.0.1:{MOTO_PORT}"
# The launcher's folder below the sandbox folder (sandbox.bash knows it too).
FOLDER = "aws"


@dataclass(frozen=True)
class AwsEmulation:
    """The AWS a booting instance sees: an account in `region` with `bucket` holding
    `objects`, the SSM `parameters` (name -> (type, value); String, StringList or
    SecureString), and the instance role `role` with the policy document `policy` (JSON
    text). IMDS gives the sandbox's instance id (cloud_init.INSTANCE_ID)."""

    policy: str
    region: str = "us-west-2"
    bucket: str = "gpu-cluster-boot"
    objects: Mapping[str, bytes] = field(default_factory=dict)
    parameters: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    role: str = "gpu-cluster-node"
    # The SSM paths whose parameters are read back after the boot (AwsRecord.parameters).
    dump_paths: tuple[str, ...] = ("/",)

    def env(self) -> dict[str, str]:
        """What cloud-init's environment gets, for the parts: moto's endpoints."""
        return {"S3_ENDPOINT_URL": MOTO_ENDPOINT, "SSM_ENDPOINT_URL": MOTO_ENDPOINT}


@dataclass(frozen=True)
class AwsRecord:
    """What the emulation saw and held during one boot."""

    # At the end of the boot, under the dump paths: name -> {"Type": ..., "Value": ...},
    # SecureStrings decrypted.
    parameters: dict[str, dict[str, str]]
    # Each request moto answered, in order: method, path, query, target (the
    # X-Amz-Target header: "AmazonSSM.PutParameter", or ""), name (an SSM request's
    # parameter, or ""), signed (a SigV4 Authorization header), status, error (AWS's
    # error code, or "").
    requests: list[dict]
    # Each request IMDS answered, in order: method, path, token ("valid", "missing",
    # "invalid"; "" for a PUT) and status.
    imds_requests: list[dict]
    log: str  # what the launcher printed

    def value(self, name: str) -> Optional[str]:
        """The value of SSM parameter `name` at the end of the boot, or None."""
        return self.parameters.get(name, {}).get("Value")


def prepare(workdir: Path, emulation: AwsEmulation, instance_id: str) -> list[str]:
    """Writes the seed of this boot's emulation below `workdir` (over the outputs of the
    last boot, whose parameters carry over); the arguments sandbox.bash takes for it."""
    folder = workdir / FOLDER
    parameters = dict(emulation.parameters)
    previous = folder / "parameters.json"
    if previous.exists():
        parameters.update({name: (p["Type"], p["Value"])
                           for name, p in json.loads(previous.read_text()).items()})
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    setup = {"region": emulation.region, "bucket": emulation.bucket,
             "objects": {key: body.hex() for key, body in emulation.objects.items()},
             "parameters": parameters, "role": emulation.role, "policy": emulation.policy,
             "instance_id": instance_id, "port": MOTO_PORT,
             "dump_paths": list(emulation.dump_paths)}
    (folder / "setup.json").write_text(json.dumps(setup))
    return [sys.executable, str(LAUNCHER)]


def read_record(workdir: Path) -> AwsRecord:
    folder = workdir / FOLDER
    return AwsRecord(
        parameters=json.loads(_read(folder / "parameters.json") or "{}"),
        requests=_lines(folder / "moto-requests.jsonl"),
        imds_requests=_lines(folder / "imds-requests.jsonl"),
        log=_read(folder / "launcher.log"))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in _read(path).splitlines() if line]


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
