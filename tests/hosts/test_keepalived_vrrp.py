"""Three controllers' keepalived.conf (components/hosts/vip.py) run by the real keepalived
(Debian's 2.2.7), each in a network namespace on one LAN bridge, each with a stand-in API
server on 127.0.0.1:6443: one controller holds the virtual IP; when its API stops answering
(the track script's TCP connect fails), another takes it; when it answers again, the
address stays where it is (nopreempt)."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components.hosts import vip
from tests.vpn.netns import Lab, wait_for_text

ADDRESSES = {"c0": "192.168.2.10", "c1": "192.168.2.11", "c2": "192.168.2.12"}
VIP = "192.168.2.5"
_API = r"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 6443)); s.listen(16)
print("ready", flush=True)
while True:
    s.accept()[0].close()
"""


@pytest.fixture
def lab():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    for tool in ("ip", "keepalived"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt-get install iproute2 keepalived)")
    lab = Lab()
    try:
        yield lab
    finally:
        lab.close()


def _holders(lab: Lab) -> list[str]:
    return [role for role in ADDRESSES
            if f"inet {VIP}/24 " in lab.ip(role, "-4", "-o", "address", "show")]


def _wait_for_one_holder(lab: Lab, not_on: str = "", timeout: float = 40) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        holders = _holders(lab)
        if len(holders) == 1 and holders[0] != not_on:
            return holders[0]
        time.sleep(0.5)
    raise AssertionError(f"{VIP} is held by {_holders(lab)}, not by one controller"
                         + (f" other than {not_on}" if not_on else ""))


def _start_api(lab: Lab, role: str, tmp_path: Path) -> subprocess.Popen:
    log = tmp_path / f"{role}-api-{time.monotonic_ns()}.log"
    api = lab.start(role, sys.executable, "-u", "-c", _API, log=log)
    wait_for_text(log, "ready", 10, api)
    return api


def test_the_virtual_ip_follows_an_answering_api_server(lab: Lab, tmp_path: Path):
    lab.namespace("lan")
    lab.bridge("lan")
    apis = {}
    for role, address in ADDRESSES.items():
        lab.namespace(role)
        inside, bridged = lab.link(role, f"{address}/24", "lan", None)
        lab.ip("lan", "link", "set", bridged, "master", "br0")
        conf = tmp_path / f"{role}.conf"
        conf.write_text(vip.keepalived_conf(
            host=role, vip=VIP, prefix_length=24, interface=inside, router_id=51,
            source=address, peers=[a for a in ADDRESSES.values() if a != address],
            auth_pass="1a2b3c4d", api_port=6443))
        apis[role] = _start_api(lab, role, tmp_path)
        # Pid files of its own: the namespaces share /run.
        lab.start(role, "keepalived", "--dont-fork", "--log-console", "--vrrp", "-f", str(conf),
                  *(option for kind in "prcb"
                    for option in (f"-{kind}", str(tmp_path / f"{role}-{kind}.pid"))),
                  log=tmp_path / f"{role}-keepalived.log")

    first = _wait_for_one_holder(lab)
    time.sleep(3)
    assert _holders(lab) == [first], "the address moved while every API answered"

    apis[first].terminate()
    apis[first].wait(timeout=10)
    second = _wait_for_one_holder(lab, not_on=first)
    assert "VRRP_Script(api_server) failed" in (tmp_path / f"{first}-keepalived.log").read_text()

    apis[first] = _start_api(lab, first, tmp_path)
    # The script's rise (2 checks, 2 s apart) and then some: the address stays.
    time.sleep(8)
    assert _holders(lab) == [second], "the returning controller took the address back"
    log = (tmp_path / f"{first}-keepalived.log").read_text()
    assert "VRRP_Script(api_server) succeeded" in log.split("VRRP_Script(api_server) failed")[-1]
