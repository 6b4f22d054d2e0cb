"""moto's server and a fake IMDSv2 on loopback, for the clients the instances run
(ssm-parameter.py, s3-get.py, s3-object.py, ec2-instances.py): role sessions, signed requests
only, boto3 on moto. The fixtures that start them are in conftest.py. Nothing here leaves
127.0.0.1."""

import contextlib
import json
import os
import sys
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import boto3
from botocore.config import Config
from moto.server import ThreadedMotoServer

from tests.components.fake_imds import INSTANCE_ID

# Instances run their distribution's python3. INSTANCE_PYTHON runs the clients with another
# interpreter (e.g. a 3.8) to check they still work there.
PYTHON = os.environ.get("INSTANCE_PYTHON", sys.executable)
CREDENTIALS = {"AccessKeyId": "AKIAIOSFODNN7EXAMPLE",
               "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
               "Token": "IQoJb3JpZ2luX2VjEXAMPLE"}
REGION = "us-west-2"
TIMEOUT_SECONDS = 30
# What a test's setup calls moto with (authentication is off then).
SETUP = {"AccessKeyId": "AKIAMOTOSETUP", "SecretAccessKey": "setup"}
# No proxy from the environment: every request goes straight to loopback.
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Aws:
    endpoint: str
    credentials: dict  # the node role's session, as IMDS hands it out
    reader_credentials: dict  # a role that may only read parameters

    def ssm(self):
        """boto3's SSM client on moto, as the node role."""
        return boto3_client("ssm", self.endpoint, self.credentials)


@contextlib.contextmanager
def moto_on_loopback():
    """moto's server on 127.0.0.1 at a free port: yields its endpoint; reset after (its
    backends live in this process: nothing is left behind for other tests) and stopped."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        yield endpoint
    finally:
        post(f"{endpoint}/moto-api/reset")
        server.stop()


def boto3_client(service: str, endpoint: str, credentials: dict):
    return boto3.session.Session().client(
        service, region_name=REGION, endpoint_url=endpoint,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials.get("Token"),
        config=Config(connect_timeout=5, read_timeout=TIMEOUT_SECONDS, proxies={},
                      retries={"max_attempts": 1}))


def post(url: str, data: bytes = b"") -> dict:
    # Not urllib's default form type, which flask would parse away from moto.
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "text/plain"})
    with NO_PROXY.open(request, timeout=TIMEOUT_SECONDS) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def signed_requests_only(endpoint: str):
    """Within it, moto's server answers only requests with a valid signature and a policy
    allowing them; the setting before is put back after."""
    previous = post(f"{endpoint}/moto-api/reset-auth", b"0")
    try:
        yield
    finally:
        post(f"{endpoint}/moto-api/reset-auth",
             previous["PREVIOUS_INITIAL_NO_AUTH_ACTION_COUNT"].encode())


@contextlib.contextmanager
def unchecked(endpoint: str):
    """Within it, moto's server answers a test's setup (buckets, roles: up to 100 calls)
    unsigned; after it, only requests with a valid signature and a policy allowing them."""
    post(f"{endpoint}/moto-api/reset-auth", b"100")
    try:
        yield
    finally:
        post(f"{endpoint}/moto-api/reset-auth", b"0")


def role_session(endpoint: str, name: str, actions: Sequence[str] = (), *,
                 policy: Optional[str] = None) -> dict:
    """Credentials of a session of a new role `name` that may make the calls `actions` (on
    "*": moto authorizes SSM calls against "*", whatever the parameter), or whose policy
    document is `policy`."""
    iam, sts = boto3_client("iam", endpoint, SETUP), boto3_client("sts", endpoint, SETUP)
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
        "Action": "sts:AssumeRole"}]}
    arn = iam.create_role(RoleName=name,
                          AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName=name, PolicyDocument=policy or json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": "*"}]}))
    session = sts.assume_role(RoleArn=arn, RoleSessionName=INSTANCE_ID)["Credentials"]
    return {key: session[key] for key in ("AccessKeyId", "SecretAccessKey")} | {
        "Token": session["SessionToken"]}
