"""The control plane's endpoint: where nodes and users reach the Kubernetes API, derived
once from the config. One controller: its address (a host's, or the EC2 control plane's
fixed private one on hybrid and cloud). Several: `kubernetes.controlPlane.address`, a VIP
the on-prem controllers hold over VRRP or an external load balancer in front of them."""

import hashlib
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Optional

from config.cloud import (
    AwsSettings,
    api_load_balancer_addresses,
    controller_addresses,
)
from config.hosts import Host
from config.kubernetes import KubernetesSettings

LoadBalancer = Literal["vip", "external"]


@dataclass(frozen=True)
class Vrrp:
    """The VRRP instance every on-prem controller runs for the VIP; all but the interface
    must be equal on every controller (k0s docs/cplb.md:75 at v1.36.3+k0s.2)."""
    # The VIP with the LAN's prefix length ("in the same CIDR as the physical interface",
    # cplb.md:66).
    virtual_ip: str
    router_id: int
    auth_pass: str
    # kubernetes.controlPlane.vip.interface; None: each controller's own (interface_of).
    interface: Optional[str] = None

    @property
    def address(self) -> str:
        return self.virtual_ip.split("/")[0]

    def interface_of(self, host: Host) -> Optional[str]:
        """The NIC the VIP goes on at `host`: vip.interface, else hosts[].interface; None
        leaves it to the VRRP daemon (k0s: the default route's NIC, cplb.md:73)."""
        return self.interface or host.interface


def vrrp_auth_pass(cluster_name: str) -> str:
    """VRRP's PASS authentication, the first 8 hex digits of the cluster name's sha256. It
    is no secret and is not kept as one: it travels in clear text in every advertisement
    and k0s says it only prevents accidental conflicts between clusters (docs/cplb.md:70-71;
    at most 8 characters, static/_crds/k0s/k0s.k0sproject.io_clusterconfigs.yaml:827)."""
    return hashlib.sha256(cluster_name.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class ControlPlaneEndpoint:
    # Where nodes reach the API and the distribution's join or supervisor port (the join
    # tokens' and agents' address); users too, unless a layout gives them a public one.
    node_address: str
    # kubernetes.apiPort.
    port: int
    # kubernetes.apiSans: the API certificate's names beyond the endpoint's own.
    api_sans: tuple[str, ...] = ()
    # How many controllers: the on-prem controller hosts, or kubernetes.controlPlane.replicas
    # EC2 instances on hybrid and cloud.
    replicas: int = 1
    # The controllers' addresses in order (the first initialises): the on-prem controller
    # hosts', or the EC2 controllers' (config.cloud.controller_addresses).
    controller_addresses: tuple[str, ...] = ()
    # kubernetes.controlPlane.loadBalancer when kubernetes.controlPlane.address is set;
    # None: node_address is the single controller's own.
    load_balancer: Optional[LoadBalancer] = None
    # With load_balancer "vip" on-prem: the VRRP instance that holds node_address.
    vrrp: Optional[Vrrp] = None

    @property
    def node_url(self) -> str:
        return f"https://{self.node_address}:{self.port}"

    @property
    def vip(self) -> Optional[str]:
        """The virtual IP the controllers hold, if they hold one."""
        return self.vrrp.address if self.vrrp is not None else None

    def peers_of(self, address: str) -> tuple[str, ...]:
        """The other on-prem controllers' addresses (VRRP unicast peers, join targets)."""
        return tuple(peer for peer in self.controller_addresses if peer != address)

    def joins(self, address: str) -> bool:
        """Whether the on-prem controller at `address` joins the first one."""
        return address in self.controller_addresses[1:]

    def sans(self, public: Sequence[str] = (), own: str = "") -> list[str]:
        """The API certificate's names: the endpoint, the layout's public addresses (known
        at `up`), kubernetes.apiSans, and the controller's `own` address (what another
        controller dials it at: the backups' turn, backup/lib.sh backup_taker); each once,
        in that order."""
        return list(dict.fromkeys([self.node_address, *public, *self.api_sans,
                                   *([own] if own else [])]))


def control_plane_endpoint(controllers: Sequence[Host], aws: Optional[AwsSettings],
                           kubernetes: KubernetesSettings, lan_cidr: Optional[str] = None,
                           cluster_name: str = "") -> ControlPlaneEndpoint:
    """kubernetes.controlPlane.address when set; else the first controller host's address,
    or with none among the hosts (hybrid, cloud) the EC2 control plane's fixed private one,
    or with several EC2 controllers their load balancer's first address.
    The VRRP instance when the address is a VIP on the LAN (config/control_plane_checks.py
    holds it inside network.lanCidr)."""
    plane = kubernetes.control_plane
    on_prem = tuple(host.address for host in controllers)
    replicas = len(on_prem) if on_prem else plane.replicas or 1
    addresses = on_prem or tuple(controller_addresses(aws, replicas))
    common = dict(port=kubernetes.api_port, api_sans=tuple(kubernetes.api_sans),
                  replicas=replicas, controller_addresses=addresses)
    if not on_prem and replicas > 1:
        # EC2 controllers behind the network load balancer, which forwards each port of
        # theirs at its own address: for the distributions, a load balancer of the user's.
        return ControlPlaneEndpoint(node_address=api_load_balancer_addresses(aws, replicas)[0],
                                    load_balancer="external", **common)
    if plane.address is None:
        return ControlPlaneEndpoint(node_address=addresses[0], **common)
    vrrp = None
    if plane.load_balancer == "vip" and lan_cidr is not None:
        prefix = ipaddress.ip_network(lan_cidr).prefixlen
        vrrp = Vrrp(virtual_ip=f"{plane.address}/{prefix}", router_id=plane.vip.router_id,
                    auth_pass=vrrp_auth_pass(cluster_name), interface=plane.vip.interface)
    return ControlPlaneEndpoint(node_address=plane.address, load_balancer=plane.load_balancer,
                                vrrp=vrrp, **common)
