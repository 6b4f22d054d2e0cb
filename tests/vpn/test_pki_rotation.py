"""Rotating the VPN's PKI (vpn.pkiGeneration, vpn.previousCaTrusted) through a sequence of
`pulumi up`s: each stage's plan keeps the keys and certificates the engine would keep from
the stage before (run_program's `earlier`), so the files of different stages meet as they
would on real hosts.

    gen0      generation 0: CA 0 issues everything
    window    generation 1, previous CA trusted: both ends trust CA 1 and CA 0, the server
              still presents its CA 0 certificate, the clients get CA 1 certificates
    closed    generation 1: CA 1 only, the server's certificate from CA 1 too
    next      generation 2, previous CA trusted: CA 0's resources now hold CA 2

What the steps install is checked here; real OpenVPN ends built from it connect, or are
refused, in network namespaces below."""

import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from cryptography import x509

from components.network.vpn_pki import PREVIOUS_CA_WARNING
from preview.plan import Plan
from tests.builders import own_warnings
from tests.vpn.conftest import SERVER, SERVER_PUBLIC_ADDRESS, build_plan, exported, \
    hybrid_values, stdin_of
from tests.vpn.netns import Lab, ping, require_network_namespaces, wait_for_text
from tests.vpn.test_tunnel import READY, STARTUP_TIMEOUT, run_step

SERVER_STEP = f"{SERVER.name}-install-openvpn-server"
GATEWAY_STEP = "edge-install-openvpn-client"
GATEWAY_PUBLIC = "203.0.113.2"
SERVER_TUNNEL_ADDRESS = "10.8.0.1"
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\n.*?-----END CERTIFICATE-----\n", re.S)
# OpenSSL's words for a certificate chain that ends at no trusted CA (a peer that sends
# the CA 0 certificate along gets the second).
DROPPED_CA = re.compile(r"VERIFY ERROR: depth=\d, error=(unable to get local issuer certificate"
                        r"|self-signed certificate in certificate chain)")
# How long a refused peer is given to connect anyway.
REFUSAL_WAIT = 15


@pytest.fixture(scope="module")
def stages() -> dict[str, Plan]:
    gen0 = build_plan(hybrid_values())
    window = build_plan(hybrid_values(pkiGeneration=1, previousCaTrusted=True), earlier=gen0)
    closed = build_plan(hybrid_values(pkiGeneration=1), earlier=window)
    after_next = build_plan(hybrid_values(pkiGeneration=2, previousCaTrusted=True),
                            earlier=closed)
    return {"gen0": gen0, "window": window, "closed": closed, "next": after_next}


def env_value(stdin: str, name: str) -> str:
    """An input of a step's envelope (`export NAME='...'`)."""
    found = re.search(rf"^export {name}='(.*?)'$", stdin, re.M | re.S)
    assert found, f"{name} is not in the envelope"
    return found.group(1).replace("'\\''", "'")


def certificates(pem_text: str) -> list[x509.Certificate]:
    return [x509.load_pem_x509_certificate(pem.encode()) for pem in _PEM.findall(pem_text)]


def installed(plan: Plan, step: str) -> tuple[list[x509.Certificate], x509.Certificate]:
    """The CAs a step's end trusts and the certificate it presents."""
    stdin = stdin_of(plan, step)
    return certificates(env_value(stdin, "OPENVPN_CA")), \
        certificates(env_value(stdin, "OPENVPN_CERT"))[0]


def profile_cas(plan: Plan) -> list[x509.Certificate]:
    profile = exported(plan, "adminProfile")
    return certificates(re.search(r"<ca>\n(.*?)</ca>", profile, re.S).group(1) + "\n")


def serial_of(ca: x509.Certificate) -> str:
    found = ca.subject.get_attributes_for_oid(x509.NameOID.SERIAL_NUMBER)
    return found[0].value if found else ""


