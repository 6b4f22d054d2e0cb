"""Network namespaces for the tunnel test: a VPC, an "internet" segment and an on-prem LAN
built from veth pairs and a bridge, every wait bounded, everything removed again."""

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest
from tests.builders import run_checked

IP = "ip"


def require_network_namespaces() -> None:
    """Skips (with the reason) unless this process can build namespaces and run OpenVPN."""
    if os.geteuid() != 0:
        pytest.skip("the tunnel test needs root (network namespaces, tun devices)")
    if shutil.which(IP) is None:
        pytest.skip("iproute2 (`ip`) is not installed")
    probe = f"gcv-probe-{secrets.token_hex(3)}"
    added = subprocess.run([IP, "netns", "add", probe], capture_output=True, text=True)
    if added.returncode != 0:
        pytest.skip(f"`ip netns` is unavailable here: {added.stderr.strip()}")
    subprocess.run([IP, "netns", "del", probe], capture_output=True)
    if shutil.which("openvpn") is None:
        pytest.skip("openvpn is not installed (apt-get install openvpn)")


class Lab:
    """Namespaces named `<role>-<token>` (unique per run) and the processes started in
    them; `close()` kills the processes and deletes the namespaces (and so the links)."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(3)
        self.namespaces: dict[str, str] = {}
        self.processes: list[subprocess.Popen] = []
        self._links = 0

    def namespace(self, role: str) -> str:
        name = f"{role}-{self.token}"
        run_checked(IP, "netns", "add", name, timeout=15)
        self.namespaces[role] = name
        self.ip(role, "link", "set", "lo", "up")
        return name

    def ip(self, role: str, *args: str) -> str:
        return run_checked(IP, "-n", self.namespaces[role], *args, timeout=15)

    def exec(self, role: str, *command: str, timeout: float = 15) -> str:
        return run_checked(IP, "netns", "exec", self.namespaces[role], *command, timeout=timeout)

    def link(self, role_a: str, address_a: Optional[str], role_b: str,
             address_b: Optional[str]) -> tuple[str, str]:
        """A veth pair between two namespaces; returns the two interface names."""
        self._links += 1
        name_a, name_b = f"v{self.token}{self._links}a", f"v{self.token}{self._links}b"
        run_checked(IP, "link", "add", name_a, "netns", self.namespaces[role_a], "type", "veth",
                    "peer", "name", name_b, "netns", self.namespaces[role_b], timeout=15)
        for role, name, address in ((role_a, name_a, address_a), (role_b, name_b, address_b)):
            if address:
                self.ip(role, "address", "add", address, "dev", name)
            self.ip(role, "link", "set", name, "up")
        return name_a, name_b

    def bridge(self, role: str) -> str:
        self.ip(role, "link", "add", "br0", "type", "bridge")
        self.ip(role, "link", "set", "br0", "up")
        return "br0"

    def forward(self, role: str) -> None:
        """net.ipv4.ip_forward=1 inside the namespace (what the steps' sysctl file does)."""
        self.exec(role, sys.executable, "-c",
                  "open('/proc/sys/net/ipv4/ip_forward', 'w').write('1')")

    def start(self, role: str, *command: str, log: Path, cwd: Optional[Path] = None
              ) -> subprocess.Popen:
        handle = open(log, "w")
        process = subprocess.Popen([IP, "netns", "exec", self.namespaces[role], *command],
                                   stdout=handle, stderr=subprocess.STDOUT, cwd=cwd,
                                   start_new_session=True)
        handle.close()
        self.processes.append(process)
        return process

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + 10
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            if process.poll() is None:
                process.kill()
                process.wait(timeout=5)
        for name in self.namespaces.values():
            subprocess.run([IP, "netns", "del", name], capture_output=True)
        self.namespaces.clear()


def wait_for_text(path: Path, text: str, timeout: float, process: subprocess.Popen) -> None:
    """Waits until `text` appears in the log at `path`; fails with the log otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return
        if process.poll() is not None:
            raise AssertionError(f"{process.args} exited ({process.returncode}):\n{content}")
        time.sleep(0.2)
    raise AssertionError(f"no '{text}' within {timeout}s in {path}:\n"
                         f"{path.read_text(errors='replace') if path.exists() else ''}")


# Sends one ICMP echo request and waits for the matching reply (no `ping` binary needed).
_PING = r"""
import os, socket, struct, sys, time
target, timeout = sys.argv[1], float(sys.argv[2])
def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF
ident, payload = os.getpid() & 0xFFFF, b"gpu-cluster tunnel test"
header = struct.pack("!BBHHH", 8, 0, 0, ident, 1)
packet = struct.pack("!BBHHH", 8, 0, checksum(header + payload), ident, 1) + payload
sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
sock.sendto(packet, (target, 0))
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        data, (source, _) = sock.recvfrom(2048)
    except socket.timeout:
        break
    kind, _, _, reply_ident, _ = struct.unpack("!BBHHH", data[20:28])
    if kind == 0 and reply_ident == ident and source == target:
        print(f"reply from {source}")
        sys.exit(0)
print(f"no reply from {target} within {timeout}s")
sys.exit(1)
"""


def ping(lab: Lab, role: str, target: str, attempts: int = 5) -> None:
    """One echo reply from `target` seen in namespace `role`, within `attempts` tries."""
    output = ""
    for _ in range(attempts):
        result = subprocess.run(
            [IP, "netns", "exec", lab.namespaces[role], sys.executable, "-c", _PING, target, "2"],
            capture_output=True, text=True, timeout=10)
        output = result.stdout + result.stderr
        if result.returncode == 0:
            return
    raise AssertionError(f"{role} cannot ping {target}: {output.strip()}")


# A one-connection TCP echo server: prints the peer's address and the MSS, echoes, exits.
TCP_SERVER = r"""
import socket, sys
address, port = sys.argv[1], int(sys.argv[2])
with socket.create_server((address, port)) as server:
    server.settimeout(30)
    print("listening", flush=True)
    conn, peer = server.accept()
    with conn:
        conn.settimeout(30)
        print(f"peer {peer[0]} mss {conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)}",
              flush=True)
        while data := conn.recv(65536):
            conn.sendall(data)
"""

# Sends SIZE bytes to the echo server, checks they come back unchanged, prints the MSS.
TCP_CLIENT = r"""
import hashlib, os, socket, sys
address, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
payload = os.urandom(size)
with socket.create_connection((address, port), timeout=30) as conn:
    mss = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    conn.sendall(payload)
    conn.shutdown(socket.SHUT_WR)
    received = b""
    while data := conn.recv(65536):
        received += data
assert hashlib.sha256(received).digest() == hashlib.sha256(payload).digest(), len(received)
print(f"echoed {len(received)} bytes mss {mss}")
"""
