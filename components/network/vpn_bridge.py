"""The site-to-site OpenVPN bridge of the hybrid layout: an OpenVPN server on the EC2
control-plane instance, an OpenVPN client on one on-prem host (the gateway) that routes
the LAN to the VPC and back, and a persistent route to the VPC on every other on-prem host
(unless the LAN router already has it).

What the AWS side does for it: route the LAN (and the tunnel network) to the instance in
the VPC's route tables, turn the instance's source/destination check off, and open the
VPN port to the gateway's public addresses.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

import pulumi
from pulumi_command import remote
from pydantic import SecretStr

from components.network import openvpn_config, vpn_clients
from components.hosts.bootstrap import PreparedHost
from components.common.remote_step import Ssh, run_step
from components.common.certificates import IssuedCertificate
from components.common.step_text import Script
from components.network.vpn_pki import VpnPki, VpnPkiArgs
from config.cloud import VpnSettings
from config.hosts import Host
from contract import ports

INSTALL_SERVER = Script("openvpn/server.sh")
INSTALL_CLIENT = Script("openvpn/client.sh")
REMOVE_OPENVPN = Script("openvpn/remove.sh")
ROUTE_TO_VPC = Script("route-to-vpc.sh", checks=True)
REMOVE_ROUTE_TO_VPC = Script("route-to-vpc-remove.sh")


def _tunnel_end(pki: VpnPki, end: IssuedCertificate) -> dict[str, pulumi.Input[str]]:
    """What either end of the tunnel (server, gateway) holds: the CAs both trust, its own
    certificate and key, the tls-crypt key."""
    return {"OPENVPN_CA": pki.trusted_ca_pem, "OPENVPN_CERT": end.cert_pem,
            "OPENVPN_KEY": end.private_key_pem, "OPENVPN_TLS_CRYPT": pki.tls_crypt_key}


@dataclass(frozen=True, kw_only=True)
class VpnBridgeArgs:
    cluster_name: str
    vpn: VpnSettings
    # The networks the tunnel joins: the VPC's and the on-prem LAN's.
    vpc_cidr: str
    lan_cidr: str
    # The on-prem hosts (the gateway among them on server-on-ec2).
    hosts: Sequence[Host]
    server_host: Host  # the EC2 instance as a Host (name, address = private IP)
    server_ssh: Ssh
    server_public_address: pulumi.Input[str]  # the Elastic IP: the clients' `remote`
    server_ready: pulumi.Resource  # its bootstrap is done
    # On-prem host name -> the machine prepared for it (SSH, ready).
    onprem: dict[str, PreparedHost]
    # client-to-existing: the profile the instance dials the existing server with (secret).
    client_profile: Optional[SecretStr] = None
    # server-on-ec2: access.users, who get a VPN profile each; what they reach: the
    # Kubernetes API (its endpoint's address: the server's own, or with several
    # controllers their load balancer's; api_port) and vpn.userNetworks.<user>.
    users: Sequence[str] = ()
    api_address: str
    api_port: int = ports.KUBERNETES_API
    user_networks: Mapping[str, Sequence[str]] = field(default_factory=dict)

USER_NETWORKS_WARNING = (
    "vpn.userNetworks.{user}: the VPN lets user {user} reach {networks} beyond the "
    "Kubernetes API")


class VpnBridge(pulumi.ComponentResource):
    """`<server>-install-openvpn-server` -> `<gateway>-install-openvpn-client`, and
    `<host>-route-to-vpc` on the other on-prem hosts."""

    # What a worker's join must wait for: the gateway's tunnel is up, routes are in place.
    tunnel_up: list[pulumi.Resource]
    # server-on-ec2 only (None otherwise):
    admin_profile: Optional[pulumi.Output[str]]  # secret: an inline .ovpn for administrators
    server_tunnel_address: Optional[str]  # the server inside the tunnel

    def __init__(self, name: str, args: VpnBridgeArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:network:VpnBridge", name, None, opts)
        if args.vpn is None or not args.vpc_cidr:
            raise ValueError("VpnBridge needs the gpu-cluster:vpn and gpu-cluster:aws settings")
        self._args = args
        self._vpn = args.vpn
        self._hosts = {host.name: host for host in args.hosts}
        self.pki = None
        self.admin_profile = None
        self.server_tunnel_address = None
        if self._vpn.mode == "server-on-ec2":
            self._client, gateway = self._create_server_on_ec2(name)
        else:
            self._client, gateway = self._create_client_of_existing_server(), None
        self.routes: dict[str, remote.Command] = (
            {} if self._vpn.lan_router_has_route else self._create_routes(gateway))
        self.tunnel_up = [self._client, *self.routes.values()]
        self.register_outputs({
            "serverTunnelAddress": self.server_tunnel_address,
            "adminProfile": self.admin_profile,
        })

    def _create_server_on_ec2(self, name: str) -> tuple[remote.Command, Host]:
        """PKI, the server on the instance, the client on the on-prem gateway."""
        args = self._args
        missing = sorted(set(args.onprem) - set(self._hosts))
        if missing or self._vpn.onprem_gateway not in args.onprem:
            raise ValueError(f"VpnBridge: on-prem hosts {missing or []} are not configured, or "
                             f"the gateway '{self._vpn.onprem_gateway}' has no bootstrap")
        self._gateway = self._hosts[self._vpn.onprem_gateway]
        self.pki = VpnPki(f"{name}-pki", VpnPkiArgs(
            cluster_name=args.cluster_name, generation=self._vpn.pki_generation,
            previous_ca_trusted=self._vpn.previous_ca_trusted,
            users=args.users), opts=pulumi.ResourceOptions(parent=self))
        self._tunnel = openvpn_config.Tunnel(
            cidr=self._vpn.tunnel_cidr,
            port=self._vpn.port,
            protocol=self._vpn.protocol,
            mtu=self._vpn.mtu,
            server_name=self.pki.server.common_name,
        )
        self.server_tunnel_address = openvpn_config.server_tunnel_address(self._vpn.tunnel_cidr)
        public_address = pulumi.Output.from_input(args.server_public_address)
        server = self._create_server()
        client = self._create_gateway_client(server, public_address)
        self._public_address = public_address
        self.admin_profile = self._profile(self.pki.admin, "administrator")
        return client, self._gateway

    def _profile(self, certificate, holder: str) -> pulumi.Output[str]:
        pki, tunnel = self.pki, self._tunnel
        return pulumi.Output.secret(pulumi.Output.all(
            self._public_address, pki.trusted_ca_pem, certificate.cert_pem,
            certificate.private_key_pem, pki.tls_crypt_key,
        ).apply(lambda values: openvpn_config.admin_profile(tunnel, *values, holder=holder)))

    def user_profile(self, user: str) -> Optional[pulumi.Output[str]]:
        """A VPN profile (own client certificate) for a cluster user to reach the API at
        its private address; None where this bridge runs no server."""
        if self.pki is None:
            return None
        # The CN stays within X.509's 64 characters for any user name (at most 32).
        return self._profile(self.pki.users[user], f"user {user}")

    def _create_client_of_existing_server(self) -> remote.Command:
        """The instance dials the existing on-prem server with the profile it issued; that
        server routes the VPC to this client (configured there, e.g. Access Server's
        site-to-site routing for the profile's user)."""
        args = self._args
        if args.client_profile is None:
            raise ValueError("VpnBridge: client-to-existing needs the client profile "
                             "(gpu-cluster:vpnClientProfile)")
        return self._client_step(
            args.server_host.name, args.server_ssh,
            pulumi.Output.secret(args.client_profile.get_secret_value()), {},
            remote_cidr=args.lan_cidr, check_address=self._vpn.existing_server_address,
            depends_on=[args.server_ready])

    def _client_step(self, host_name: str, ssh: Ssh, config: pulumi.Input[str],
                     credentials: Mapping[str, pulumi.Input[str]], *, remote_cidr: str,
                     check_address: pulumi.Input[str],
                     depends_on: Sequence[pulumi.Resource]) -> remote.Command:
        """`<host>-install-openvpn-client`: the OpenVPN client on one end of the tunnel (the
        instance dialling an existing server, or the on-prem gateway dialling ours), routing
        `remote_cidr` through it and checking the tunnel by `check_address`; `credentials`
        are its inline CA, certificate and keys when `config` does not hold them."""
        return run_step(
            host_name,
            "install-openvpn-client",
            on=ssh,
            create=INSTALL_CLIENT,
            delete=REMOVE_OPENVPN,
            env={
                "OPENVPN_CONFIG": config,
                **credentials,
                "REMOTE_CIDR": remote_cidr,
                "TUNNEL_CHECK_ADDRESS": check_address,
                "OPENVPN_UNIT": openvpn_config.CLIENT_UNIT,
            },
            depends_on=depends_on,
            parent=self,
        )

    def tunnel_up_for(self, host_name: str) -> list[pulumi.Resource]:
        """What one on-prem host's join must wait for: the tunnel, and its own route."""
        route = self.routes.get(host_name)
        return [self._client] + ([route] if route is not None else [])

    def _clients(self) -> list[vpn_clients.Client]:
        args, pki = self._args, self.pki
        for user, networks in sorted(args.user_networks.items()):
            if networks:
                pulumi.log.warn(USER_NETWORKS_WARNING.format(
                    user=user, networks=", ".join(networks)), resource=self)
        names = {"gateway": pki.gateway.common_name, "admin": pki.admin.common_name,
                 **{f"user-{user}": cert.common_name for user, cert in pki.users.items()}}
        return vpn_clients.clients(
            self._vpn.tunnel_cidr, args.vpc_cidr, args.lan_cidr, names,
            vpn_clients.Reach(f"{args.api_address}/32", args.api_port),
            args.user_networks)

    def _create_server(self) -> remote.Command:
        args, pki = self._args, self.pki
        clients = self._clients()
        return run_step(
            args.server_host.name,
            "install-openvpn-server",
            on=args.server_ssh,
            create=INSTALL_SERVER,
            delete=REMOVE_OPENVPN,
            env={
                "OPENVPN_CONFIG": openvpn_config.server_config(
                    self._tunnel, args.vpc_cidr, args.lan_cidr),
                **_tunnel_end(pki, pki.server),
                "OPENVPN_CCD": vpn_clients.ccd_entries(clients, self._vpn.tunnel_cidr),
                "OPENVPN_CRL": pki.crl_pem,
                "OPENVPN_FILTER": vpn_clients.filter_rules(clients),
                "OPENVPN_UNIT": openvpn_config.SERVER_UNIT,
            },
            depends_on=[args.server_ready],
            parent=self,
        )

    def _create_gateway_client(self, server: remote.Command,
                               public_address: pulumi.Output[str]) -> remote.Command:
        args = self._args
        bootstrap, pki, tunnel = args.onprem[self._gateway.name], self.pki, self._tunnel
        return self._client_step(
            self._gateway.name, bootstrap.ssh,
            public_address.apply(lambda address: openvpn_config.client_config(tunnel, address)),
            _tunnel_end(pki, pki.gateway),
            remote_cidr=args.vpc_cidr, check_address=self.server_tunnel_address,
            # After the server: in a rotation the server trusts the new CA before the
            # gateway presents its new certificate (vpn_pki.py).
            depends_on=[server, bootstrap.ready])

    def _create_routes(self, gateway: "Host | None") -> dict[str, remote.Command]:
        """Every on-prem host but the gateway routes the VPC via the gateway (our client,
        or the existing server)."""
        gateway_address = gateway.address if gateway else self._vpn.existing_server_address
        routes = {}
        for name, bootstrap in self._args.onprem.items():
            if gateway is not None and name == gateway.name:
                continue
            host = self._hosts[name]
            routes[name] = run_step(
                host.name,
                "route-to-vpc",
                on=bootstrap.ssh,
                create=ROUTE_TO_VPC,
                delete=REMOVE_ROUTE_TO_VPC,
                env={
                    "VPC_CIDR": self._args.vpc_cidr,
                    "GATEWAY_ADDRESS": gateway_address,
                    # Replies to the VPN server and to administrators' VPN clients (our
                    # tunnel only; an existing server routes its own clients).
                    "TUNNEL_CIDR": self._vpn.tunnel_cidr if gateway else "",
                },
                depends_on=[bootstrap.ready],
                parent=self,
            )
        return routes
