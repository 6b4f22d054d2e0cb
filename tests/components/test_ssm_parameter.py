"""ssm-parameter.py, the SSM client the boot scripts run on instances. Each action's request
is signed exactly as botocore signs it. End to end, run as a subprocess over real HTTP on
loopback, it works against moto's server with the role credentials a fake IMDSv2 hands out.

moto accepts any signature by default. The fixture turns its IAM authentication on, so
moto recomputes each request's SigV4 signature (with botocore) from the secret key of the
role session it issued, and checks the role's policy for the action. A wrong secret key is
refused. moto checks SSM actions but not resources: it authorizes SSM calls against "*".
Nothing here leaves 127.0.0.1."""

import ast
import datetime
import json
import subprocess
import urllib.error
import urllib.request
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from components.common.bundle import SCRIPTS_DIR
from components.common.step_text import SSM_READER
from tests.components.aws_fakes import (
    CREDENTIALS,
    NO_PROXY,
    PYTHON,
    REGION,
    TIMEOUT_SECONDS,
)
from tests.components.fake_imds import INSTANCE_ID, ZONE
from components.common.shell_text import python_without_docs

# Runs a program beyond Python and bash (moto's server, promtool, curl, shellcheck):
# not in `make quick`.
pytestmark = pytest.mark.tools

SCRIPT = SCRIPTS_DIR / SSM_READER.path
NAME = "/gpu-cluster/dev/control-plane/ca-key"
VALUE = "-----BEGIN RSA PRIVATE KEY-----\nnot-a-real-key\n-----END RSA PRIVATE KEY-----\n"
# What the boot user data carries (components/aws/boot.py): the tests below run it as the
# boot does, on stdin, and the file as it is.
BOOT_TEXT = python_without_docs(SSM_READER.text())


def client_module():
    namespace = {"__name__": "ssm_parameter"}
    exec(compile(SSM_READER.text(), str(SCRIPT), "exec"), namespace)
    return namespace


def botocore_authorization(host: str, action: str, body: bytes, amz_date: str) -> str:
    """botocore's Authorization header for the same request at the same second."""
    request = AWSRequest(method="POST", url=f"https://{host}/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": f"AmazonSSM.{action}"})
    signer = SigV4Auth(Credentials(CREDENTIALS["AccessKeyId"], CREDENTIALS["SecretAccessKey"],
                                   CREDENTIALS["Token"]), "ssm", REGION)
    signed_at = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    with mock.patch("botocore.auth.get_current_datetime", return_value=signed_at):
        signer.add_auth(request)
    return request.headers["Authorization"]


@pytest.mark.parametrize("args, action, request_body", [
    (["get", REGION, NAME], "GetParameter", {"Name": NAME, "WithDecryption": True}),
    (["put", REGION, "/gpu-cluster/dev/status", "ready"], "PutParameter",
     {"Name": "/gpu-cluster/dev/status", "Value": "ready", "Type": "String", "Overwrite": True}),
    (["delete", REGION, NAME], "DeleteParameter", {"Name": NAME}),
], ids=["get", "put", "delete"])
def test_each_actions_request_is_signed_as_botocore_signs_it(args, action, request_body,
                                                             monkeypatch, capsys):
    monkeypatch.delenv("SSM_ENDPOINT_URL", raising=False)
    client, sent = client_module(), []

    def http(method, url, headers=None, body=None):
        sent.append((method, url, headers, body))
        return json.dumps({"Parameter": {"Value": "v"}})

    client.update(http=http, instance_credentials=lambda: CREDENTIALS)
    assert client["main"](["ssm-parameter.py", *args]) == 0
    [(method, url, headers, body)] = sent
    assert (method, url) == ("POST", "https://ssm.us-west-2.amazonaws.com/")
    assert json.loads(body) == request_body
    assert headers["x-amz-target"] == f"AmazonSSM.{action}"
    assert headers["authorization"] == botocore_authorization(
        "ssm.us-west-2.amazonaws.com", action, body, headers["x-amz-date"])
    assert capsys.readouterr().out == ("v" if action == "GetParameter" else "")


def test_the_date_signed_is_the_time_of_the_request():
    now = datetime.datetime(2026, 11, 21, 9, 30, 5, tzinfo=datetime.timezone.utc)
    headers = client_module()["signed_headers"](
        CREDENTIALS, REGION, "ssm.us-west-2.amazonaws.com", "GetParameter", b"{}", now)
    assert headers["x-amz-date"] == "20261121T093005Z"
    assert (f"Credential={CREDENTIALS['AccessKeyId']}/20261121/us-west-2/ssm/aws4_request,"
            in headers["authorization"])


