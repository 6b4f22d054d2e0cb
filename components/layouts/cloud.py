"""cloud: the control plane on EC2 and GPU workers in EC2 pools, all installing themselves
at boot; the program runs no command on any machine but the controllers' upgrades over
SSH and, with several controllers, what their joins need on the first (a token, the new
etcd member's health). The controllers after the first start one at a time, as the
control plane launches them; the pools join once it is up (`self_joining`)."""

from collections.abc import Sequence
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.aws import ssm_paths
from components.aws.control_plane_host import ControlPlaneHost
from components.aws.efs import EfsFileSystem
from components.common.remote_step import Ssh, SshAccess, connection_to
from components.hosts.bundle_step import with_bundle
from components.kubernetes.control_plane import ControlPlane
from components.layouts.aws import AwsSide, OnAws
from components.layouts.aws_pools import ec2_pools, pools_outputs
from components.layouts.contract import (
    BootedController,
    Controller,
    LayoutResult,
    SelfJoining,
    Services,
    frozen_mapping,
)


class Cloud(OnAws):
    boots_itself = True
    # What self_joining builds on, kept from result().
    _aws: AwsSide
    _efs_system: Optional[EfsFileSystem]

    def result(self) -> LayoutResult:
        self._aws = aws_side = self._aws_side()
        instance, settings = aws_side.instance, self.context.settings
        self._efs_system = efs = self._efs(aws_side)
        balancer = aws_side.balancer
        return LayoutResult(
            controller=Controller(host=instance.host, booted=self._booted(instance),
                                  public_address=self._public_address(aws_side)),
            joining=tuple(Controller(host=other.host, launch=self._launcher(index + 1, other))
                          for index, other in enumerate(aws_side.others)),
            endpoint=settings.control_plane_endpoint,
            endpoint_names=(balancer.dns_name,) if balancer is not None else (),
            workers=(),
            services=Services(
                storage_servers=tuple(efs.mount_targets if efs is not None else ()),
                efs=self._efs_service(efs), aws_opts=aws_side.opts),
            outputs=frozen_mapping(self._outputs(
                aws_side, [controller.host for controller in aws_side.controllers], {})))

    def _booted(self, controller: ControlPlaneHost) -> BootedController:
        """A launched controller, and SSH to it: its public address, its port and the host
        key it installs at boot, as on hybrid (aws.adminCidrs opens SSH to where `pulumi
        up` runs)."""
        settings = self.context.settings
        ssh = with_bundle(controller.host.name, Ssh(connection_to(controller.host, SshAccess(
            settings.ssh, settings.ssh_private_key, settings.bastion_private_key),
            controller.ssh_endpoint), controller.host.ssh_user), 0,
            depends_on=[controller.instance], parent=controller)
        return BootedController(instance=controller.instance, ssh=ssh)

    def _launcher(self, index: int, controller: ControlPlaneHost):
        """How the control plane launches a controller that joins at boot: its instance,
        once `after`, its join token (if any) stored for its boot; then in the load
        balancer's target groups."""
        def launch(after: Sequence[pulumi.Resource],
                   join_token: Optional[pulumi.Output[str]]) -> BootedController:
            instance = controller.launch(after, {ssm_paths.CONTROLLER_JOIN_TOKEN: join_token}
                                         if join_token is not None else {})
            for entrance in (self._aws.balancer, self._aws.public_balancer):
                entrance.attach(index, instance)
            return self._booted(controller)
        return launch

    def self_joining(self, control_plane: ControlPlane, provider: k8s.Provider,
                     result: LayoutResult) -> SelfJoining:
        """The EC2 pools (components/layouts/aws_pools.py) and the cloud controller; the
        pools' roles may mount EFS."""
        settings = self.context.settings
        self._cloud_controller(provider)
        pools = ec2_pools(self.context, self._aws, control_plane)
        if self._efs_system is not None:
            # The pools' roles: the nodes that mount it, and where the CSI driver's
            # controller runs (components/addons/efs_csi.py).
            self._efs_system.allow_nodes([p.role_arn for p in pools])
            self._efs_system.allow_provisioner(
                {pool.name: p.role_name for pool, p in zip(settings.pools, pools)},
                settings.cluster_name)
        return SelfJoining(nodes=tuple(pool.group for pool in pools),
                           outputs=pools_outputs(settings, pools, result) or frozen_mapping({}))
