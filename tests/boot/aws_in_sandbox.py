"""AWS as a booting EC2 instance sees it, run inside the boot sandbox's network namespace
by sandbox.bash (see tests/boot/aws_emulation.py for what runs where, and why).

Usage: aws_in_sandbox.py FOLDER
Reads FOLDER/setup.json (written by aws_emulation.py), then in this one process:
- moto's server on 127.0.0.1:PORT, as ThreadedMotoServer starts it, behind a recorder;
- an IMDSv2 emulator on 169.254.169.254:80 (sandbox.bash put that address on lo), which also
  answers each file under FOLDER/imds-items by its path (a test writes
  FOLDER/imds-items/latest/meta-data/spot/instance-action to announce a Spot interruption);
- seeds moto (bucket, objects, SSM parameters, the instance role and its session) and
  turns moto's IAM authentication on;
- writes FOLDER/ready, then serves until SIGTERM or SIGINT;
- then writes FOLDER/parameters.json (the SSM parameters under the setup's dump paths,
  SecureStrings decrypted) and FOLDER/done, and exits.
Every request served while the boot runs is a line of FOLDER/moto-requests.jsonl or
FOLDER/imds-requests.jsonl, written as it is answered: no value, signature or credential,
only what a test asserts on. Standard library, boto3 and moto only: it runs with the
project's virtualenv but imports nothing of the project.
"""