@pytest.mark.parametrize("args", [[], ["get", REGION], ["put", REGION, NAME], ["list"],
                                  ["instance-id", "extra"], ["get", REGION, NAME, "extra"]])
@pytest.mark.parametrize("stdin", [False, True], ids=["file", "boot"])
def test_a_usage_error_exits_2_with_the_usage(args, stdin):
    command = [PYTHON, "-", *args] if stdin else [PYTHON, str(SCRIPT), *args]
    result = subprocess.run(command, input=BOOT_TEXT if stdin else None, capture_output=True,
                            text=True, timeout=TIMEOUT_SECONDS, env={})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "usage: ssm-parameter.py get REGION NAME        print its value (SecureStrings decrypted)\n"
        "       ssm-parameter.py put REGION NAME VALUE  store VALUE as a String, overwriting\n"
        "       ssm-parameter.py put-secret REGION NAME store stdin as a SecureString, overwriting\n"
        "       ssm-parameter.py delete REGION NAME     delete it; a missing one counts as deleted\n"
        "       ssm-parameter.py instance-id            print this instance's id\n"
        "       ssm-parameter.py provider-id            print its Kubernetes providerID, aws:///ZONE/ID\n")


@pytest.mark.parametrize("text", [SSM_READER.text(), BOOT_TEXT], ids=["file", "boot"])
def test_it_parses_as_python_3_8(text):
    # Syntax only; INSTANCE_PYTHON runs the tests below with an actual 3.8.
    ast.parse(text, feature_version=(3, 8))


def test_the_boot_text_is_smaller_and_keeps_the_usage():
    assert len(BOOT_TEXT) < len(SSM_READER.text()) * 0.9
    assert "usage: ssm-parameter.py get REGION NAME" in BOOT_TEXT
    assert "IMDSv2" not in BOOT_TEXT  # the rest of the module docstring


# End to end: moto's server, a fake IMDSv2, and the client as a subprocess.

def run(imds, aws, *args, stdin: bool = True) -> subprocess.CompletedProcess:
    """The client as the boot scripts run it (the boot's text on stdin: `python3 - ARGS`),
    or with stdin=False as a file."""
    command = [PYTHON, "-", *args] if stdin else [PYTHON, str(SCRIPT), *args]
    return subprocess.run(
        command, input=BOOT_TEXT if stdin else None, capture_output=True, text=True,
        timeout=TIMEOUT_SECONDS,
        env={"IMDS_ENDPOINT_URL": imds.url, "SSM_ENDPOINT_URL": aws.endpoint,
             "PATH": "/usr/bin:/bin"})


def test_put_then_get_returns_the_value(imds, aws):
    name = "/gpu-cluster/dev/status/gpu001"
    put = run(imds, aws, "put", REGION, name, "joined", stdin=False)
    assert (put.returncode, put.stdout, put.stderr) == (0, "", "")
    assert aws.ssm().get_parameter(Name=name)["Parameter"]["Type"] == "String"
    got = run(imds, aws, "get", REGION, name)
    assert (got.returncode, got.stdout, got.stderr) == (0, "joined", "")
    # put overwrites.
    assert run(imds, aws, "put", REGION, name, "ready").returncode == 0
    assert run(imds, aws, "get", REGION, name, stdin=False).stdout == "ready"


def test_put_secret_stores_stdin_as_a_secure_string(imds, aws):
    """How the controller's rotation stores a pool's join token: never on a command line."""
    name = "/gpu-cluster/dev/a10g/join-token"
    result = subprocess.run(
        [PYTHON, str(SCRIPT), "put-secret", REGION, name], input=VALUE, capture_output=True,
        text=True, timeout=TIMEOUT_SECONDS,
        env={"IMDS_ENDPOINT_URL": imds.url, "SSM_ENDPOINT_URL": aws.endpoint,
             "PATH": "/usr/bin:/bin"})
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    stored = aws.ssm().get_parameter(Name=name, WithDecryption=True)["Parameter"]
    assert stored["Type"] == "SecureString" and stored["Value"] == VALUE.rstrip("\n")
    empty = subprocess.run([PYTHON, str(SCRIPT), "put-secret", REGION, name], input="",
                           capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                           env={"IMDS_ENDPOINT_URL": imds.url, "PATH": "/usr/bin:/bin"})
    assert empty.returncode == 1 and "no value on stdin" in empty.stderr


