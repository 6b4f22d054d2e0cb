"""Host checks over recorded command outputs (`ip -j addr`, `ip -j route`, `sysctl -n`,
`readlink -f`, the kubelet's resolv.conf, `nvidia-smi --format=csv`): each failure found on
the host it is about, the recorded healthy host passing, and the folder layout read."""

import json
import shutil

import pytest

from doctor import DoctorError
from doctor.checks import hosts as host_checks
from doctor.findings import OK, PROBLEM, UNCHECKED, WARNING
from doctor.hosts import UNREACHABLE, commands, read_recorded
from tests.doctor.cluster import FIXTURES

TUN0 = {"ifindex": 12, "ifname": "tun0",
        "flags": ["POINTOPOINT", "MULTICAST", "NOARP", "UP", "LOWER_UP"], "mtu": 1400,
        "qdisc": "fq_codel", "operstate": "UNKNOWN", "group": "default", "txqlen": 500,
        "link_type": "none",
        "addr_info": [{"family": "inet", "local": "10.8.0.2", "prefixlen": 24, "scope": "global",
                       "label": "tun0", "valid_life_time": 4294967295,
                       "preferred_life_time": 4294967295}]}
VPC_ROUTE = {"dst": "10.0.0.0/16", "gateway": "10.8.0.1", "dev": "tun0", "flags": []}


def bad(cluster, check):
    found = [f for f in check(cluster.context())]
    return [f for f in found if f.verdict != OK]


def edit(cluster, file, change, host="moscow"):
    value = json.loads(cluster.hosts[host][file])
    change(value)
    cluster.hosts[host][file] = json.dumps(value)


def hybrid(cluster):
    """moscow as the on-prem VPN end of a hybrid stack, its controller on AWS over tun0."""
    cluster.gateways = {"aws": "203.0.113.10", "onPrem": "192.168.2.2"}
    cluster.nodes[0]["address"] = "10.0.1.10"
    edit(cluster, "ip-addr.json", lambda links: links.append(dict(TUN0)))
    edit(cluster, "ip-route.json", lambda routes: routes.insert(1, dict(VPC_ROUTE)))


def test_every_host_check_passes_on_the_recorded_host(cluster):
    for check in host_checks.CHECKS:
        found = check(cluster.context())
        assert [f.verdict for f in found] == [OK], (check.__name__, found)
        assert found[0].subject == "host moscow"


def test_configured_address_on_no_interface(cluster):
    def move(links):
        next(l for l in links if l["ifname"] == "eno2")["addr_info"][0]["local"] = "192.168.3.2"
    edit(cluster, "ip-addr.json", move)
    [finding] = bad(cluster, host_checks.address_on_interface)
    assert (finding.verdict, finding.subject) == (PROBLEM, "host moscow")
    assert finding.message == ("configured address 192.168.2.2 is on no interface (IPv4 "
                               "addresses: 192.168.3.2 (eno2), 10.244.1.0 (vxlan.calico))")


def test_configured_address_on_an_interface_that_is_down(cluster):
    def down(links):
        eno2 = next(l for l in links if l["ifname"] == "eno2")
        eno2.update(operstate="DOWN", flags=["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"])
    edit(cluster, "ip-addr.json", down)
    [finding] = bad(cluster, host_checks.address_on_interface)
    assert finding.message == "192.168.2.2 is on eno2, which is DOWN"


def test_hybrid_host_with_its_tunnel_passes(cluster):
    hybrid(cluster)
    assert bad(cluster, host_checks.routes) == []


def test_vpn_down_leaves_the_other_side_on_the_default_route(cluster):
    hybrid(cluster)
    # The tunnel gone: the kernel drops tun0 and every route through it.
    edit(cluster, "ip-addr.json", lambda links: links.remove(TUN0))
    edit(cluster, "ip-route.json", lambda routes: routes.remove(VPC_ROUTE))
    [finding] = bad(cluster, host_checks.routes)
    assert (finding.verdict, finding.subject) == (PROBLEM, "host moscow")
    assert finding.message == ("controller (10.0.1.10) is reached only through the default "
                               "route (via 192.168.2.254)")
    assert "VPN" in finding.fix


def test_route_through_a_tunnel_that_is_down(cluster):
    hybrid(cluster)
    edit(cluster, "ip-addr.json",
         lambda links: next(l for l in links if l["ifname"] == "tun0").update(operstate="DOWN"))
    [finding] = bad(cluster, host_checks.routes)
    assert finding.message == "controller (10.0.1.10) is routed through tun0, which is DOWN"


def test_default_route_on_a_single_site_stack_is_a_warning(cluster):
    cluster.nodes[0]["address"] = "192.168.7.1"
    [finding] = bad(cluster, host_checks.routes)
    assert finding.verdict == WARNING


def test_no_route_at_all(cluster):
    edit(cluster, "ip-route.json", lambda routes: routes.pop(0))  # no default route
    cluster.nodes[0]["address"] = "192.168.7.1"
    [finding] = bad(cluster, host_checks.routes)
    assert finding.verdict == PROBLEM and "no route to controller (192.168.7.1)" in finding.message


def test_pod_network_mtu_too_big_for_the_tunnel(cluster):
    hybrid(cluster)
    [finding] = bad(cluster, host_checks.mtu)
    assert (finding.verdict, finding.subject) == (PROBLEM, "host moscow")
    assert finding.message == ("vxlan.calico MTU 1450 + 50 bytes of encapsulation exceeds "
                               "tun0's MTU 1400 on the path to controller (10.0.1.10)")
    assert "network.mtu to 1350" in finding.fix