import io
import json
import re
import secrets
import signal
import sys
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Before any thread starts, so that every thread inherits the mask and the main thread
# alone takes the signal, in sigwait.
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from moto.server import (  # noqa: E402
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server  # noqa: E402

IMDS_ADDRESS = ("169.254.169.254", 80)
# Any key works while authentication is off; the session's keys are moto's own.
SETUP_CREDENTIALS = {"aws_access_key_id": "AKIAMOTOSETUP", "aws_secret_access_key": "setup"}
# EC2: a token lives 1 s to 6 h (X-aws-ec2-metadata-token-ttl-seconds).
TOKEN_TTL_SECONDS = range(1, 21601)
# The error code in an AWS error body: S3's XML, or the JSON protocols' __type.
_ERROR_CODE = re.compile(rb'<Code>(\w+)</Code>|"__type"\s*:\s*"(?:[^"#]*#)?(\w+)"')


class Recorder:
    """Appends one JSON line per request to a file, while on."""

    def __init__(self, path: Path):
        self._stream = path.open("w", buffering=1)
        self._lock = threading.Lock()
        self.on = False

    def __call__(self, entry: dict) -> None:
        if self.on:
            with self._lock:
                self._stream.write(json.dumps(entry) + "\n")


def recording(app, record: Recorder):
    """The WSGI app `app`, recording each request: method, path, the SSM action (the
    X-Amz-Target header) and parameter name, whether it was signed, the status and AWS's
    error code."""

    def recorded(environ, start_response):
        entry = {"method": environ["REQUEST_METHOD"], "path": environ.get("PATH_INFO", ""),
                 "query": environ.get("QUERY_STRING", ""),
                 "target": environ.get("HTTP_X_AMZ_TARGET", ""),
                 "name": "",
                 "signed": environ.get("HTTP_AUTHORIZATION", "").startswith("AWS4-HMAC-SHA256 ")}
        if entry["target"] and environ.get("CONTENT_LENGTH"):
            # A JSON request (SSM): its parameter's name, and the body put back for moto.
            body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
            environ["wsgi.input"] = io.BytesIO(body)
            try:
                entry["name"] = str(json.loads(body).get("Name", ""))
            except (ValueError, AttributeError):
                pass
        statuses = []

        def start(status, headers, exc_info=None):
            statuses.append(status)
            return start_response(status, headers, exc_info)

        answer = b"".join(app(environ, start))
        entry["status"] = int(statuses[0].split()[0])
        code = _ERROR_CODE.search(answer) if entry["status"] >= 400 else None
        entry["error"] = (code[1] or code[2]).decode() if code else ""
        record(entry)
        return [answer]

    return recorded


class Imds(BaseHTTPRequestHandler):
    """IMDSv2 as on an instance launched with http_tokens=required: PUT /latest/api/token
    with a TTL gives a token; a GET without a valid one is answered 401 Unauthorized."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _answer(self, status: int, body: str = "", token: str = "") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.server.record({"method": self.command, "path": self.path, "token": token,
                            "status": status})

    def do_PUT(self):
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        if self.path != "/latest/api/token":
            return self._answer(404)
        if not ttl.isdigit() or int(ttl) not in TOKEN_TTL_SECONDS:
            return self._answer(400)
        token = secrets.token_urlsafe(32)
        self.server.tokens[token] = time.monotonic() + int(ttl)
        return self._answer(200, token)

    def do_GET(self):
        token = self.headers.get("X-aws-ec2-metadata-token")
        expiry = self.server.tokens.get(token or "")
        state = "missing" if token is None else (
            "valid" if expiry and expiry > time.monotonic() else "invalid")
        if state != "valid":
            return self._answer(401, token=state)
        credentials_path = "/latest/meta-data/iam/security-credentials/"
        answers = {"/latest/meta-data/instance-id": self.server.instance_id,
                   # RKE2's EC2 nodes read it for their providerID (rke2/lib.sh).
                   "/latest/meta-data/placement/availability-zone": self.server.zone,
                   credentials_path: self.server.role,
                   credentials_path + self.server.role: json.dumps(self.server.credentials)}
        item = self.server.items / self.path.lstrip("/")
        if ".." not in self.path and item.is_file():
            return self._answer(200, item.read_text(), token=state)
        if self.path not in answers or not self.server.credentials:
            return self._answer(404, token=state)
        return self._answer(200, answers[self.path], token=state)


def serve(server) -> None:
    threading.Thread(target=server.serve_forever, daemon=True).start()


def client(service: str, endpoint: str, region: str):
    return boto3.session.Session().client(
        service, region_name=region, endpoint_url=endpoint, **SETUP_CREDENTIALS,
        config=Config(proxies={}, retries={"max_attempts": 1}))


def moto_api(endpoint: str, path: str, data: bytes) -> None:
    # Not urllib's default form type, which flask would parse away from moto.
    request = urllib.request.Request(f"{endpoint}/moto-api/{path}", data=data, method="POST",
                                     headers={"Content-Type": "text/plain"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            request, timeout=30) as response:
        response.read()


def seed(endpoint: str, setup: dict) -> dict:
    """The bucket, its objects, the SSM parameters and the instance role, made while
    authentication is off; the credentials of a session of the role, as IMDS hands them
    out."""
    region = setup["region"]
    s3 = client("s3", endpoint, region)
    s3.create_bucket(Bucket=setup["bucket"],
                     **({} if region == "us-east-1" else
                        {"CreateBucketConfiguration": {"LocationConstraint": region}}))
    for key, hex_body in setup["objects"].items():
        s3.put_object(Bucket=setup["bucket"], Key=key, Body=bytes.fromhex(hex_body))
    ssm = client("ssm", endpoint, region)
    for name, (kind, value) in setup["parameters"].items():
        ssm.put_parameter(Name=name, Type=kind, Value=value, Overwrite=True)
    iam, sts = client("iam", endpoint, region), client("sts", endpoint, region)
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
        "Action": "sts:AssumeRole"}]}
    arn = iam.create_role(RoleName=setup["role"],
                          AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=setup["role"], PolicyName="instance",
                        PolicyDocument=setup["policy"])
    session = sts.assume_role(RoleArn=arn, RoleSessionName=setup["instance_id"],
                              DurationSeconds=3600)["Credentials"]
    now = datetime.now(timezone.utc)
    return {"Code": "Success", "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "Type": "AWS-HMAC", "AccessKeyId": session["AccessKeyId"],
            "SecretAccessKey": session["SecretAccessKey"], "Token": session["SessionToken"],
            "Expiration": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}


def dump(endpoint: str, setup: dict) -> dict:
    """The SSM parameters under the dump paths: name -> {"Type", "Value"}."""
    ssm, found = client("ssm", endpoint, setup["region"]), {}
    for path in setup["dump_paths"]:
        pages = ssm.get_paginator("get_parameters_by_path").paginate(
            Path=path, Recursive=True, WithDecryption=True)
        for page in pages:
            found.update({p["Name"]: {"Type": p["Type"], "Value": p["Value"]}
                          for p in page["Parameters"]})
    return found


def main(folder: Path) -> int:
    setup = json.loads((folder / "setup.json").read_text())
    endpoint = f"http://127.0.0.1:{setup['port']}"
    moto_record = Recorder(folder / "moto-requests.jsonl")
    # moto/moto_server/threaded_moto_server.py:24-34, with the recorder around the app.
    moto = make_server("127.0.0.1", setup["port"],
                       recording(DomainDispatcherApplication(create_backend_app), moto_record),
                       True, request_handler=MotoRequestHandler)
    serve(moto)
    imds = ThreadingHTTPServer(IMDS_ADDRESS, Imds)
    imds.record = Recorder(folder / "imds-requests.jsonl")
    imds.tokens, imds.credentials = {}, {}
    imds.role, imds.instance_id = setup["role"], setup["instance_id"]
    imds.zone = f"{setup['region']}a"
    imds.items = folder / "imds-items"
    serve(imds)

    imds.credentials = seed(endpoint, setup)
    # From now on every request needs a valid signature and a policy that allows it.
    moto_api(endpoint, "reset-auth", b"0")
    moto_record.on = imds.record.on = True
    (folder / "ready").write_text(f"{endpoint}\n")
    print(f"aws_in_sandbox: serving at {endpoint} and http://{IMDS_ADDRESS[0]}", flush=True)

    signal.sigwait(STOP_SIGNALS)
    moto_record.on = imds.record.on = False
    moto_api(endpoint, "reset-auth", b"inf")
    (folder / "parameters.json").write_text(json.dumps(dump(endpoint, setup), indent=1))
    (folder / "done").write_text("")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
