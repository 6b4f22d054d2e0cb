"""The control plane's virtual IP on on-prem controllers that have no mechanism of their own
(RKE2; k0s has its CPLB): host keepalived's /etc/keepalived/keepalived.conf (plain values,
no Pulumi), which scripts/vip/keepalived.sh installs.

- Unicast VRRP between the controllers (no multicast on the site's LAN), every controller
  `state BACKUP` with the same priority and `nopreempt`: the controller that holds the
  address keeps it until its API server stops answering or it goes away, and one that
  comes back does not take it back (keepalived.conf(5) of 2.2.4, "nopreempt").
- The health check is a TCP connect to 127.0.0.1:<apiPort> by bash's /dev/tcp: the API's
  anonymous /readyz is refused by the distributions (components/kubernetes/control_plane.py
  `_create_wait_for_api`). keepalived splits a script's words itself and execve()s the
  first, no shell (lib/notify.c:200-206 at v2.2.7); inside the double quotes the single
  quotes group `-c`'s argument (keepalived.conf(5), "Quoted strings"; lib/parser.c
  alloc_strvec_quoted_escaped, :1013-1157, run twice: vrrp_parser.c:1494-1504 and
  notify.c:1018-1059). With `enable_script_security` keepalived checks that no one but
  root can change the script's path (notify.c check_security, :626-688) and disables a
  track script it cannot find; `--config-test` then fails ("Disabling track script
  api_server since not found/accessible", exit 5 with Debian's 2.2.7).
- `script_user root` names the user, so keepalived does not look for its default
  `keepalived_script` (notify.c get_default_script_user, :975-1000); another user made
  Debian's keepalived 2.2.7 `--config-test` end itself with SIGTERM where the tests run.
- Only keywords that keepalived 2.2.4 (Ubuntu 22.04: 1:2.2.4-0.2build1), 2.2.7 (Debian 12,
  which the tests run) and 2.2.8 (Ubuntu 24.04: 1:2.2.8-1build2; packages.ubuntu.com/jammy/
  amd64/keepalived and /noble/amd64/keepalived) all install: global_defs
  enable_script_security, script_user (keepalived/core/global_parser.c:2389-2390 at v2.2.4);
  vrrp_script script, interval, timeout, fall, rise (keepalived/vrrp/vrrp_parser.c:2217-2222
  at v2.2.7); vrrp_instance state, interface, track_script, unicast_src_ip, unicast_peer,
  virtual_router_id, priority, advert_int, virtual_ipaddress, nopreempt, authentication,
  auth_type, auth_pass (vrrp_parser.c:1971-2045 at v2.2.4); each install_keyword is in all
  three tags.

Values are checked whole before rendering (the config validates them first; this is the
renderer's own guard). None needs quoting: each is an address, a number, an interface name
or [A-Za-z0-9], so none holds what keepalived's parser reads specially: whitespace, `"`,
`'`, `\\`, `{`, `}`, a comment's `!` or `#` (lib/parser.c decomment, :2165-2212), `$` of a
definition or `~SEQ` (:2776-2786), `@` at a line's start (:2745), all at v2.2.7.
"""

import ipaddress
import re
from collections.abc import Sequence
from typing import Optional

from pydantic import TypeAdapter, ValidationError

from config.control_plane import ControlPlaneEndpoint
from config.hosts import Host
from config.types import DnsLabel, IPv4, InterfaceName, Port

CONFIG_PATH = "/etc/keepalived/keepalived.conf"
HEADER = "# Managed by gpu-cluster (control-plane-vip); changes are overwritten."
# Without an interface, keepalived.sh puts the one holding unicast_src_ip in its place
# (keepalived refuses a vrrp_instance without one: "Unknown interface!").
INTERFACE_PLACEHOLDER = "@INTERFACE_OF_UNICAST_SRC_IP@"
SCRIPT_NAME = "api_server"
INSTANCE_NAME = "control_plane"
# VRRP's authentication data is 8 octets (RFC 2338 5.3.10); keepalived keeps the first 8
# (vrrp_parser.c vrrp_auth_pass_handler), k0s refuses more (cplb.go authPass maxLength 8).
_AUTH_PASS = re.compile(r"[A-Za-z0-9]{1,8}")
_HOST = TypeAdapter(DnsLabel)
_IPV4 = TypeAdapter(IPv4)
_INTERFACE = TypeAdapter(InterfaceName)
_PORT = TypeAdapter(Port)


def _problem(adapter: TypeAdapter, value, name: str) -> list[str]:
    try:
        adapter.validate_python(value, strict=True)
    except ValidationError as error:
        return [f"{name}: {error.errors()[0]['msg'].removeprefix('Value error, ')}"]
    return []


