"""The host firewall's ruleset, as the program renders it for an example stack's host, loaded
by the real nft into a network namespace on a LAN of veth pairs: another node reaches the
kubelet (10250) and the CNI's VXLAN port, a machine on the office LAN does not, and it
still reaches what users need (SSH, a NodePort); IPv6 reaches no node port."""

import ipaddress
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.distributions import distribution_for, distribution_settings
from components.hosts import firewall
from components.layouts.over_ssh import host_firewall_ruleset
from config.loader import load
from config.model import StackConfig
from preview.stack_file import read_stack
from tests.builders import PROJECT_DIR
from tests.vpn.netns import Lab, wait_for_text

# Listens on TCP ports and answers UDP datagrams on others, in the node's namespace.
_SERVER = r"""
import selectors, socket, sys
tcp, udp = sys.argv[1].split(","), sys.argv[2].split(",")
selector = selectors.DefaultSelector()
for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    for port in tcp:
        s = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port))); s.listen(16); selector.register(s, selectors.EVENT_READ, "tcp")
    for port in udp:
        s = socket.socket(family, socket.SOCK_DGRAM)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((host, int(port))); selector.register(s, selectors.EVENT_READ, "udp")
print("ready", flush=True)
while True:
    for key, _ in selector.select():
        if key.data == "tcp":
            key.fileobj.accept()[0].close()
        else:
            data, peer = key.fileobj.recvfrom(2048)
            key.fileobj.sendto(data, peer)
"""

# Exit 0 when the node answers: a TCP connection, or a UDP datagram echoed back.
_CLIENT = r"""
import socket, sys
protocol, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
family = socket.AF_INET6 if ":" in address else socket.AF_INET
s = socket.socket(family, socket.SOCK_STREAM if protocol == "tcp" else socket.SOCK_DGRAM)
s.settimeout(1.5)
try:
    if protocol == "tcp":
        s.connect((address, port))
    else:
        s.sendto(b"probe", (address, port)); s.recvfrom(64)
except OSError as error:
    print(error); sys.exit(1)
"""


def _require_namespaces() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt-get install iproute2 nftables)")


def _settings(stack: str) -> StackConfig:
    stack_file = read_stack(PROJECT_DIR, stack)
    return load(stack_file.config, stack_file.secret_keys, stack)


def _ruleset(settings: StackConfig, host_name: str) -> str:
    host = next(h for h in settings.hosts if h.name == host_name)
    return host_firewall_ruleset(settings, distribution_for(distribution_settings(settings)),
                                 host)


@pytest.fixture
def lab():
    _require_namespaces()
    lab = Lab()
    try:
        yield lab
    finally:
        lab.close()


def _reaches(lab: Lab, role: str, protocol: str, address: str, port: int) -> bool:
    result = subprocess.run(["ip", "netns", "exec", lab.namespaces[role], sys.executable, "-c",
                             _CLIENT, protocol, address, str(port)],
                            capture_output=True, text=True, timeout=15)
    return result.returncode == 0