def test_pod_network_mtu_that_fits_the_tunnel(cluster):
    hybrid(cluster)
    edit(cluster, "ip-addr.json", lambda links: next(
        l for l in links if l["ifname"] == "vxlan.calico").update(mtu=1350))
    assert bad(cluster, host_checks.mtu) == []


def test_route_mtu_counts(cluster):
    edit(cluster, "ip-route.json", lambda routes: next(
        r for r in routes if r["dst"] == "192.168.2.0/24").update(metrics=[{"mtu": 1400}]))
    [finding] = bad(cluster, host_checks.mtu)
    assert "exceeds eno2's MTU 1400" in finding.message


def test_inotify_below_kubeflow(cluster):
    cluster.hosts["moscow"]["inotify.txt"] = "128\n65536\n"  # Ubuntu's defaults
    [finding] = bad(cluster, host_checks.inotify)
    assert finding.message == ("fs.inotify.max_user_instances is 128, Kubeflow needs 2280; "
                               "fs.inotify.max_user_watches is 65536, Kubeflow needs 1255360")


def test_kubelet_resolv_conf_on_the_stub(cluster):
    cluster.hosts["moscow"]["resolv-target.txt"] = "/run/systemd/resolve/stub-resolv.conf\n"
    cluster.hosts["moscow"]["resolv-conf.txt"] = (
        "# This is /run/systemd/resolve/stub-resolv.conf managed by man:systemd-resolved(8).\n"
        "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lab.example\n")
    [finding] = bad(cluster, host_checks.resolv_conf)
    assert (finding.verdict, finding.subject) == (PROBLEM, "host moscow")
    assert "nameservers 127.0.0.53" in finding.message and "pod DNS loops" in finding.message


def test_nvidia_smi_sees_fewer_gpus(cluster):
    text = cluster.hosts["moscow"]["nvidia-smi.csv"]
    cluster.hosts["moscow"]["nvidia-smi.csv"] = "\n".join(text.splitlines()[:3]) + "\n"
    [finding] = bad(cluster, host_checks.gpus_seen)
    assert finding.message == "nvidia-smi sees 2 GPUs, hosts[moscow].gpus is 4"


def test_nvidia_smi_without_its_driver(cluster):
    cluster.hosts["moscow"]["nvidia-smi.csv"] = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
        "sure that the latest NVIDIA driver is installed and running.\n\n")
    [finding] = bad(cluster, host_checks.gpus_seen)
    assert finding.verdict == PROBLEM
    assert finding.message.startswith("nvidia-smi failed: NVIDIA-SMI has failed")


def test_unreachable_and_uncollected_hosts_are_could_not_check(cluster):
    cluster.hosts["madrid"] = {UNREACHABLE: "ssh ubuntu@192.168.2.3 failed: Connection timed out"}
    cluster.hosts["moscow"]["inotify.txt"] = None
    found = {f.subject: f for f in bad(cluster, host_checks.inotify)}
    assert found["host madrid"].verdict == UNCHECKED
    assert found["host moscow"].message == "not collected: inotify.txt"


def test_read_recorded_folder(tmp_path):
    shutil.copytree(FIXTURES / "hosts", tmp_path / "hosts")
    (tmp_path / "hosts" / "moscow" / "nvidia-smi.csv").unlink()
    found = read_recorded(str(tmp_path / "hosts"), ["controller", "moscow", "madrid"])
    assert list(found) == ["moscow"]
    assert found["moscow"]["nvidia-smi.csv"] is None
    assert set(found["moscow"]) == {command.file for command in commands()}
    with pytest.raises(DoctorError, match="is not a folder"):
        read_recorded(str(tmp_path / "nothing"), ["moscow"])


KUBE_BRIDGE = {"ifindex": 5, "ifname": "kube-bridge",
               "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 1500,
               "qdisc": "noqueue", "operstate": "UP", "group": "default", "txqlen": 1000,
               "link_type": "ether", "address": "9a:1c:52:0e:7d:41",
               "broadcast": "ff:ff:ff:ff:ff:ff",
               "addr_info": [{"family": "inet", "local": "10.244.1.1", "prefixlen": 24,
                              "scope": "global", "label": "kube-bridge",
                              "valid_life_time": 4294967295,
                              "preferred_life_time": 4294967295}]}
KUBE_ROUTER_TUNNEL = {"ifindex": 14, "ifname": "tun-c0a80705", "flags": [
    "POINTOPOINT", "NOARP", "UP", "LOWER_UP"], "mtu": 1480, "qdisc": "noqueue",
    "operstate": "UNKNOWN", "group": "default", "txqlen": 1000, "link_type": "ipip",
    "address": "192.168.2.2", "link_pointtopoint": True, "broadcast": "192.168.7.5",
    "addr_info": []}


def kube_router(cluster, tunnel: bool):
    """moscow on k0s's kube-router instead of Calico, a 1500 byte bridge."""
    def change(links):
        links[:] = [l for l in links if not l["ifname"].startswith(("vxlan.", "cali"))]
        links.append(dict(KUBE_BRIDGE))
        if tunnel:
            links.append(dict(KUBE_ROUTER_TUNNEL))
    edit(cluster, "ip-addr.json", change)


def test_kube_router_bridge_without_tunnels_adds_nothing(cluster):
    kube_router(cluster, tunnel=False)
    assert bad(cluster, host_checks.mtu) == []


def test_kube_router_bridge_that_tunnels(cluster):
    kube_router(cluster, tunnel=True)
    [finding] = bad(cluster, host_checks.mtu)
    assert finding.message.startswith("kube-bridge MTU 1500 + 20 bytes of encapsulation "
                                      "exceeds eno2's MTU 1500")
    assert "network.mtu to 1480" in finding.fix
