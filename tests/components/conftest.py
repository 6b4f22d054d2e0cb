"""Components run under the SDK's mocks; the recording monitor keeps every resource. The
instances' AWS clients run against moto's server and a fake IMDSv2 (aws_fakes.py)."""

import http.server
import threading

import pulumi
import pytest

from config import load
from preview.engine import RecordingMonitor
from preview.plan import Plan
from pulumi.runtime import settings
from tests.builders import as_cli_config, bare_metal_config
from tests.components.aws_fakes import TIMEOUT_SECONDS, Aws, moto_on_loopback, role_session, \
    signed_requests_only
from tests.components.fake_imds import FakeImds, ImdsState


@pytest.fixture
def plan() -> Plan:
    recorded = Plan(project="gpu-cluster", stack="test")
    monitor = RecordingMonitor(recorded)
    settings.set_root_resource(None)
    pulumi.runtime.set_mocks(monitor.mocks, project="gpu-cluster", stack="test",
                             preview=True, monitor=monitor)
    return recorded


def settings_for(values: dict = None):
    cli = as_cli_config(values or bare_metal_config())
    return load(cli.config, cli.secret_keys, stack="test")


# moto's server and the fake IMDSv2, for the tests of the instances' AWS clients.

@pytest.fixture(scope="module")
def aws():
    """moto's server on loopback with IAM authentication on, and two role sessions."""
    with moto_on_loopback() as endpoint:
        node = role_session(endpoint, "gpu-cluster-node",
                            ["ssm:GetParameter", "ssm:PutParameter", "ssm:DeleteParameter"])
        reader = role_session(endpoint, "gpu-cluster-reader", ["ssm:GetParameter"])
        with signed_requests_only(endpoint):
            yield Aws(endpoint, node, reader)


@pytest.fixture(scope="module")
def imds_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeImds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=TIMEOUT_SECONDS)
    assert not thread.is_alive()


@pytest.fixture
def imds(imds_server, aws):
    """A fresh IMDSv2 state for each test, handing out the node role's session."""
    imds_server.state = ImdsState(credentials=dict(aws.credentials))
    imds_server.url = f"http://127.0.0.1:{imds_server.server_address[1]}"
    return imds_server