def problems(*, host: str, vip: str, prefix_length: int, interface: Optional[str],
             router_id: int, source: str, peers: Sequence[str], auth_pass: str,
             api_port: int) -> list[str]:
    """Every reason the values cannot be rendered, each naming its parameter."""
    found = (_problem(_HOST, host, "host") + _problem(_IPV4, vip, "vip")
             + _problem(_IPV4, source, "source"))
    for peer in peers:
        found += _problem(_IPV4, peer, "peers")
    if interface is not None:
        found += _problem(_INTERFACE, interface, "interface")
    found += _problem(_PORT, api_port, "api_port")
    if type(prefix_length) is not int or not 1 <= prefix_length <= 32:
        found.append(f"prefix_length: '{prefix_length}' is not a prefix length of 1 to 32")
    # virtual_router_id: "VRID ... (1..255)" (keepalived.conf(5); vrrp_vrid_handler).
    if type(router_id) is not int or not 1 <= router_id <= 255:
        found.append(f"router_id: '{router_id}' is not a virtual router id of 1 to 255")
    if not isinstance(auth_pass, str) or not _AUTH_PASS.fullmatch(auth_pass):
        found.append("auth_pass: is not 1 to 8 letters or digits")
    if not peers:
        found.append("peers: none: VRRP needs the other controllers' addresses")
    if len(set(peers)) != len(peers):
        found.append("peers: an address is listed twice")
    # k0s refuses the same (cplb.go:193-205): a controller never lists itself as a peer.
    if source in peers:
        found.append(f"peers: lists this controller's own address {source}")
    if vip == source or vip in peers:
        found.append(f"vip: {vip} is a controller's own address")
    return found


def keepalived_conf(*, host: str, vip: str, prefix_length: int, interface: Optional[str],
                    router_id: int, source: str, peers: Sequence[str], auth_pass: str,
                    api_port: int) -> str:
    """/etc/keepalived/keepalived.conf of controller `host` (named in a comment): VIP
    `vip`/`prefix_length` on `interface` (None: the one that holds `source`, found on the
    host), VRRP from `source` to `peers` (the other controllers), held while 127.0.0.1:
    `api_port` accepts connections. ValueError naming every bad value."""
    found = problems(host=host, vip=vip, prefix_length=prefix_length, interface=interface,
                     router_id=router_id, source=source, peers=peers, auth_pass=auth_pass,
                     api_port=api_port)
    if found:
        raise ValueError(f"keepalived.conf of {host!r}: " + "; ".join(found))
    address = ipaddress.IPv4Interface(f"{vip}/{prefix_length}")
    lines = [
        HEADER,
        f"# {host}: the API's virtual IP {address}, held by one controller whose API answers.",
        "global_defs {",
        "\tenable_script_security",
        "\tscript_user root",
        "}",
        "",
        f"vrrp_script {SCRIPT_NAME} {{",
        f"\tscript \"/usr/bin/bash -c '</dev/tcp/127.0.0.1/{api_port}'\"",
        "\tinterval 2",
        "\ttimeout 3",
        "\tfall 3",
        "\trise 2",
        "}",
        "",
        f"vrrp_instance {INSTANCE_NAME} {{",
        "\tstate BACKUP",
        "\tnopreempt",
        f"\tinterface {interface or INTERFACE_PLACEHOLDER}",
        f"\tvirtual_router_id {router_id}",
        "\tpriority 100",
        "\tadvert_int 1",
        f"\tunicast_src_ip {source}",
        "\tunicast_peer {",
        *(f"\t\t{peer}" for peer in sorted(peers, key=ipaddress.IPv4Address)),
        "\t}",
        "\tauthentication {",
        "\t\tauth_type PASS",
        f"\t\tauth_pass {auth_pass}",
        "\t}",
        "\tvirtual_ipaddress {",
        f"\t\t{address}",
        "\t}",
        "\ttrack_script {",
        f"\t\t{SCRIPT_NAME}",
        "\t}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def controller_keepalived_conf(endpoint: ControlPlaneEndpoint, host: Host) -> str:
    """keepalived_conf of on-prem controller `host` for the endpoint's VRRP instance: the
    VIP, from `host`'s own address to the other controllers."""
    vrrp = endpoint.vrrp
    if vrrp is None:
        raise ValueError(f"keepalived.conf of {host.name!r}: the endpoint has no VIP")
    vip, prefix_length = vrrp.virtual_ip.split("/")
    return keepalived_conf(host=host.name, vip=vip, prefix_length=int(prefix_length),
                           interface=vrrp.interface_of(host), router_id=vrrp.router_id,
                           source=host.address, peers=endpoint.peers_of(host.address),
                           auth_pass=vrrp.auth_pass, api_port=endpoint.port)
