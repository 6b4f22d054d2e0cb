"""hybrid: the control plane (and the VPN server) on EC2, prepared over SSH at its public
address; on-prem GPU hosts, prepared over SSH, join through OpenVPN."""

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.addons import efs_csi
from components.aws.service_account_issuer import ServiceAccountIssuer
from components.common.remote_step import Ssh
from components.hosts.bootstrap import PreparedHost
from components.kubernetes.control_plane import ControlPlane
from components.network.vpn_bridge import VpnBridge, VpnBridgeArgs
from components.layouts.aws import OnAws
from components.layouts.aws_pools import ec2_pools, pools_outputs
from components.layouts.contract import (
    Controller,
    EfsWebIdentity,
    LayoutResult,
    Services,
    SelfJoining,
    frozen_mapping,
)
from components.layouts.over_ssh import bootstrap, prepared_workers, storage_servers
from config.hosts import Host
from config.model import StackConfig
from config.storage import service_account_issuer
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
        api_address=settings.control_plane_endpoint.node_address,
        api_port=settings.kubernetes.api_port,
        user_networks=settings.vpn.user_networks if settings.vpn else {},
    )


class Hybrid(OnAws):
    # The public service-account issuer (storage.efs.issuerBucket), once result() ran.
    issuer: Optional[ServiceAccountIssuer] = None

    def result(self) -> LayoutResult:
        settings, context = self.context.settings, self.context
        aws_side = self._aws_side()
        instance = aws_side.instance
        controller = instance.host
        endpoint = settings.control_plane_endpoint
        controllers = [ec2.host for ec2 in aws_side.controllers]
        bootstraps = {ec2.host.name: bootstrap(context, ec2.host, endpoint.node_address,
                                               endpoint=ec2.ssh_endpoint)
                      for ec2 in aws_side.controllers}
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
            # On-prem nodes have no instance role: the controller's is named and, with
            # storage.efs.issuerBucket, the role their EFS CSI driver gets from its
            # service account's token.
            self.issuer = self._service_account_issuer(aws_side)
            efs.allow_nodes([ec2.role_arn for ec2 in aws_side.controllers],
                            [self.issuer.role.arn] if self.issuer else [])
            if self.issuer is not None:
                efs.allow_provisioner({"on-prem": self.issuer.controller_role.name},
                                      settings.cluster_name)
        on_prem = next((h.address for h in settings.hosts if h.name == settings.vpn.onprem_gateway),
                       settings.vpn.existing_server_address)
        return LayoutResult(
            controller=Controller(host=controller, prepared=bootstraps[controller.name].prepared,
                                  public_address=self._public_address(aws_side)),
            joining=tuple(Controller(host=host, prepared=bootstraps[host.name].prepared)
                          for host in controllers[1:]),
            endpoint=endpoint,
            endpoint_names=((aws_side.balancer.dns_name,) if aws_side.balancer else ()),
            workers=prepared_workers(
                settings, controllers, bootstraps,
                {h.name: vpn.tunnel_up_for(h.name) for h in settings.hosts}),
            services=Services(
                storage_servers=(storage_servers(bootstraps)
                                 + tuple(efs.mount_targets if efs is not None else ())),
                efs=self._efs_service(efs, self._web_identity(efs)), backup=self._backup_over_ssh(aws_side),
                users_on_private_network=True, user_vpn_profile=vpn.user_profile,
                aws_opts=aws_side.opts),
            outputs=frozen_mapping({
                **self._outputs(aws_side, [*controllers, *settings.hosts],
                                {names.ON_PREM_GATEWAY: on_prem}),
                names.ADMIN_VPN_PROFILE_OUTPUT: vpn.admin_profile}))

    def _web_identity(self, efs) -> Optional[EfsWebIdentity]:
        if efs is None or self.issuer is None:
            return None
        return EfsWebIdentity(node_role_arn=self.issuer.role.arn,
                              controller_role_arn=self.issuer.controller_role.arn,
                              region=self.context.settings.aws.region,
                              mount_target_ip=efs.address)

    def _service_account_issuer(self, aws_side) -> Optional[ServiceAccountIssuer]:
        settings = self.context.settings
        issuer = service_account_issuer(settings.storage.efs, settings.layout,
                                        settings.aws.region)
        if issuer is None:
            return None
        return ServiceAccountIssuer(
            f"{self.context.name}-sa-issuer", settings.storage.efs.issuer_bucket, issuer,
            efs_csi.NAMESPACE, efs_csi.NODE_SERVICE_ACCOUNT, efs_csi.CONTROLLER_SERVICE_ACCOUNT,
            opts=aws_side.opts)

    def self_joining(self, control_plane: ControlPlane, provider: k8s.Provider,
                     result: LayoutResult) -> SelfJoining:
        """The EC2 pools, as on cloud (components/layouts/aws_pools.py): in the VPC, they
        reach the on-prem nodes through the VPC's routes to the VPN server, and mount
        storage as the on-prem nodes do (docs/layouts.md, "Pools on hybrid"). The issuer's
        key set comes from the key the installed controller signs tokens with. The AWS
        cloud controller manager, where it runs, for the controllers and the pools (the
        on-prem nodes keep the kubelet's default: no cloud provider)."""
        self._cloud_controller(provider)
        pools = ec2_pools(self.context, self._aws, control_plane)
        if self.issuer is not None:
            self.issuer.publish_keys(control_plane.service_account_key())
        outputs = pools_outputs(self.context.settings, pools, result)
        if outputs is None:
            return SelfJoining()
        return SelfJoining(nodes=tuple(pool.group for pool in pools), outputs=outputs)