def test_opening_the_window_keeps_the_server_and_adds_the_new_ca(stages):
    gen0_cas, gen0_server = installed(stages["gen0"], SERVER_STEP)
    cas, server = installed(stages["window"], SERVER_STEP)
    gateway_cas, gateway = installed(stages["window"], GATEWAY_STEP)
    _, old_gateway = installed(stages["gen0"], GATEWAY_STEP)
    assert len(gen0_cas) == 1 and len(cas) == 2 and gateway_cas == cas
    new_ca, old_ca = cas
    # The previous CA is generation 0's own (kept in the state), the new one is another.
    assert old_ca == gen0_cas[0] and new_ca != old_ca
    assert (serial_of(new_ca), serial_of(old_ca)) == ("1", "")
    # The server presents the certificate it had; the gateway a new one from CA 1.
    assert server == gen0_server
    server.verify_directly_issued_by(old_ca)
    assert gateway != old_gateway
    gateway.verify_directly_issued_by(new_ca)
    assert profile_cas(stages["window"]) == cas
    assert own_warnings(stages["window"]) == [PREVIOUS_CA_WARNING.format(previous=0)]


def test_closing_the_window_drops_the_old_ca_and_moves_the_server(stages):
    (window_new, _), _ = installed(stages["window"], SERVER_STEP)
    cas, server = installed(stages["closed"], SERVER_STEP)
    gateway_cas, gateway = installed(stages["closed"], GATEWAY_STEP)
    assert cas == gateway_cas == profile_cas(stages["closed"]) == [window_new]
    server.verify_directly_issued_by(window_new)
    # The gateway's certificate is the one it got when the window opened.
    assert gateway == installed(stages["window"], GATEWAY_STEP)[1]
    assert own_warnings(stages["closed"]) == []


def test_the_next_rotation_reuses_the_even_ca_resources_for_a_new_ca(stages):
    (closed_ca,), closed_server = installed(stages["closed"], SERVER_STEP)
    (gen0_ca,), _ = installed(stages["gen0"], SERVER_STEP)
    cas, server = installed(stages["next"], SERVER_STEP)
    assert cas[1] == closed_ca and cas[0] not in (gen0_ca, closed_ca)
    assert serial_of(cas[0]) == "2" and server == closed_server
    plan = stages["next"]
    assert plan.named("lab-vpn-pki-ca-key").replacement_trigger == 2
    assert plan.named("lab-vpn-pki-ca-alt-key").replacement_trigger == 1


def test_generation_zero_has_one_ca_and_no_alternate_resources(stages):
    names = {r.name for r in stages["gen0"].resources}
    assert "lab-vpn-pki-ca-key" in names
    assert not any("ca-alt" in name for name in names)
    assert stages["gen0"].named("lab-vpn-pki-ca-cert").inputs["subject"] == {
        "commonName": "lab-vpn-ca", "organization": "gpu-cluster"}


# Real OpenVPN ends from the stages' files: a server and one client at a time (the
# gateway's certificate names one client: a second connection would take its place).


@pytest.fixture(scope="module")
def ends(stages):
    """Each stage's server and gateway folders, and its admin profile, as the steps wrote
    them; and a lab with a server and a client namespace."""
    require_network_namespaces()
    workdir = Path(tempfile.mkdtemp(prefix="gpu-cluster-vpn-rotation-"))
    workdir.chmod(0o755)  # the server reads its client-config-dir as nobody
    lab = Lab()
    try:
        folders = {}
        for stage, plan in stages.items():
            server = run_step(workdir, f"server-{stage}", stdin_of(plan, SERVER_STEP))
            gateway = run_step(workdir, f"gateway-{stage}", stdin_of(plan, GATEWAY_STEP),
                               routes="10.20.0.0/16 via 10.8.0.1 dev tun0\n")
            profile = workdir / f"admin-{stage}.ovpn"
            profile.write_text(exported(plan, "adminProfile"))
            profile.chmod(0o600)
            folders[stage] = (server / "etc/openvpn/server", gateway / "etc/openvpn/client",
                              profile)
        # A CA 0 certificate on a peer that trusts both CAs (the window's trust): what the
        # server alone makes of a certificate from the dropped CA.
        mixed = workdir / "gateway-mixed"
        shutil.copytree(folders["gen0"][1], mixed)
        shutil.copy(folders["window"][1] / "gpu-cluster/ca.crt", mixed / "gpu-cluster/ca.crt")
        folders["mixed"] = (None, mixed, None)
        lab.namespace("server")
        lab.namespace("client")
        lab.link("server", f"{SERVER_PUBLIC_ADDRESS}/24", "client", f"{GATEWAY_PUBLIC}/24")
        yield lab, workdir, folders
    finally:
        lab.close()
        shutil.rmtree(workdir, ignore_errors=True)


