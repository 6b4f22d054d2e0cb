"""The controllers' keepalived.conf (components/hosts/vip.py), read by the real keepalived
(Debian 12's 2.2.7, tests/debian/packages.txt): `keepalived --config-test -f FILE` in a
network namespace of its own, where a veth pair gives the interface the file names
(keepalived refuses an interface that does not exist). Every controller's file of a 3- and a
5-controller control plane passes; a hostile value never reaches a file."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from components.hosts import vip
from tests.builders import PROJECT_DIR

ADDRESSES = ["192.168.2.10", "192.168.2.11", "192.168.2.12", "192.168.2.13", "192.168.2.14"]
VALUES = dict(host="moscow", vip="192.168.2.5", prefix_length=24, interface="eno1",
              router_id=51, source="192.168.2.10", peers=["192.168.2.11", "192.168.2.12"],
              auth_pass="1a2b3c4d", api_port=6443)


def _config_test(path: Path, interface: str = "eno1") -> subprocess.CompletedProcess:
    """`keepalived --config-test -f PATH` in a new network namespace holding `interface`."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a network namespace with the interface the file names)")
    keepalived = shutil.which("keepalived")
    if keepalived is None:
        pytest.skip("keepalived is not installed (apt-get install keepalived)")
    # veth rather than dummy: a kernel without the dummy module has veth (the lab tests').
    script = 'ip link add "$1" type veth peer name peer0 && exec "$2" --config-test -f "$3"'
    return subprocess.run(["unshare", "--net", "sh", "-c", script, "sh", interface, keepalived,
                           str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("controllers", [3, 5])
def test_every_controllers_file_passes_keepalived_config_test(tmp_path: Path, controllers: int):
    addresses = ADDRESSES[:controllers]
    for index, source in enumerate(addresses):
        text = vip.keepalived_conf(**{**VALUES, "host": f"controller-{index}", "source": source,
                                      "peers": [a for a in addresses if a != source]})
        path = tmp_path / f"keepalived-{index}.conf"
        path.write_text(text)
        result = _config_test(path)
        assert result.returncode == 0, (path.read_text(), result.stdout, result.stderr)
        peers = re.search(r"unicast_peer \{\n(.*?)\n\t\}", text, re.S).group(1).split()
        assert source not in peers and len(peers) == controllers - 1
        assert f"unicast_src_ip {source}\n" in text


def test_the_file_holds_the_keywords_the_design_asks_for():
    text = vip.keepalived_conf(**VALUES)
    for line in ("\tstate BACKUP", "\tnopreempt", "\tenable_script_security",
                 "\tscript_user root", "\t\tapi_server", "\t\tauth_type PASS",
                 "\t\t192.168.2.5/24", "\tvirtual_router_id 51", "\tinterface eno1",
                 "\tscript \"/usr/bin/bash -c '</dev/tcp/127.0.0.1/6443'\""):
        assert f"\n{line}\n" in text, line
    assert text.startswith(vip.HEADER + "\n")
    # Unicast only: no multicast group is ever named.
    assert "mcast" not in text and "224.0.0.18" not in text


def test_keepalived_refuses_what_it_cannot_run(tmp_path: Path):
    """The check can fail: keepalived's own errors, for a file with no auth_pass's value and
    for a track script that is not there."""
    good = vip.keepalived_conf(**VALUES)
    for broken in (good.replace("auth_pass 1a2b3c4d", "auth_pass"),
                   good.replace("/usr/bin/bash", "/usr/bin/no-such-shell")):
        path = tmp_path / "broken.conf"
        path.write_text(broken)
        assert _config_test(path).returncode != 0, broken


def test_without_an_interface_the_script_fills_it_in(tmp_path: Path):
    """interface=None renders the placeholder vip/keepalived.sh replaces; with the interface
    in its place, the file is the one rendered with it (keepalived.bats runs the script)."""
    text = vip.keepalived_conf(**{**VALUES, "interface": None})
    assert f"\tinterface {vip.INTERFACE_PLACEHOLDER}\n" in text
    assert text.replace(vip.INTERFACE_PLACEHOLDER, "eno1") == vip.keepalived_conf(**VALUES)
    library = (PROJECT_DIR / "components/scripts/vip/lib.sh").read_text()
    assert f'KEEPALIVED_HEADER="{vip.HEADER}"' in library
    assert f"KEEPALIVED_INTERFACE_PLACEHOLDER={vip.INTERFACE_PLACEHOLDER}\n" in library
    assert f"KEEPALIVED_FILE={vip.CONFIG_PATH}\n" in library


@pytest.mark.parametrize("key, value, named", [
    ("interface", "eth0 x", "interface: 'eth0 x' is not a network interface name"),
    ("interface", "eth0\nvrrp_instance evil {", "interface: "),
    ("interface", "eno1\n", "interface: "),
    ("interface", "eth0#x", "interface: "),
    ("interface", "averyveryverylongname", "interface: "),
    ("host", "moscow\nglobal_defs {", "host: "),
    ("vip", "192.168.2.5 }", "vip: '192.168.2.5 }' is not an IPv4 address"),
    ("source", "192.168.2.010", "source: "),
    ("peers", ["192.168.2.11\n\t}\n", "192.168.2.12"], "peers: "),
    ("peers", ["192.168.2.10", "192.168.2.11"], "peers: lists this controller's own address"),
    ("peers", [], "peers: none"),
    ("auth_pass", 'a"b', "auth_pass: is not 1 to 8 letters or digits"),
    ("auth_pass", "123456789", "auth_pass: "),
    ("auth_pass", "$x", "auth_pass: "),
    ("router_id", 0, "router_id: '0' is not a virtual router id of 1 to 255"),
    ("router_id", 256, "router_id: "),
    ("router_id", True, "router_id: "),
    ("api_port", 70000, "api_port: "),
    ("api_port", "6443", "api_port: "),
    ("prefix_length", 33, "prefix_length: "),
])
def test_a_hostile_value_is_refused_before_rendering(key: str, value, named: str):
    with pytest.raises(ValueError) as raised:
        vip.keepalived_conf(**{**VALUES, key: value})
    assert named in str(raised.value)
    assert str(raised.value).startswith("keepalived.conf of ")


def test_every_problem_is_named_at_once():
    found = vip.problems(**{**VALUES, "interface": "a b", "router_id": 0, "auth_pass": ""})
    assert [p.split(":")[0] for p in found] == ["interface", "router_id", "auth_pass"]
