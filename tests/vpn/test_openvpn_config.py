"""openvpn_config: the rendered server, gateway and admin configs, table-driven over
settings; plain functions, no Pulumi."""

import ipaddress
import re

import pytest

from components.network import openvpn_config
from components.network.openvpn_config import Tunnel

DEFAULT = Tunnel(cidr="10.8.0.0/24", port=1194, protocol="udp", mtu=1400,
                 server_name="lab-vpn-server")
CASES = [
    # (tunnel, VPC CIDR, LAN CIDR)
    (DEFAULT, "10.20.0.0/16", "192.168.2.0/24"),
    (Tunnel(cidr="10.99.4.0/22", port=443, protocol="tcp", mtu=1280,
            server_name="prod-vpn-server"), "172.31.0.0/16", "10.100.0.0/20"),
    (Tunnel(cidr="192.168.250.0/24", port=51194, protocol="udp", mtu=1500,
            server_name="x-vpn-server"), "10.0.0.0/8", "198.51.100.0/24"),
]
FILE_DIRECTIVES = ("ca", "cert", "key", "tls-crypt", "client-config-dir", "status")


def directives(text: str) -> dict[str, list[str]]:
    """Directive -> its arguments, one entry per line (comments and blanks skipped)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith(("#", ";", "<")):
            name, _, rest = line.strip().partition(" ")
            found.setdefault(name, []).append(rest)
    return found


def route(cidr: str) -> str:
    network = ipaddress.IPv4Network(cidr)
    return f"{network.network_address} {network.netmask}"


@pytest.mark.parametrize("tunnel, vpc, lan", CASES)
def test_server_config(tunnel, vpc, lan):
    text = openvpn_config.server_config(tunnel, vpc, lan)
    found = directives(text)
    network = ipaddress.IPv4Network(tunnel.cidr)
    expected = {
        "dev": ["gpu-cluster"], "dev-type": ["tun"], "topology": ["subnet"],
        "port": [str(tunnel.port)],
        "proto": [tunnel.protocol], "server": [f"{network.network_address} {network.netmask}"],
        "route": [route(lan)], "client-config-dir": ["gpu-cluster/ccd"],
        "ccd-exclusive": [""], "crl-verify": ["gpu-cluster/crl.pem"],
        "tls-crypt": ["gpu-cluster/tls-crypt.key"], "ca": ["gpu-cluster/ca.crt"],
        "cert": ["gpu-cluster/server.crt"], "key": ["gpu-cluster/server.key"],
        "data-ciphers": ["AES-256-GCM:AES-128-GCM"], "tun-mtu": [str(tunnel.mtu)],
        "keepalive": ["10 60"], "persist-key": [""], "persist-tun": [""],
        "remote-cert-tls": ["client"], "verify-client-cert": ["require"], "dh": ["none"],
        "user": ["nobody"], "group": ["nogroup"],
    }
    for name, arguments in expected.items():
        assert found.get(name) == arguments, (name, found.get(name))
    assert re.fullmatch(r"gpu-cluster/status\.log \d+", found["status"][0])
    assert ("explicit-exit-notify" in found) == (tunnel.protocol == "udp")
    # No compression (VORACLE) and no cipher pinned outside data-ciphers.
    assert not {"comp-lzo", "compress", "cipher"} & found.keys()
    # Routes are pushed per client (vpn_clients.py), never to everyone.
    assert "push" not in found


@pytest.mark.parametrize("tunnel, vpc, lan", CASES)
def test_gateway_client_config_matches_the_server(tunnel, vpc, lan):
    client = directives(openvpn_config.client_config(tunnel, "203.0.113.7"))
    server = directives(openvpn_config.server_config(tunnel, vpc, lan))
    assert client["client"] == [""]
    assert client["remote"] == [f"203.0.113.7 {tunnel.port} {tunnel.protocol}"]
    assert client["nobind"] == [""]
    assert client["remote-cert-tls"] == ["server"]
    assert client["verify-x509-name"] == [f"{tunnel.server_name} name"]
    assert client["ca"] == ["gpu-cluster/ca.crt"]
    assert client["cert"] == ["gpu-cluster/client.crt"]
    assert client["key"] == ["gpu-cluster/client.key"]
    assert client["tls-crypt"] == ["gpu-cluster/tls-crypt.key"]
    # Both ends agree on everything that must match.
    for name in ("topology", "tun-mtu", "mssfix", "data-ciphers", "tls-version-min"):
        assert client[name] == server[name], name
    assert client["dev"] == ["tun"] and server["dev-type"] == ["tun"]
    # The gateway keeps root: pushed options may change after a reconnect.
    assert "user" not in client and "group" not in client
    assert ("explicit-exit-notify" in client) == (tunnel.protocol == "udp")


@pytest.mark.parametrize("tunnel, vpc, lan", CASES)
def test_key_and_certificate_paths_are_relative(tunnel, vpc, lan):
    for text in (openvpn_config.server_config(tunnel, vpc, lan),
                 openvpn_config.client_config(tunnel, "203.0.113.7")):
        found = directives(text)
        paths = [args.split()[0] for name in FILE_DIRECTIVES for args in found.get(name, [])]
        assert len(paths) >= 4
        for path in paths:
            assert not path.startswith("/") and ".." not in path, path
            assert path.startswith(f"{openvpn_config.FILES_DIR}/"), path


@pytest.mark.parametrize("mtu", [1280, 1400, 1450, 1500])
def test_mss_is_clamped_below_the_tunnel_mtu(mtu):
    tunnel = Tunnel(cidr="10.8.0.0/24", port=1194, protocol="udp", mtu=mtu, server_name="s")
    found = directives(openvpn_config.server_config(tunnel, "10.20.0.0/16", "192.168.2.0/24"))
    assert found["tun-mtu"] == [str(mtu)]
    mssfix = int(found["mssfix"][0])
    # The encrypted segment plus the outer IPv4 (20) and UDP (8) headers fits tun-mtu,
    # and the MSS left after IPv4/TCP headers and the cipher's overhead stays positive.
    assert mssfix + 20 + 8 == mtu
    assert mssfix - 40 - 24 > 1000


def test_the_mtu_comment_explains_mssfix():
    text = openvpn_config.server_config(DEFAULT, "10.20.0.0/16", "192.168.2.0/24")
    comment = " ".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    assert "tun-mtu minus the outer IPv4 and UDP headers (28 bytes)" in comment
    assert "fragmentation" in comment
