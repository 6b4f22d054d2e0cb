"""OpenVPN configuration of the site-to-site bridge between the VPC and the on-prem LAN,
rendered from plain values (no Pulumi): the server's config and client-config-dir entry
for the on-prem gateway, the gateway's client config, and an inline admin profile.

The server and client configs name their keys and certificates relative to the folder
the config is in (`gpu-cluster/ca.crt`), so `openvpn --cd DIR --config gpu-cluster.conf`
works from any folder; systemd's openvpn-server@/openvpn-client@ units run in that folder.
Everything the program writes sits in its own `gpu-cluster/` folder beside the config, so
other OpenVPN setups on the same host (their `ca.crt`, their `ccd/`) are never touched.
"""

import ipaddress
from dataclasses import dataclass

from components.network import vpn_clients

# /etc/openvpn/{server,client}/gpu-cluster.conf, run by openvpn-{server,client}@gpu-cluster.
CONFIG_NAME = "gpu-cluster"
SERVER_UNIT = f"openvpn-server@{CONFIG_NAME}"
CLIENT_UNIT = f"openvpn-client@{CONFIG_NAME}"
# Keys, certificates and the client-config-dir, relative to the config's folder.
FILES_DIR = CONFIG_NAME
CCD_DIR = f"{FILES_DIR}/ccd"
DATA_CIPHERS = "AES-256-GCM:AES-128-GCM"
# A missed keepalive for this long restarts the connection (the server pushes both).
KEEPALIVE = (10, 60)
# The headers OpenVPN's UDP packets carry on the wire, around the encrypted payload.
OUTER_IPV4_UDP_HEADERS = 20 + 8
_STATIC_KEY_BEGIN = "-----BEGIN OpenVPN Static key V1-----"
_STATIC_KEY_END = "-----END OpenVPN Static key V1-----"


@dataclass(frozen=True)
class Tunnel:
    """What both ends must agree on."""

    cidr: str  # the tunnel network, e.g. 10.8.0.0/24; the server takes its first address
    port: int
    protocol: str  # "udp" or "tcp"
    mtu: int  # tun-mtu: the largest packet inside the tunnel
    server_name: str  # CN of the server certificate, which clients insist on


def server_tunnel_address(tunnel_cidr: str) -> str:
    """The server's own address in the tunnel: the first host of the tunnel network."""
    return str(next(ipaddress.IPv4Network(tunnel_cidr).hosts()))


def mss_fix(mtu: int) -> int:
    """`mssfix` for a tunnel of `mtu` bytes: the largest UDP payload a TCP segment may
    become, so that with its outer headers it is never larger than the tunnel MTU."""
    return mtu - OUTER_IPV4_UDP_HEADERS


def _route(cidr: str) -> str:
    network = ipaddress.IPv4Network(cidr)
    return f"{network.network_address} {network.netmask}"


def _mtu_lines(tunnel: Tunnel) -> list[str]:
    return [
        "# MTU. Packets inside the tunnel are at most tun-mtu bytes (the CNI MTU sits lower",
        "# still: VXLAN adds 50). Encrypted and wrapped in UDP they grow by about 52 bytes,",
        "# which a 1500-byte internet path (1492 with PPPoE) still carries.",
        "# TCP is clamped rather than fragmented: mssfix is the largest UDP payload OpenVPN",
        "# lets a TCP segment become; it lowers the MSS of every handshake through the tunnel",
        "# by its own overhead and the inner IPv4 and TCP headers. At tun-mtu minus the outer",
        f"# IPv4 and UDP headers ({OUTER_IPV4_UDP_HEADERS} bytes), an encrypted TCP segment is "
        "at most tun-mtu",
        "# bytes on the wire: TCP through the tunnel needs no path larger than the tunnel",
        "# itself and never depends on ICMP 'fragmentation needed' reaching the sender.",
        f"tun-mtu {tunnel.mtu}",
        f"mssfix {mss_fix(tunnel.mtu)}",
    ]


def _common_lines(tunnel: Tunnel, device: str = "tun") -> list[str]:
    return [
        f"dev {device}",
        *([] if device.startswith("tun") else ["dev-type tun"]),
        "topology subnet",
        *_mtu_lines(tunnel),
        f"data-ciphers {DATA_CIPHERS}",
        "tls-version-min 1.2",
        # Keys stay loaded and the tun device (with its routes) stays up across restarts.
        "persist-key",
        "persist-tun",
    ]