@pytest.mark.parametrize("stack, host, peer, overlay", [
    # RKE2 (Canal's VXLAN 8472/udp), hybrid: the peer is another on-prem node.
    ("rke2", "rtx01", "cpu01", ("udp", 8472)),
    # k0s with Calico's VXLAN (4789/udp), bare metal: the peer is the controller.
    ("lab", "moscow", "controller", ("udp", 4789)),
])
def test_a_node_reaches_the_node_ports_and_an_office_machine_does_not(
        lab: Lab, tmp_path: Path, stack: str, host: str, peer: str, overlay: tuple[str, int]):
    settings = _settings(stack)
    addresses = {h.name: h.address for h in settings.hosts}
    prefix = settings.network.lan_cidr.split("/")[1]
    # An office machine: an address of the LAN that is no host's.
    office = next(str(a) for a in ipaddress.IPv4Network(settings.network.lan_cidr).hosts()
                  if str(a) not in addresses.values())
    ruleset = tmp_path / "host-firewall.nft"
    ruleset.write_text(_ruleset(settings, host))

    lab.namespace("lan")
    lab.bridge("lan")
    for role, address, v6 in (("node", addresses[host], "fd00::2"),
                              ("peer", addresses[peer], "fd00::1"),
                              ("office", office, "fd00::99")):
        lab.namespace(role)
        inside, bridged = lab.link(role, f"{address}/{prefix}", "lan", None)
        lab.ip(role, "-6", "address", "add", f"{v6}/64", "dev", inside, "nodad")
        lab.ip("lan", "link", "set", bridged, "master", "br0")
    lab.exec("node", "nft", "-f", str(ruleset))
    ports = {"tcp": [10250, 22, 31380], "udp": [overlay[1]]}
    log = tmp_path / "server.log"
    server = lab.start("node", sys.executable, "-u", "-c", _SERVER,
                       ",".join(map(str, ports["tcp"])), ",".join(map(str, ports["udp"])), log=log)
    wait_for_text(log, "ready", 10, server)

    node = addresses[host]
    assert _reaches(lab, "peer", "tcp", node, 10250), f"{peer} cannot reach the kubelet"
    assert _reaches(lab, "peer", overlay[0], node, overlay[1]), f"{peer}: no {overlay}"
    assert not _reaches(lab, "office", "tcp", node, 10250), "the office LAN reaches 10250"
    assert not _reaches(lab, "office", overlay[0], node, overlay[1]), \
        f"the office LAN reaches {overlay}"
    # What users need stays open: SSH, a NodePort (Kubeflow's UI).
    assert _reaches(lab, "office", "tcp", node, 22)
    assert _reaches(lab, "office", "tcp", node, 31380)
    # The cluster is IPv4: no node port answers IPv6, from a node or not.
    assert _reaches(lab, "office", "tcp", "fd00::2", 22)
    assert not _reaches(lab, "peer", "tcp", "fd00::2", 10250)
    assert not _reaches(lab, "office", overlay[0], "fd00::2", overlay[1])
    # The office machine's drops are counted by the table's one drop rule.
    counted = lab.exec("node", "nft", "list", "chain", "inet", "gpu_cluster", "nodes_only")
    assert "counter packets 0 " not in counted, counted


# Prints the source of every VRRP packet (IP protocol 112) the host is handed.
_VRRP_LISTENER = r"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 112)
print("ready", flush=True)
while True:
    data, (source, _) = s.recvfrom(2048)
    print("vrrp from", source, flush=True)
"""
_VRRP_SEND = ("import socket, sys; socket.socket(socket.AF_INET, socket.SOCK_RAW, 112)"
              ".sendto(b'\\x21\\x33\\x64\\x01', (sys.argv[1], 0))")


def test_vrrp_reaches_a_controller_from_the_other_controllers_only(lab: Lab, tmp_path: Path):
    """The controllers' virtual IP (S3: host keepalived; k0s's CPLB): a controller takes VRRP
    from the other controllers, not from an office machine that could claim the address;
    without peers (one controller) the table has no VRRP rule at all."""
    ports = {"kubelet": (10250, "tcp")}
    addresses = {"node": "192.168.2.10", "peer": "192.168.2.11", "office": "192.168.2.50"}
    single = firewall.ruleset("moscow", ports, ["192.168.2.0/24"], ["10.244.0.0/16"])
    assert "112" not in single and "vrrp" not in single
    assert firewall.ruleset("moscow", ports, ["192.168.2.0/24"], ["10.244.0.0/16"],
                            vrrp_peers=()) == single
    ruleset = tmp_path / "host-firewall.nft"
    ruleset.write_text(firewall.ruleset("moscow", ports, ["192.168.2.0/24"], ["10.244.0.0/16"],
                                        vrrp_peers=["192.168.2.11", "192.168.2.12"]))
    lab.namespace("lan")
    lab.bridge("lan")
    for role, address in addresses.items():
        lab.namespace(role)
        _, bridged = lab.link(role, f"{address}/24", "lan", None)
        lab.ip("lan", "link", "set", bridged, "master", "br0")
    lab.exec("node", "nft", "-f", str(ruleset))
    log = tmp_path / "vrrp.log"
    listener = lab.start("node", sys.executable, "-u", "-c", _VRRP_LISTENER, log=log)
    wait_for_text(log, "ready", 10, listener)
    for role in ("office", "peer"):
        lab.exec(role, sys.executable, "-c", _VRRP_SEND, addresses["node"])
    wait_for_text(log, "vrrp from 192.168.2.11", 10, listener)
    assert "192.168.2.50" not in log.read_text()
    counted = lab.exec("node", "nft", "list", "chain", "inet", "gpu_cluster", "vrrp_peers_only")
    assert "counter packets 1 " in counted, counted
