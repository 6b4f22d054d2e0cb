"""The node-cleanup agent a pool instance runs (components/scripts/aws/node-cleanup-agent.sh),
executed by bash against the stubbed host (k0s, python3's SSM client) while real curl asks
a loopback IMDSv2 for the auto scaling group's target lifecycle state."""

import http.server
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from components.aws.pool_node_cleanup import NODE_CLEANUP_AGENT, SSM_CLIENT_PATH
from components.common.step_text import SCRIPTS_DIR, SSM_READER
from tests.boot.stub_host import stub_host

# Runs a program beyond Python and bash (moto's server, promtool, curl, shellcheck):
# not in `make quick`.
pytestmark = pytest.mark.tools

REGION = "us-west-2"
KUBECONFIG_PARAMETER = "/gpu-cluster/dev/node-cleanup/kubeconfig"
STATUS_PARAMETER = "/gpu-cluster/dev/boot-status/a10g"
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers:\n- name: node-cleanup\n"
TOKEN = "imds-session-token"


class Imds(http.server.BaseHTTPRequestHandler):
    """IMDSv2: a PUT for a session token, then GETs that must carry it. The target state
    is InService for the first `in_service` reads, then Terminated."""

    in_service = 2
    reads = 0

    def do_PUT(self):
        if self.path == "/latest/api/token" and \
                self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self._answer(200, TOKEN)
        else:
            self._answer(400, "")

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            self._answer(401, "")
        elif self.path == "/latest/meta-data/autoscaling/target-lifecycle-state":
            type(self).reads += 1
            self._answer(200, "InService" if self.reads <= self.in_service else "Terminated")
        else:
            self._answer(404, "")

    def _answer(self, status: int, body: str):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def imds():
    Imds.reads = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Imds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture
def host(tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    host = stub_host(tmp_path / "host", {(REGION, KUBECONFIG_PARAMETER): KUBECONFIG,
                                         (REGION, f"{STATUS_PARAMETER}/i-0123456789abcdef0"):
                                         "ready"})
    # As the boot leaves it on the instance.
    client = host.root / SSM_CLIENT_PATH.lstrip("/")
    client.parent.mkdir(parents=True, exist_ok=True)
    client.write_text(SSM_READER.text())
    return host


def run_agent(host, imds: str, seconds: int = 0, **env) -> subprocess.CompletedProcess:
    """Runs the agent (stopped after `seconds`, if given, as systemd would stop it)."""
    # Real curl ahead of the stubbed one; everything else stubbed.
    real = Path(host.env["STUB_STATE"]) / "real-bin"
    real.mkdir(exist_ok=True)
    (real / "curl").unlink(missing_ok=True)
    (real / "curl").symlink_to(shutil.which("curl"))
    environment = {**host.env, "PATH": f"{real}:{host.env['PATH']}", "IMDS_ENDPOINT_URL": imds,
                   "AWS_REGION": REGION, "NODE_CLEANUP_KUBECONFIG_PARAMETER":
                   KUBECONFIG_PARAMETER, "BOOT_STATUS_PARAMETER": STATUS_PARAMETER,
                   "KUBECTL": "k0s kubectl", "SSM_CLIENT": SSM_CLIENT_PATH, "POLL_SECONDS": "0.1",
                   "TMPDIR": str(Path(host.env["STUB_STATE"])), **env}
    stop = [shutil.which("timeout"), str(seconds)] if seconds else []
    return subprocess.run([*stop, "bash", str(SCRIPTS_DIR / NODE_CLEANUP_AGENT.path)],
                          env=environment, capture_output=True, text=True, timeout=60)


def stored(host, name: str) -> Path:
    return Path(host.env["STUB_STATE"]) / "ssm" / REGION / name.replace("/", "%2F")


def test_a_terminating_instance_deletes_its_node_and_its_boot_status(host, imds):
    result = run_agent(host, imds, STUB_HOSTNAME="IP-10-30-0-12")
    assert result.returncode == 0, result.stderr
    assert Imds.reads == 3  # it waited while the instance was in service
    calls = host.calls()
    [delete] = [c for c in calls if c.startswith("k0s kubectl")]
    kubeconfig = delete.split()[3]
    # The kubelet names the node after the host name, lower-cased.
    assert delete == (f"k0s kubectl --kubeconfig {kubeconfig} delete node ip-10-30-0-12 "
                      "--ignore-not-found --wait=false")
    # The credential was only in a temporary file, gone now.
    assert not os.path.exists(kubeconfig)
    assert not stored(host, f"{STATUS_PARAMETER}/i-0123456789abcdef0").exists()
    assert stored(host, KUBECONFIG_PARAMETER).exists()
    assert "gpu-cluster: IP-10-30-0-12: node-cleanup: node ip-10-30-0-12 deleted" in result.stderr
    assert KUBECONFIG not in result.stderr + result.stdout


def test_an_instance_in_service_keeps_its_node(host, imds):
    Imds.in_service = 10**6
    try:
        result = run_agent(host, imds, seconds=3)
    finally:
        Imds.in_service = 2
    assert result.returncode == 124, result.stderr  # still watching when stopped
    assert Imds.reads > 3
    assert not [c for c in host.calls() if c.startswith("k0s")]


def test_an_unanswering_imds_deletes_nothing(host, imds):
    result = run_agent(host, imds + "/nothing-here", seconds=3)
    assert result.returncode == 124, result.stderr
    assert not [c for c in host.calls() if c.startswith("k0s")]
    assert stored(host, f"{STATUS_PARAMETER}/i-0123456789abcdef0").exists()


def test_missing_settings_are_named(host, imds):
    result = run_agent(host, imds, KUBECTL="", SSM_CLIENT="")
    assert result.returncode == 2
    assert "missing required environment variable(s): KUBECTL SSM_CLIENT" in result.stderr
