"""What each VPN client may reach, rendered from plain values (no Pulumi): its fixed
tunnel address, the routes the server pushes to it alone, and the server's packet filter
that lets through from that address only what was pushed.

The server pushes no route to everyone: each client's client-config-dir entry (the file
named by its certificate's CN) carries its own `ifconfig-push` and `push "route ..."`, and
`ccd-exclusive` refuses a client without an entry (OpenVPN/openvpn
doc/man-sections/server-options.rst, --ccd-exclusive, --client-config-dir,
--ifconfig-push). Routes are only what the client's kernel is told: the filter
(iptables-restore, applied by the server unit before it starts) is what holds, whatever
routes a client sets itself.

- the on-prem gateway: the VPC (and the server's tunnel address); the LAN behind it
  (iroute) reaches the same;
- the administrator's profile: the VPC and the LAN;
- a user: the Kubernetes API (its address and port), and the networks of
  vpn.userNetworks.<user>, a key the preview warns about.
"""

import hashlib
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

# The server's tun device: its own name, so the filter matches it alone.
SERVER_DEVICE = "gpu-cluster"
FILTER_CHAIN = "GPU-CLUSTER-VPN"
MANAGED = "# Managed by gpu-cluster (install-openvpn-server): client-config-dir entry of "
# Fixed tunnel addresses: the server .1, the gateway .2, the admin .3; users from .16 on.
GATEWAY_HOST, ADMIN_HOST, FIRST_USER_HOST = 2, 3, 16


@dataclass(frozen=True)
class Reach:
    cidr: str
    tcp_port: Optional[int] = None  # None: every protocol and port


@dataclass(frozen=True)
class Client:
    common_name: str
    address: str  # its fixed tunnel address
    reach: tuple[Reach, ...]  # pushed as routes, and let through by the filter
    # The gateway: the network behind it (iroute), whose hosts reach what it reaches.
    behind: Optional[str] = None


def user_slots(tunnel_cidr: str) -> int:
    """How many users the tunnel network has addresses for."""
    return max(0, ipaddress.IPv4Network(tunnel_cidr).num_addresses - 1 - FIRST_USER_HOST)


def user_addresses(tunnel_cidr: str, users: Sequence[str]) -> dict[str, str]:
    """Each user's address: a slot from a hash of the name (the next free one on a
    collision, in name order), so adding or removing a user leaves the others' alone."""
    network, slots = ipaddress.IPv4Network(tunnel_cidr), user_slots(tunnel_cidr)
    if len(users) > slots:
        raise ValueError(f"vpn.tunnelCidr {tunnel_cidr} has addresses for {slots} users, "
                         f"not {len(users)}")
    taken: dict[int, str] = {}
    for user in sorted(users):
        slot = int.from_bytes(hashlib.sha256(user.encode()).digest()[:8], "big") % slots
        while slot in taken:
            slot = (slot + 1) % slots
        taken[slot] = user
    return {user: str(network[FIRST_USER_HOST + slot]) for slot, user in taken.items()}


def gateway_address(tunnel_cidr: str) -> str:
    """The on-prem gateway's fixed tunnel address: what its own packets to the VPC leave
    the tunnel from (those of the LAN behind it keep their LAN addresses)."""
    return str(ipaddress.IPv4Network(tunnel_cidr)[GATEWAY_HOST])


def clients(tunnel_cidr: str, vpc_cidr: str, lan_cidr: str, names: Mapping[str, str],
            api: Reach, user_networks: Mapping[str, Sequence[str]]) -> list[Client]:
    """The gateway, the admin and the users; `names` maps gateway, admin and user-<name>
    to certificate CNs."""
    network = ipaddress.IPv4Network(tunnel_cidr)
    server = f"{network[1]}/32"
    users = sorted(name.removeprefix("user-") for name in names if name.startswith("user-"))
    result = [
        Client(names["gateway"], gateway_address(tunnel_cidr),
               (Reach(vpc_cidr), Reach(server)), behind=lan_cidr),
        Client(names["admin"], str(network[ADMIN_HOST]), (Reach(vpc_cidr), Reach(lan_cidr))),
    ]
    for user, address in sorted(user_addresses(tunnel_cidr, users).items()):
        extra = tuple(Reach(cidr) for cidr in user_networks.get(user, ()))
        result.append(Client(names[f"user-{user}"], address, (api, *extra)))
    return result


def _route(cidr: str) -> str:
    network = ipaddress.IPv4Network(cidr)
    return f"{network.network_address} {network.netmask}"


def ccd_entry(client: Client, tunnel_cidr: str) -> str:
    """The client's client-config-dir file; its first line names it (server.sh splits
    the entries on it)."""
    netmask = ipaddress.IPv4Network(tunnel_cidr).netmask
    lines = [f"{MANAGED}{client.common_name}",
             f"ifconfig-push {client.address} {netmask}"]
    if client.behind:
        lines.append(f"iroute {_route(client.behind)}")
    server = next(ipaddress.IPv4Network(tunnel_cidr).hosts())
    for reach in client.reach:
        # The server's tunnel address is on the client's own tunnel network already.
        if ipaddress.IPv4Network(reach.cidr) != ipaddress.IPv4Network(f"{server}/32"):
            lines.append(f'push "route {_route(reach.cidr)}"')
    return "\n".join(lines) + "\n"


def ccd_entries(all_clients: Sequence[Client], tunnel_cidr: str) -> str:
    return "".join(ccd_entry(client, tunnel_cidr) for client in all_clients)


def filter_rules(all_clients: Sequence[Client]) -> str:
    """iptables-restore input (with --noflush): the chain, declared and so emptied, what
    each client's sources may reach, and a drop of the rest; the jumps to it from INPUT
    and FORWARD are inserted after the unit deleted the earlier ones (server.sh)."""
    lines = [
        "# Managed by gpu-cluster (install-openvpn-server); changes are overwritten.",
        "# What arrives from the VPN: only what each client was pushed.",
        "*filter",
        f":{FILTER_CHAIN} - [0:0]",
        f"-I INPUT 1 -i {SERVER_DEVICE} -j {FILTER_CHAIN}",
        f"-I FORWARD 1 -i {SERVER_DEVICE} -j {FILTER_CHAIN}",
        # Replies to connections from the VPC or the LAN.
        f"-A {FILTER_CHAIN} -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN",
    ]
    for client in all_clients:
        sources = [f"{client.address}/32"] + ([client.behind] if client.behind else [])
        for source in sources:
            for reach in client.reach:
                port = f" -p tcp --dport {reach.tcp_port}" if reach.tcp_port else ""
                lines.append(f"-A {FILTER_CHAIN} -s {source} -d {reach.cidr}{port} -j RETURN")
    lines += [f"-A {FILTER_CHAIN} -j DROP", "COMMIT"]
    return "\n".join(lines) + "\n"