def test_get_decrypts_a_secure_string(imds, aws):
    aws.ssm().put_parameter(Name=NAME, Value=VALUE, Type="SecureString", Overwrite=True)
    # Stored encrypted: undecrypted, moto answers the key's name before the value.
    assert aws.ssm().get_parameter(Name=NAME)["Parameter"]["Value"] != VALUE
    result = run(imds, aws, "get", REGION, NAME)
    assert result.returncode == 0, result.stderr
    assert result.stdout == VALUE and result.stderr == ""


def test_the_client_uses_imdsv2_only(imds, aws):
    assert run(imds, aws, "get", REGION, "/gpu-cluster/dev/anything").returncode == 1
    methods = [method for method, _, _ in imds.state.requests]
    assert methods == ["PUT", "GET", "GET"]
    assert all(headers["x-aws-ec2-metadata-token"] in imds.state.tokens
               for method, _, headers in imds.state.requests if method == "GET")


def test_delete_removes_it_and_deleting_again_succeeds(imds, aws):
    name = "/gpu-cluster/dev/join-token/delete-me"
    ssm = aws.ssm()
    ssm.put_parameter(Name=name, Value="token", Type="SecureString")
    first = run(imds, aws, "delete", REGION, name)
    assert (first.returncode, first.stdout, first.stderr) == (0, "", "")
    with pytest.raises(ssm.exceptions.ParameterNotFound):
        ssm.get_parameter(Name=name)
    second = run(imds, aws, "delete", REGION, name, stdin=False)
    assert (second.returncode, second.stdout, second.stderr) == (0, "", "")


def test_getting_a_missing_parameter_fails_naming_parameter_not_found(imds, aws):
    result = run(imds, aws, "get", REGION, "/gpu-cluster/dev/nope")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("HTTP 400: ") and "ParameterNotFound" in result.stderr
    assert "Traceback" not in result.stderr


def test_moto_refuses_a_request_signed_with_the_wrong_secret_key(imds, aws):
    aws.ssm().put_parameter(Name=NAME, Value=VALUE, Type="SecureString", Overwrite=True)
    imds.state.credentials["SecretAccessKey"] = "not-the-session-secret"
    result = run(imds, aws, "get", REGION, NAME)
    assert result.returncode == 1 and result.stdout == ""
    assert "SignatureDoesNotMatch" in result.stderr and "not-a-real-key" not in result.stderr


def test_a_call_the_role_may_not_make_is_denied(imds, aws):
    imds.state.credentials = dict(aws.reader_credentials)
    result = run(imds, aws, "put", REGION, "/gpu-cluster/dev/status/gpu002", "joined")
    assert result.returncode == 1 and result.stdout == ""
    # moto answers 403 and XML here; AWS answers 400 and {"__type":"AccessDeniedException"}.
    assert result.stderr.startswith("HTTP 403: ") and "AccessDenied" in result.stderr
    assert "ssm:PutParameter" in result.stderr and "Traceback" not in result.stderr


def test_without_a_valid_imds_token_the_client_fails_cleanly(imds, aws):
    url = f"{imds.url}/latest/meta-data/iam/security-credentials/"
    with pytest.raises(urllib.error.HTTPError) as refused:
        NO_PROXY.open(url, timeout=TIMEOUT_SECONDS)  # no token at all
    refused.value.close()
    assert refused.value.code == 401
    imds.state.honour_tokens = False  # tokens handed out are refused, as if expired
    for args in (["get", REGION, NAME], ["instance-id"]):
        result = run(imds, aws, *args)
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr.startswith("HTTP 401: ") and "Traceback" not in result.stderr


def test_instance_id_prints_the_instances_id(imds, aws):
    for stdin in (True, False):
        result = run(imds, aws, "instance-id", stdin=stdin)
        assert (result.returncode, result.stdout, result.stderr) == (0, INSTANCE_ID, "")


def test_provider_id_is_what_cloud_provider_aws_reads_back(imds, aws):
    """aws:///ZONE/ID: cloud-provider-aws v1.35.2 pkg/providers/v1/instances.go:52-91 maps it
    back to the instance id (the last path element, matching ^i-[^/]*$)."""
    for stdin in (True, False):
        result = run(imds, aws, "provider-id", stdin=stdin)
        assert (result.returncode, result.stdout, result.stderr) == (
            0, f"aws:///{ZONE}/{INSTANCE_ID}", "")