class Run:
    def __init__(self, ends, server_stage: str) -> None:
        self.lab, self.workdir, self.folders = ends
        self.server_stage = server_stage
        self.log = self.workdir / f"server-{server_stage}-{time.monotonic_ns()}.log"

    def __enter__(self) -> "Run":
        self.lab.processes = [p for p in self.lab.processes if p.poll() is None]
        self.server = self.lab.start("server", "openvpn", "--cd",
                                     str(self.folders[self.server_stage][0]),
                                     "--config", "gpu-cluster.conf", log=self.log)
        wait_for_text(self.log, READY, STARTUP_TIMEOUT, self.server)
        return self

    def __exit__(self, *exc) -> None:
        _stop(self.server)

    def client(self, stage: str, kind: str = "gateway"):
        gateway_dir, profile = self.folders[stage][1], self.folders[stage][2]
        command = (["--cd", str(gateway_dir), "--config", "gpu-cluster.conf"]
                   if kind == "gateway" else ["--config", str(profile)])
        log = self.workdir / f"{kind}-{stage}-on-{self.server_stage}-{time.monotonic_ns()}.log"
        return self.lab.start("client", "openvpn", *command, log=log), log

    def connects(self, stage: str, kind: str = "gateway") -> None:
        process, log = self.client(stage, kind)
        try:
            wait_for_text(log, READY, STARTUP_TIMEOUT, process)
            ping(self.lab, "client", SERVER_TUNNEL_ADDRESS)
        finally:
            _stop(process)

    def refused(self, stage: str, by: str, kind: str = "gateway") -> str:
        """Waits for the server (`by`="server") or the client to refuse the other's
        certificate, and checks that the client never connects; returns that log."""
        process, log = self.client(stage, kind)
        try:
            refuser = (self.log, self.server) if by == "server" else (log, process)
            wait_for_text(*refuser[:1], "VERIFY ERROR", REFUSAL_WAIT, refuser[1])
            time.sleep(2)
            assert READY not in log.read_text(), log.read_text()
            return refuser[0].read_text()
        finally:
            _stop(process)


def _stop(process) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait(timeout=10)


def test_during_the_window_old_and_new_peers_both_connect(ends):
    with Run(ends, "window") as run:
        # Not yet updated: the gateway as generation 0 installed it, and an administrator
        # with the profile handed out before (both trust CA 0 only, present CA 0
        # certificates).
        run.connects("gen0")
        run.connects("gen0", "admin")
        # Updated: a CA 1 certificate, accepted by the server, which trusts both.
        run.connects("window")
        run.connects("window", "admin")


def test_closing_the_window_keeps_updated_peers_and_refuses_the_dropped_ca(ends):
    with Run(ends, "closed") as run:
        # The gateway between the server's step and its own (still the window's files).
        run.connects("window")
        run.connects("closed")
        run.connects("window", "admin")
        # The gateway as generation 0 installed it trusts CA 0 only: it refuses the
        # server's CA 1 certificate.
        run.refused("gen0", by="client")
        # Its CA 0 certificate is refused by the server, whatever the peer trusts.
        log = run.refused("mixed", by="server")
        assert DROPPED_CA.search(log), log


def test_after_the_window_a_peer_refuses_a_server_with_a_dropped_ca_certificate(ends):
    with Run(ends, "gen0") as run:
        run.refused("closed", by="client")


def test_the_next_rotation_keeps_generation_one_and_refuses_generation_zero(ends):
    with Run(ends, "next") as run:
        run.connects("closed")
        run.connects("closed", "admin")
        run.connects("next")
        log = run.refused("mixed", by="server")
        assert DROPPED_CA.search(log), log
