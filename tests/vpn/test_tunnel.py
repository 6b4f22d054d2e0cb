"""The VPN bridge for real: the steps the program would send to the EC2 instance, the
on-prem gateway and an on-prem worker run with bash against temporary roots (package
manager, systemd and sysctl stubbed), and the files they write start real OpenVPN ends in
network namespaces laid out like the hybrid layout:

    vpc-host 10.20.0.50 --- vpc-gw 10.20.0.10 | 203.0.113.1 --+   +-- admin 203.0.113.3
                                                               inet -- alice 203.0.113.4
    onprem-host 192.168.2.2 --- onprem-gw 192.168.2.4 | 203.0.113.2 --+   +-- bob 203.0.113.5

The stack has two users; bob was removed from access.users by the last `pulumi up` (the
plan is built on the one before, as the engine keeps the PKI), and tries with the profile
he kept. vpc-gw is also the Kubernetes API (the control plane's address).

Routes are set as the program has them set: vpc-host routes the LAN and the tunnel
network to the server (the VPC route table's entries), onprem-host runs the route-to-vpc
unit's own commands, the gateways forward as the steps' sysctl file says.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from preview.plan import Plan
from tests.builders import PROJECT_DIR
from components.network.openvpn_config import mss_fix
from tests.vpn.conftest import (HYBRID_VALUES, SERVER, SERVER_PUBLIC_ADDRESS, VPC_HOST_ADDRESS,
                                build_plan, exported, hybrid_values, stdin_of)
from tests.vpn.netns import IP, TCP_CLIENT, TCP_SERVER, Lab, ping, require_network_namespaces, \
    wait_for_text

STUB = PROJECT_DIR / "tests" / "scripts" / "stubs" / "stub"
OS_RELEASE = PROJECT_DIR / "tests" / "scripts" / "os-release" / "ubuntu-24.04"
STUBBED = ("apt-get", "dpkg-query", "systemctl", "sysctl", "ping", "ip", "hostname", "sleep")
LAN_HOST, GATEWAY_LAN, GATEWAY_PUBLIC, ADMIN_PUBLIC = (
    "192.168.2.2", "192.168.2.4", "203.0.113.2", "203.0.113.3")
USER_PUBLIC = {"alice": "203.0.113.4", "bob": "203.0.113.5"}
API_PORT = 6443
ACCESS = {"teams": [{"name": "vision"}],
          "users": [{"name": "alice", "namespaces": ["vision"]},
                    {"name": "bob", "namespaces": ["vision"]}]}
VPC_CIDR = HYBRID_VALUES["aws"]["vpc"]["cidr"]
LAN_CIDR = HYBRID_VALUES["network"]["lanCidr"]
TUNNEL_CIDR = "10.8.0.0/24"
TUNNEL_MTU = 1400
STARTUP_TIMEOUT = 60
READY = "Initialization Sequence Completed"


def run_step(workdir: Path, name: str, stdin: str, routes: str = "") -> Path:
    """Runs a step's envelope (`bash -s -- create`) against the root `workdir/<name>`."""
    root, state, bin_dir = workdir / name, workdir / f"{name}-state", workdir / f"{name}-bin"
    for folder in (root, state, bin_dir):
        folder.mkdir()
    assert root.resolve().is_relative_to(workdir.resolve())  # never the real host
    # The instance and the gateways run Ubuntu, as os/lib.sh reads it (packages by apt).
    (root / "etc").mkdir()
    shutil.copy(OS_RELEASE, root / "etc" / "os-release")
    for command in STUBBED:
        (bin_dir / command).symlink_to(STUB)
    (state / "routes").write_text(routes)
    env = {**os.environ, "GPU_CLUSTER_ROOT": str(root), "STUB_STATE": str(state),
           "STUB_CALLS": str(state / "calls.log"), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-s", "--", "create"], input=stdin, env=env, cwd=workdir,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"
    return root


def apply_sysctls(lab: Lab, role: str, path: Path) -> None:
    """Sets the `key = value` lines of a sysctl.d file inside the namespace."""
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = (part.strip() for part in line.partition("="))
            assert key == "net.ipv4.ip_forward", key  # the only setting the steps write
            if value == "1":
                lab.forward(role)


def unit_commands(unit: Path) -> list[list[str]]:
    return [line.removeprefix("ExecStart=").split()
            for line in unit.read_text().splitlines() if line.startswith("ExecStart=")]


@dataclass
class Bridge:
    lab: Lab
    plan: Plan
    workdir: Path
    logs: dict[str, Path]
    seconds_to_connect: float


@pytest.fixture(scope="module", params=["udp", "tcp"])
def bridge(request):
    """The bridge of a stack whose vpn.protocol is the parameter, up and connected."""
    require_network_namespaces()
    before = hybrid_values(protocol=request.param)
    before["access"] = ACCESS
    after = {**before, "access": {**ACCESS, "users": ACCESS["users"][:1]}}
    earlier = build_plan(before)
    plan = build_plan(after, earlier=earlier)
    workdir = Path(tempfile.mkdtemp(prefix="gpu-cluster-vpn-"))
    # OpenVPN reads the client-config-dir after dropping to nobody.
    workdir.chmod(0o755)
    lab = Lab()
    try:
        yield _build(lab, plan, workdir, exported(earlier, "userProfiles")["bob"])
    finally:
        lab.close()
        shutil.rmtree(workdir, ignore_errors=True)


def apply_filter(lab: Lab, role: str, dropin: Path, root: Path) -> None:
    """The commands the server unit runs before it starts (its drop-in), in the namespace;
    a "-" command may fail, as systemd lets it."""
    for line in dropin.read_text().splitlines():
        if not line.startswith("ExecStartPre="):
            continue
        command = line.removeprefix("ExecStartPre=")
        optional = command.startswith("-")
        words = command.removeprefix("-").split()
        words[0] = Path(words[0]).name  # /usr/sbin/iptables: the one on PATH here
        words = [str(root) + word if word.startswith("/etc/") else word for word in words]
        result = subprocess.run([IP, "netns", "exec", lab.namespaces[role], *words],
                                capture_output=True, text=True, timeout=15)
        assert optional or result.returncode == 0, (words, result.stderr)


def _build(lab: Lab, plan: Plan, workdir: Path, removed_profile: str) -> Bridge:
    server_root = run_step(workdir, "server",
                           stdin_of(plan, f"{SERVER.name}-install-openvpn-server"))
    # The route the server pushes, as the stubbed kernel of the gateway reports it.
    client_root = run_step(workdir, "gateway", stdin_of(plan, "edge-install-openvpn-client"),
                           routes=f"{VPC_CIDR} via 10.8.0.1 dev tun0\n")
    worker_root = run_step(workdir, "worker", stdin_of(plan, "gpu001-route-to-vpc"))

    for role in ("vpc-host", "vpc-gw", "inet", "onprem-gw", "onprem-host", "admin", *USER_PUBLIC):
        lab.namespace(role)
    lab.link("vpc-host", f"{VPC_HOST_ADDRESS}/24", "vpc-gw", f"{SERVER.address}/24")
    lab.link("onprem-host", f"{LAN_HOST}/24", "onprem-gw", f"{GATEWAY_LAN}/24")
    bridge = lab.bridge("inet")
    for role, address in (("vpc-gw", SERVER_PUBLIC_ADDRESS), ("onprem-gw", GATEWAY_PUBLIC),
                          ("admin", ADMIN_PUBLIC), *USER_PUBLIC.items()):
        _, port = lab.link(role, f"{address}/24", "inet", None)
        lab.ip("inet", "link", "set", port, "master", bridge)
    # The VPC route table: the LAN and the tunnel network via the instance.
    for cidr in (LAN_CIDR, TUNNEL_CIDR):
        lab.ip("vpc-host", "route", "add", cidr, "via", SERVER.address)
    # The on-prem worker: exactly the commands of its route unit.
    for command in unit_commands(worker_root / "etc/systemd/system/gpu-cluster-route-vpc.service"):
        assert command[:3] == ["ip", "route", "replace"], command
        lab.ip("onprem-host", *command[1:])
    apply_sysctls(lab, "vpc-gw", server_root / "etc/sysctl.d/90-gpu-cluster-vpn.conf")
    apply_sysctls(lab, "onprem-gw", client_root / "etc/sysctl.d/90-gpu-cluster-vpn.conf")
    dropin = server_root / "etc/systemd/system/openvpn-server@gpu-cluster.service.d/gpu-cluster.conf"
    if dropin.exists():
        apply_filter(lab, "vpc-gw", dropin, server_root)

    admin_profile = workdir / "admin.ovpn"
    admin_profile.write_text(exported(plan, "adminProfile"))
    admin_profile.chmod(0o600)
    profiles = {"alice": exported(plan, "userProfiles")["alice"], "bob": removed_profile}
    for user, text in profiles.items():
        (workdir / f"{user}.ovpn").write_text(text)
        (workdir / f"{user}.ovpn").chmod(0o600)
    logs = {role: workdir / f"openvpn-{role}.log"
            for role in ("server", "gateway", "admin", *USER_PUBLIC)}
    started = time.monotonic()
    server = lab.start("vpc-gw", "openvpn", "--cd", str(server_root / "etc/openvpn/server"),
                       "--config", "gpu-cluster.conf", log=logs["server"])
    wait_for_text(logs["server"], READY, STARTUP_TIMEOUT, server)
    gateway = lab.start("onprem-gw", "openvpn", "--cd", str(client_root / "etc/openvpn/client"),
                        "--config", "gpu-cluster.conf", log=logs["gateway"])
    admin = lab.start("admin", "openvpn", "--config", str(admin_profile), log=logs["admin"])
    alice = lab.start("alice", "openvpn", "--config", str(workdir / "alice.ovpn"),
                      log=logs["alice"])
    wait_for_text(logs["gateway"], READY, STARTUP_TIMEOUT, gateway)
    wait_for_text(logs["admin"], READY, STARTUP_TIMEOUT, admin)
    wait_for_text(logs["alice"], READY, STARTUP_TIMEOUT, alice)
    seconds = time.monotonic() - started
    # bob tries once (--connect-retry-max 1 --single-session: the client gives up).
    lab.start("bob", "openvpn", "--config", str(workdir / "bob.ovpn"),
              "--connect-retry-max", "1", log=logs["bob"])
    return Bridge(lab, plan, workdir, logs, seconds)


def test_the_lan_and_the_vpc_reach_each_other(bridge):
    ping(bridge.lab, "onprem-host", VPC_HOST_ADDRESS)
    ping(bridge.lab, "vpc-host", LAN_HOST)


def test_both_ends_reach_the_other_side(bridge):
    # Their own traffic leaves from their tunnel addresses: the other side routes the
    # tunnel network back (the VPC route table, the workers' route unit).
    ping(bridge.lab, "onprem-gw", VPC_HOST_ADDRESS)
    ping(bridge.lab, "vpc-gw", LAN_HOST)
    ping(bridge.lab, "onprem-gw", exported(bridge.plan, "serverTunnelAddress"))


def test_tcp_crosses_without_nat_and_with_the_mss_clamped(bridge):
    lab = bridge.lab
    server = lab.start("vpc-host", sys.executable, "-c", TCP_SERVER, VPC_HOST_ADDRESS, "5201",
                       log=bridge.workdir / "tcp-server.log")
    wait_for_text(bridge.workdir / "tcp-server.log", "listening", 10, server)
    client = lab.exec("onprem-host", sys.executable, "-c", TCP_CLIENT, VPC_HOST_ADDRESS, "5201",
                      str(1 << 20), timeout=60)
    server.wait(timeout=30)
    seen = (bridge.workdir / "tcp-server.log").read_text()
    # The VPC host sees the worker's own address: routed, not masqueraded.
    peer = re.search(r"peer (\S+) mss (\d+)", seen)
    assert peer and peer.group(1) == LAN_HOST, seen
    assert "echoed 1048576 bytes" in client, client
    # Both ends announced 1460 (1500-byte links, 1448 with timestamps); OpenVPN lowered it
    # so that a segment plus IPv4/TCP headers (40) and timestamps (12) plus at least the
    # GCM tag (16) fits in mssfix.
    client_mss = int(re.search(r"mss (\d+)", client).group(1))
    for mss in (int(peer.group(2)), client_mss):
        assert mss + 40 + 12 + 16 <= mss_fix(TUNNEL_MTU), (seen, client)


def test_the_admin_profile_reaches_the_vpc_and_the_lan(bridge):
    ping(bridge.lab, "admin", VPC_HOST_ADDRESS)
    ping(bridge.lab, "admin", LAN_HOST)


def test_tunnel_devices_and_routes_are_as_configured(bridge):
    lab = bridge.lab
    for role, device in (("vpc-gw", "gpu-cluster"), ("onprem-gw", "tun0"), ("admin", "tun0")):
        assert f"mtu {TUNNEL_MTU} " in lab.ip(role, "link", "show", device), role
    gateway_routes = lab.ip("onprem-gw", "-4", "route", "show")
    assert re.search(rf"^{re.escape(VPC_CIDR)} via 10\.8\.0\.1 dev tun0", gateway_routes, re.M)
    # The gateway is on the LAN: the server's LAN route is not pushed to it.
    assert [line for line in gateway_routes.splitlines() if line.startswith(LAN_CIDR)] == \
        [line for line in gateway_routes.splitlines()
         if line.startswith(LAN_CIDR) and "tun0" not in line], gateway_routes
    admin_routes = lab.ip("admin", "-4", "route", "show")
    for cidr in (VPC_CIDR, LAN_CIDR):
        assert re.search(rf"^{re.escape(cidr)} via 10\.8\.0\.1 dev tun0", admin_routes, re.M)
    # The server dropped root once up.
    assert "UID set to nobody" in bridge.logs["server"].read_text()


def test_it_connects_quickly(bridge):
    # Fails loudly if a handshake starts timing out (wrong tls-crypt key, MTU, ciphers).
    assert bridge.seconds_to_connect < 20, bridge.seconds_to_connect


def test_a_removed_user_is_refused_by_the_crl(bridge):
    """bob's certificate is in the CRL: the server refuses it at the TLS handshake, before
    it looks for his client-config-dir entry (gone too: ccd-exclusive)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    server_log = bridge.logs["server"]
    while time.monotonic() < deadline and "certificate revoked" not in server_log.read_text():
        time.sleep(0.2)
    assert "VERIFY ERROR: depth=0, error=certificate revoked" in server_log.read_text(), \
        server_log.read_text()[-3000:]
    assert READY not in bridge.logs["bob"].read_text()
    assert not re.search(r"\btun0\b", bridge.lab.ip("bob", "link", "show"))


def test_a_user_reaches_the_api_and_not_the_lan(bridge):
    lab = bridge.lab
    # Pushed: the API's address only.
    routes = lab.ip("alice", "-4", "route", "show")
    tunnel_routes = [line.split()[0] for line in routes.splitlines() if "dev tun0" in line]
    assert sorted(tunnel_routes) == sorted([TUNNEL_CIDR, f"{SERVER.address}"]), routes
    log = bridge.workdir / "api.log"
    api = lab.start("vpc-gw", sys.executable, "-c", TCP_SERVER, SERVER.address, str(API_PORT),
                    log=log)
    wait_for_text(log, "listening", 10, api)
    echoed = lab.exec("alice", sys.executable, "-c", TCP_CLIENT, SERVER.address, str(API_PORT),
                      "4096", timeout=60)
    assert "echoed 4096 bytes" in echoed
    # Routes set by hand do not help: the server drops what was not pushed.
    for cidr in (LAN_CIDR, VPC_CIDR):
        lab.ip("alice", "route", "replace", cidr, "dev", "tun0")
    for target in (LAN_HOST, VPC_HOST_ADDRESS):
        with pytest.raises(AssertionError, match="cannot ping"):
            ping(lab, "alice", target, attempts=2)