def server_config(tunnel: Tunnel, vpc_cidr: str, lan_cidr: str) -> str:
    """gpu-cluster.conf of the server in the VPC. Its tun device has its own name (the
    filter of vpn_clients.py matches it); routes are pushed per client (vpn_clients.py)."""
    network = ipaddress.IPv4Network(tunnel.cidr)
    lines = [
        "# Managed by gpu-cluster (install-openvpn-server); changes are overwritten.",
        f"# OpenVPN server bridging the VPC {vpc_cidr} and the on-prem LAN {lan_cidr}.",
        f"port {tunnel.port}",
        f"proto {tunnel.protocol}",
        *_common_lines(tunnel, vpn_clients.SERVER_DEVICE),
        f"server {network.network_address} {network.netmask}",
        "# The LAN lives behind the on-prem gateway: the kernel sends it into the tunnel and",
        "# the gateway's client-config-dir entry (iroute) tells OpenVPN which client has it.",
        f"route {_route(lan_cidr)}",
        "# Each client's entry holds its address and the routes it alone is pushed; a",
        "# client without one (a user removed from config) is refused.",
        f"client-config-dir {CCD_DIR}",
        "ccd-exclusive",
        f"keepalive {KEEPALIVE[0]} {KEEPALIVE[1]}",
        f"ca {FILES_DIR}/ca.crt",
        f"cert {FILES_DIR}/server.crt",
        f"key {FILES_DIR}/server.key",
        "# Control channel encrypted and authenticated with a pre-shared key: the port",
        "# answers nothing to anyone without it.",
        f"tls-crypt {FILES_DIR}/tls-crypt.key",
        "# ECDHE only; no Diffie-Hellman parameter file.",
        "dh none",
        "verify-client-cert require",
        "# Revoked client certificates: removed users', replaced ones (vpn_ledger.py).",
        f"crl-verify {FILES_DIR}/crl.pem",
        "remote-cert-tls client",
        "# The server's tun device and routes never change while it runs, so after start-up",
        "# it can drop root (persist-tun keeps the device across restarts; the",
        "# client-config-dir must stay readable for nobody).",
        "user nobody",
        "group nogroup",
        f"status {FILES_DIR}/status.log 30",
        "verb 3",
    ]
    if tunnel.protocol == "udp":
        lines.append("# Clients reconnect at once when the server restarts.")
        lines.append("explicit-exit-notify 1")
    return "\n".join(lines) + "\n"


def _client_lines(tunnel: Tunnel, server_address: str) -> list[str]:
    return [
        "client",
        f"remote {server_address} {tunnel.port} {tunnel.protocol}",
        # Keep trying (DNS or the server being down) instead of giving up.
        "resolv-retry infinite",
        "nobind",
        *_common_lines(tunnel),
        "remote-cert-tls server",
        f"verify-x509-name {tunnel.server_name} name",
    ]


def client_config(tunnel: Tunnel, server_address: str) -> str:
    """gpu-cluster.conf of the on-prem gateway. It keeps root: the addresses and routes the
    server pushes may differ after a reconnect, and only root can apply them."""
    lines = [
        "# Managed by gpu-cluster (install-openvpn-client); changes are overwritten.",
        "# OpenVPN client of the on-prem gateway, which routes the LAN to the VPC.",
        *_client_lines(tunnel, server_address),
        f"ca {FILES_DIR}/ca.crt",
        f"cert {FILES_DIR}/client.crt",
        f"key {FILES_DIR}/client.key",
        f"tls-crypt {FILES_DIR}/tls-crypt.key",
        "verb 3",
    ]
    if tunnel.protocol == "udp":
        lines.append("explicit-exit-notify 1")
    return "\n".join(lines) + "\n"


def admin_profile(tunnel: Tunnel, server_address: str, ca_pem: str, cert_pem: str,
                  key_pem: str, tls_crypt_key: str, holder: str = "administrator") -> str:
    """A self-contained `.ovpn` profile for an administrator or a user (the server
    pushes what each may reach)."""
    lines = [
        f"# gpu-cluster VPN profile of {holder}.",
        "# Contains a private key: keep it like a password.",
        *_client_lines(tunnel, server_address),
        "verb 3",
    ]
    if tunnel.protocol == "udp":
        lines.append("explicit-exit-notify 1")
    for tag, text in (("ca", ca_pem), ("cert", cert_pem), ("key", key_pem),
                      ("tls-crypt", tls_crypt_key)):
        lines += [f"<{tag}>", text.strip(), f"</{tag}>"]
    return "\n".join(lines) + "\n"


def static_key(hex_key: str) -> str:
    """`hex_key` (256 random bytes as hex) as an OpenVPN static key file (tls-crypt)."""
    if len(hex_key) != 512 or any(c not in "0123456789abcdefABCDEF" for c in hex_key):
        raise ValueError("an OpenVPN static key is 256 bytes (512 hex digits)")
    lines = [hex_key[i:i + 32].lower() for i in range(0, 512, 32)]
    return "\n".join([
        "#",
        "# 2048 bit OpenVPN static key",
        "#",
        _STATIC_KEY_BEGIN,
        *lines,
        _STATIC_KEY_END,
    ]) + "\n"
