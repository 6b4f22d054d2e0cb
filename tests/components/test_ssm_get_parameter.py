"""The SSM reader the boot scripts run on instances: its signature is the one botocore
computes, and end to end it reads a SecureString from (fake, loopback) IMDSv2 and SSM."""

import datetime
import http.server
import json
import subprocess
import sys
import threading
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from components.remote_step import SSM_READER, SCRIPTS_DIR

CREDENTIALS = {"AccessKeyId": "AKIAIOSFODNN7EXAMPLE",
               "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
               "Token": "IQoJb3JpZ2luX2VjEXAMPLE"}
REGION = "us-west-2"
NAME = "/gpu-cluster/dev/control-plane/ca-key"
VALUE = "-----BEGIN RSA PRIVATE KEY-----\nnot-a-real-key\n-----END RSA PRIVATE KEY-----\n"


def reader_module():
    namespace = {"__name__": "ssm_get_parameter"}
    exec(compile(SSM_READER.text(), str(SCRIPTS_DIR / SSM_READER.path), "exec"), namespace)
    return namespace


def botocore_authorization(host: str, body: bytes, amz_date: str) -> str:
    """botocore's Authorization header for the same request at the same second."""
    request = AWSRequest(method="POST", url=f"http://{host}/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "AmazonSSM.GetParameter"})
    signer = SigV4Auth(Credentials(CREDENTIALS["AccessKeyId"], CREDENTIALS["SecretAccessKey"],
                                   CREDENTIALS["Token"]), "ssm", REGION)
    signed_at = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    with mock.patch("botocore.auth.get_current_datetime", return_value=signed_at):
        signer.add_auth(request)
    return request.headers["Authorization"]


def test_the_signature_is_the_one_botocore_computes():
    reader = reader_module()
    body = json.dumps({"Name": NAME, "WithDecryption": True}).encode()
    now = datetime.datetime(2026, 11, 21, 9, 30, 5, tzinfo=datetime.timezone.utc)
    ours = reader["signed_headers"](CREDENTIALS, REGION, "ssm.us-west-2.amazonaws.com",
                                    "GetParameter", body, now)
    assert ours["x-amz-date"] == "20261121T093005Z"
    assert ours["authorization"] == botocore_authorization(
        "ssm.us-west-2.amazonaws.com", body, "20261121T093005Z")


class FakeAws(http.server.BaseHTTPRequestHandler):
    """IMDSv2 and the SSM GetParameter API on loopback; SSM checks every signature."""

    parameters: dict = {}
    requests: list = []

    def log_message(self, *args):
        pass

    def _answer(self, status: int, body: str):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        if self.path == "/latest/api/token" and self.headers["X-aws-ec2-metadata-token-ttl-seconds"]:
            return self._answer(200, "imds-session-token")
        return self._answer(403, "")

    def do_GET(self):
        if self.headers["X-aws-ec2-metadata-token"] != "imds-session-token":
            return self._answer(401, "")  # IMDSv2 only
        base = "/latest/meta-data/iam/security-credentials/"
        if self.path == base:
            return self._answer(200, "gpu-cluster-node\n")
        if self.path == base + "gpu-cluster-node":
            return self._answer(200, json.dumps({"Code": "Success", **CREDENTIALS}))
        return self._answer(404, "")

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        FakeAws.requests.append(dict(self.headers))
        expected = botocore_authorization(self.headers["Host"], body, self.headers["X-Amz-Date"])
        if self.headers["Authorization"] != expected:
            return self._answer(400, json.dumps({"__type": "InvalidSignatureException"}))
        request = json.loads(body)
        if request["Name"] not in self.parameters or not request["WithDecryption"]:
            return self._answer(400, json.dumps({"__type": "ParameterNotFound",
                                                 "message": request["Name"]}))
        return self._answer(200, json.dumps({"Parameter": {
            "Name": request["Name"], "Type": "SecureString",
            "Value": self.parameters[request["Name"]]}}))


@pytest.fixture
def fake_aws():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeAws)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeAws.parameters, FakeAws.requests = {NAME: VALUE}, []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run_reader(endpoint: str, name: str) -> subprocess.CompletedProcess:
    # As the boot scripts run it: the program on stdin, the action, region and name as arguments.
    return subprocess.run(
        [sys.executable, "-", "get", REGION, name], input=SSM_READER.text(), capture_output=True,
        text=True, timeout=30,
        env={"IMDS_ENDPOINT_URL": endpoint, "SSM_ENDPOINT_URL": endpoint, "PATH": "/usr/bin"})


def test_it_reads_a_secure_string_with_the_instance_role(fake_aws):
    result = run_reader(fake_aws, NAME)
    assert result.returncode == 0, result.stderr
    assert result.stdout == VALUE and result.stderr == ""
    [request] = FakeAws.requests
    assert request["X-Amz-Target"] == "AmazonSSM.GetParameter"
    assert request["X-Amz-Security-Token"] == CREDENTIALS["Token"]


def test_a_missing_parameter_fails_with_awss_answer_and_prints_nothing(fake_aws):
    result = run_reader(fake_aws, "/gpu-cluster/dev/nope")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("HTTP 400: ") and "ParameterNotFound" in result.stderr


def test_an_unreachable_metadata_service_fails_cleanly():
    result = run_reader("http://127.0.0.1:9", NAME)
    assert result.returncode == 1 and result.stdout == ""
    assert "URLError" in result.stderr and "Traceback" not in result.stderr
