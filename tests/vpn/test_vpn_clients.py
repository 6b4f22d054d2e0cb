"""vpn_clients: each client's fixed address, its client-config-dir entry and the server's
filter, which the real iptables-restore loads (in a network namespace of its own) and
which applying twice leaves as applying once; the preview's warning for vpn.userNetworks."""

import shutil
import subprocess

import pytest

from components.network import vpn_clients
from components.network.vpn_clients import Reach
from tests.vpn.conftest import build_plan, hybrid_values

TUNNEL, VPC, LAN = "10.8.0.0/24", "10.20.0.0/16", "192.168.2.0/24"
API = Reach("10.20.1.10/32", 6443)
NAMES = {"gateway": "lab-onprem-gateway", "admin": "lab-admin",
         "user-alice": "user-alice", "user-bob": "user-bob"}


def by_name(clients):
    return {client.common_name: client for client in clients}


def test_users_keep_their_addresses_when_others_come_and_go():
    alone = vpn_clients.user_addresses(TUNNEL, ["alice"])
    many = vpn_clients.user_addresses(TUNNEL, ["alice", "bob", "carol", "dave"])
    assert many["alice"] == alone["alice"]
    assert len(set(many.values())) == 4
    for address in many.values():
        assert address.startswith("10.8.0.") and int(address.split(".")[-1]) >= 16
    # Every slot taken: all different, none the broadcast address.
    full = vpn_clients.user_addresses("10.8.0.0/27", [f"u{i}" for i in range(15)])
    assert sorted(int(a.split(".")[-1]) for a in full.values()) == list(range(16, 31))
    with pytest.raises(ValueError, match="addresses for 15 users, not 16"):
        vpn_clients.user_addresses("10.8.0.0/27", [f"u{i}" for i in range(16)])


def test_each_client_is_pushed_its_own_routes():
    clients = by_name(vpn_clients.clients(TUNNEL, VPC, LAN, NAMES, API,
                                          {"bob": ["172.16.0.0/12"]}))
    entry = {name: vpn_clients.ccd_entry(client, TUNNEL) for name, client in clients.items()}
    pushed = {name: [line for line in text.splitlines() if line.startswith("push")]
              for name, text in entry.items()}
    assert pushed == {
        "lab-onprem-gateway": ['push "route 10.20.0.0 255.255.0.0"'],
        "lab-admin": ['push "route 10.20.0.0 255.255.0.0"',
                      'push "route 192.168.2.0 255.255.255.0"'],
        "user-alice": ['push "route 10.20.1.10 255.255.255.255"'],
        "user-bob": ['push "route 10.20.1.10 255.255.255.255"',
                     'push "route 172.16.0.0 255.240.0.0"'],
    }
    assert "iroute 192.168.2.0 255.255.255.0" in entry["lab-onprem-gateway"].splitlines()
    assert "ifconfig-push 10.8.0.2 255.255.255.0" in entry["lab-onprem-gateway"]
    assert "ifconfig-push 10.8.0.3 255.255.255.0" in entry["lab-admin"]
    for name, text in entry.items():
        assert text.startswith(vpn_clients.MANAGED + name + "\n")


def test_the_filter_lets_through_what_was_pushed_and_drops_the_rest():
    clients = vpn_clients.clients(TUNNEL, VPC, LAN, NAMES, API, {})
    rules = vpn_clients.filter_rules(clients).splitlines()
    alice = by_name(clients)["user-alice"].address
    mine = [rule for rule in rules if f"-s {alice}/32" in rule]
    assert mine == [f"-A GPU-CLUSTER-VPN -s {alice}/32 -d 10.20.1.10/32 -p tcp --dport 6443 "
                    "-j RETURN"]
    assert "-A GPU-CLUSTER-VPN -s 192.168.2.0/24 -d 10.20.0.0/16 -j RETURN" in rules
    assert rules[-2:] == ["-A GPU-CLUSTER-VPN -j DROP", "COMMIT"]


def _in_namespace(*command: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "-n", "--", "bash", "-c", *command], input=stdin,
                          capture_output=True, text=True, timeout=30)


def test_iptables_loads_the_filter_and_applying_it_twice_is_applying_it_once(tmp_path):
    if shutil.which("iptables-restore") is None or shutil.which("unshare") is None:
        pytest.skip("iptables (apt-get install iptables) and unshare are needed")
    clients = vpn_clients.clients(TUNNEL, VPC, LAN, NAMES, API, {"bob": ["172.16.0.0/12"]})
    rules = tmp_path / "filter.rules"
    rules.write_text(vpn_clients.filter_rules(clients))
    # What the server unit's drop-in runs before each start (server.sh), twice.
    start = (f"iptables -w -D INPUT -i gpu-cluster -j GPU-CLUSTER-VPN 2>/dev/null; "
             f"iptables -w -D FORWARD -i gpu-cluster -j GPU-CLUSTER-VPN 2>/dev/null; "
             f"iptables-restore -w --noflush {rules}")
    result = _in_namespace(f"{start} && {start} && iptables -S")
    if "Permission denied" in result.stderr or "Operation not permitted" in result.stderr:
        pytest.skip(f"no network namespace here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    listed = result.stdout.splitlines()
    assert listed.count("-A INPUT -i gpu-cluster -j GPU-CLUSTER-VPN") == 1, listed
    assert listed.count("-A FORWARD -i gpu-cluster -j GPU-CLUSTER-VPN") == 1, listed
    chain = [line for line in listed if line.startswith("-A GPU-CLUSTER-VPN")]
    assert len(chain) == len(set(chain)) == sum(
        1 for line in rules.read_text().splitlines() if line.startswith("-A GPU-CLUSTER-VPN"))
    assert chain[-1] == "-A GPU-CLUSTER-VPN -j DROP"


def test_the_preview_warns_about_a_users_wider_reach():
    values = hybrid_values(userNetworks={"alice": ["192.168.2.0/24"]})
    values["access"] = {"teams": [{"name": "vision"}],
                        "users": [{"name": "alice", "namespaces": ["vision"]}]}
    plan = build_plan(values)
    assert [w for w in plan.warnings if "vpn.userNetworks" in w] == [
        "vpn.userNetworks.alice: the VPN lets user alice reach 192.168.2.0/24 beyond the "
        "Kubernetes API"]
    assert not [w for w in build_plan(hybrid_values()).warnings if "vpn.userNetworks" in w]
