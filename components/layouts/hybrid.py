"""hybrid: the control plane (and the VPN server) on EC2, prepared over SSH at its public
address; on-prem GPU hosts, prepared over SSH, join through OpenVPN."""

import pulumi

from components.common.remote_step import Ssh
from components.hosts.bootstrap import PreparedHost
from components.network.vpn_bridge import VpnBridge, VpnBridgeArgs
from components.layouts.aws import OnAws
from components.layouts.contract import (
    Controller,
    LayoutResult,
    Services,
    frozen_mapping,
)
from components.layouts.over_ssh import bootstrap, prepared_workers, storage_servers
from config.model import Host, StackConfig
from contract import names


def vpn_bridge_args(settings: StackConfig, *, server_host: Host, server_ssh: Ssh,
                    server_public_address: pulumi.Input[str], server_ready: pulumi.Resource,
                    onprem: dict[str, PreparedHost]) -> VpnBridgeArgs:
    """The bridge between the VPC and the LAN: what the stack's config says of it, and the
    machines it runs on."""
    return VpnBridgeArgs(
        cluster_name=settings.cluster_name,
        vpn=settings.vpn,
        vpc_cidr=settings.aws.vpc.cidr,
        lan_cidr=settings.network.lan_cidr,
        hosts=settings.hosts,
        server_host=server_host,
        server_ssh=server_ssh,
        server_public_address=server_public_address,
        server_ready=server_ready,
        onprem=onprem,
        client_profile=settings.vpn_client_profile,
        users=[user.name for user in settings.access.users],
        api_port=settings.kubernetes.api_port,
        user_networks=settings.vpn.user_networks if settings.vpn else {},
    )


class Hybrid(OnAws):
    def result(self) -> LayoutResult:
        settings, context = self.context.settings, self.context
        aws_side = self._aws_side()
        instance = aws_side.instance
        controller = instance.host
        bootstraps = {controller.name: bootstrap(context, controller, instance.private_ip,
                                                 endpoint=instance.ssh_endpoint)}
        # On-prem hosts reach the control plane only once the tunnel is up.
        bootstraps.update({h.name: bootstrap(context, h, "",
                                             controller=bootstraps[controller.name])
                           for h in settings.hosts})
        vpn = VpnBridge(f"{context.name}-vpn", vpn_bridge_args(
            settings,
            server_host=controller,
            server_ssh=bootstraps[controller.name].ssh,
            server_public_address=instance.public_ip,
            server_ready=bootstraps[controller.name].ready,
            onprem={h.name: bootstraps[h.name].prepared for h in settings.hosts},
        ), opts=pulumi.ResourceOptions(parent=context.parent))
        efs = self._efs(aws_side)
        if efs is not None:
            # On-prem nodes have no IAM role: only the controller's can be named.
            efs.allow_nodes([instance.role_arn])
        on_prem = next((h.address for h in settings.hosts if h.name == settings.vpn.onprem_gateway),
                       settings.vpn.existing_server_address)
        return LayoutResult(
            controller=Controller(host=controller, prepared=bootstraps[controller.name].prepared,
                                  public_address=self._public_address(aws_side)),
            workers=prepared_workers(
                settings, controller, bootstraps,
                {h.name: vpn.tunnel_up_for(h.name) for h in settings.hosts}),
            services=Services(
                storage_servers=(storage_servers(bootstraps)
                                 + tuple(efs.mount_targets if efs is not None else ())),
                efs=self._efs_service(efs), backup=self._backup_over_ssh(aws_side),
                users_on_private_network=True, user_vpn_profile=vpn.user_profile,
                aws_opts=aws_side.opts),
            outputs=frozen_mapping({
                **self._outputs(aws_side, [controller, *settings.hosts],
                                {names.ON_PREM_GATEWAY: on_prem}),
                names.ADMIN_VPN_PROFILE_OUTPUT: vpn.admin_profile}))
