"""The layouts on AWS, hybrid and cloud (components/layouts.py says what each is); kept
apart so that only a stack using AWS imports the AWS SDK (components/layouts.py
layout_class)."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.backup_bucket import BackupBucket, BackupBucketArgs
from components.aws.boot import BootStore
from components.aws.control_plane_host import (
    CONTROLLER_MACHINE,
    ControllerBoot,
    ControlPlaneHost,
    ControlPlaneHostArgs,
)
from components.aws import ssm_paths
from components.aws.network import AwsNetwork, AwsNetworkArgs
from components.aws.tags import default_tags
from components.kubernetes.control_plane import ControlPlane
from components.distributions.base import Distribution
from components.aws.efs import EfsFileSystem, EfsFileSystemArgs
from components.aws.service_account_issuer import ServiceAccountIssuer
from components.addons import efs_csi
from components.aws.gpu_worker_pool import (
    GpuWorkerPool,
    GpuWorkerPoolArgs,
    PoolBoot,
    pool_machine,
)
from components.kubernetes.backups import (
    BackupTarget,
    backup_boot_step,
    check_envelope_fits,
    envelope_chunks,
    install_backup_env,
)
from components.hosts.bundle_step import with_bundle
from components.hosts.steps import preparation_steps
from components.aws.pool_node_cleanup import PoolNodeCleanup, PoolNodeCleanupArgs
from components.common.remote_step import Ssh, SshAccess, connection_to
from components.network.vpn_bridge import VpnBridge, VpnBridgeArgs
from components.network.vpn_clients import gateway_address
from config.backup import backup_store
from config.cloud import cluster_cidrs, node_cidrs
from config.model import StackConfig
from config.storage import efs_mounts_with_iam, service_account_issuer
from config.types import public_key_of
from components.layouts import Layout, Machines, machines_of, registries_env


def pool_boots(settings: StackConfig, distribution: Distribution) -> list[PoolBoot]:
    """What each pool's instances run at boot, worked out once from the whole stack."""
    if settings.aws is None:
        return []
    return [PoolBoot(settings.cluster_name, settings.aws.region, pool,
                     tuple(preparation_steps(settings.tuning, settings.nvidia, distribution,
                                           pool_machine(pool), registries=registries_env(
                                               settings, distribution, _boot_password(
                                                   settings, ssm_paths.pool_secret(
                                                       settings.cluster_name, pool.name,
                                                       ssm_paths.IMAGE_MIRROR_PASSWORD))))),
                     registry_password=_mirror_password(settings))
            for pool in settings.pools]



def _mirror_password(settings: StackConfig) -> Optional[pulumi.Output[str]]:
    mirror = settings.image_mirror
    if mirror is None or not mirror.username or settings.image_mirror_password is None:
        return None
    return pulumi.Output.secret(settings.image_mirror_password.get_secret_value())


def _boot_password(settings: StackConfig, parameter: str) -> dict:
    return ({"REGISTRY_PASSWORD_SSM_PARAMETER": parameter}
            if _mirror_password(settings) is not None else {})


@dataclass
class _AwsControlPlane:
    network: AwsNetwork
    instance: ControlPlaneHost
    opts: pulumi.ResourceOptions
    boot_store: BootStore
    backup_bucket: Optional[BackupBucket] = None


class _OnAws(Layout):
    """The AWS side both AWS layouts share: provider, VPC, the control-plane instance and
    the EFS file system."""

    boots_itself = False
    efs: Optional[EfsFileSystem] = None

    def _aws_control_plane(self) -> _AwsControlPlane:
        context, settings = self.context, self.context.settings
        self.default_tags = default_tags(settings.cluster_name, settings.aws.tags)
        # Changing default_tags updates the provider in place and re-tags its resources:
        # pulumi-aws forces a provider replacement only for `region` (ForcesProviderReplace
        # in provider/resources.go), which pulumi-terraform-bridge's DiffConfig honours
        # (pkg/tfbridge/provider.go, configDiffer.DiffConfig).
        provider = aws.Provider(f"{context.name}-aws", region=settings.aws.region,
                                default_tags=aws.ProviderDefaultTagsArgs(tags=self.default_tags),
                                opts=pulumi.ResourceOptions(parent=context.parent))
        opts = pulumi.ResourceOptions(parent=context.parent, providers=[provider])
        network = AwsNetwork(f"{context.name}-network",
                             AwsNetworkArgs(settings.aws, settings.cluster_name,
                                            node_security_group=self.boots_itself,
                                            node_ports=context.distribution.node_ports),
                             opts=opts)
        backup = settings.backup
        bucket = (BackupBucket(f"{context.name}-backups", BackupBucketArgs(
            settings.cluster_name, backup.retention, settings.aws.region, backup.lock_days,
            tuple(backup.restore_principals)), opts=opts)
            if backup_store(settings.layout, settings.backup, None, None) else None)
        password = _mirror_password(settings)
        boot = (ControllerBoot(context.distribution, context.pki,
                               tuple(preparation_steps(
                                   settings.tuning, settings.nvidia, context.distribution,
                                   CONTROLLER_MACHINE, registries=registries_env(
                                       settings, context.distribution, _boot_password(
                                           settings, ssm_paths.control_plane_secret(
                                               settings.cluster_name, ssm_paths.IMAGE_MIRROR_PASSWORD))))),
                               context.secrets,
                               stored={ssm_paths.IMAGE_MIRROR_PASSWORD: password} if password is not None else {})
                if self.boots_itself else None)
        if boot is not None and bucket is not None:
            self._install_backup_at_boot(boot, bucket)
        self.cluster_cidrs = cluster_cidrs(settings.aws.vpc, settings.network.lan_cidr,
                                           settings.vpn)
        boot_store = BootStore(f"{context.name}-boot", settings.cluster_name, opts=opts)
        instance = ControlPlaneHost(
            f"{context.name}-control-plane-host",
            ControlPlaneHostArgs(
                cluster_name=settings.cluster_name, aws=settings.aws, network=network,
                ssh_public_key=public_key_of(settings.ssh_private_key.get_secret_value()),
                api_port=settings.kubernetes.api_port,
                control_plane_ports=context.distribution.control_plane_ports,
                cluster_cidrs=self.cluster_cidrs,
                node_cidrs=node_cidrs(settings.aws.vpc, [h.address for h in settings.hosts]),
                boot_store=boot_store, vpn=settings.vpn,
                lan_cidr=settings.network.lan_cidr, boot=boot,
                secrets_key=bucket.key.arn if bucket is not None else None),
            opts=opts)
        if bucket is not None:
            bucket.allow_writes_by(f"{context.name}-backup-writer", instance.role_name,
                                   settings.cluster_name, opts)
        return _AwsControlPlane(network, instance, opts, boot_store, bucket)

    def _backup_target(self, bucket: BackupBucket) -> BackupTarget:
        return BackupTarget("s3", bucket.location, {
            "BACKUP_BUCKET": bucket.bucket.bucket, "BACKUP_OBJECT": bucket.object_key,
            "AWS_REGION": self.context.settings.aws.region})

    def _install_backup_at_boot(self, boot: ControllerBoot, bucket: BackupBucket) -> None:
        """install-backup among the controller's boot steps, its envelope in SSM."""
        context, settings = self.context, self.context.settings
        host = settings.aws.control_plane.name
        target = self._backup_target(bucket)
        env = install_backup_env(context.distribution, settings.backup, settings.cluster_name,
                                 target)
        # A bucket's name is at most 63 characters (the only value not known yet).
        check_envelope_fits(host, {**env, "BACKUP_BUCKET": "b" * 63})
        chunks = envelope_chunks(host, env)
        names = [f"backup-step-{index}" for index in range(len(chunks))]
        boot.stored = {**boot.stored, **dict(zip(names, chunks))}
        boot.after_install = (backup_boot_step(
            [ssm_paths.control_plane_secret(settings.cluster_name, name) for name in names],
            settings.aws.region),)

    def _machines(self, aws_side: _AwsControlPlane, **fields) -> Machines:
        settings, instance = self.context.settings, aws_side.instance
        machines = Machines(
            public_address=(instance.public_ip if settings.aws.control_plane.elastic_ip
                            else None),
            gateways={"aws": instance.public_ip},
            images={"controlPlane": instance.image},
            control_plane_ssh_host_key=instance.ssh_host_public_key,
            aws_opts=aws_side.opts,
            **fields)
        if aws_side.backup_bucket is not None:
            machines.backup_location = aws_side.backup_bucket.location
            if not self.boots_itself:
                machines.backup = self._backup_target(aws_side.backup_bucket)
        if settings.storage.efs is not None:
            # Its nodes: the controller, the on-prem hosts (hybrid: from their LAN
            # addresses, routed through the tunnel unchanged; the gateway's own packets from
            # its fixed tunnel address), the pools (cloud).
            gateway = ([gateway_address(settings.vpn.tunnel_cidr)]
                       if settings.vpn is not None and settings.vpn.mode == "server-on-ec2"
                       else [])
            # The controller mounts EFS where it is a node's gateway to it (hybrid); on the
            # cloud layout it runs no kubelet and the pools are the nodes.
            with_iam = efs_mounts_with_iam(settings.layout)
            controller = [] if with_iam else [aws_side.instance.private_ip]
            self.efs = EfsFileSystem(f"{self.context.name}-efs", EfsFileSystemArgs(
                settings.cluster_name, settings.storage.efs, settings.aws.vpc,
                aws_side.network,
                controller + [h.address for h in settings.hosts] + gateway,
                by_address=settings.layout == "hybrid",
                node_security_group=aws_side.network.node_security_group),
                opts=aws_side.opts)
            machines.efs_address = self.efs.address
            if with_iam:
                machines.efs_file_system_id = self.efs.file_system.id
            machines.efs_mount_target_addresses = [target.ip_address
                                                   for target in self.efs.mount_targets]
            machines.storage_servers += self.efs.mount_targets
        return machines


class Hybrid(_OnAws):
    # The public service-account issuer (storage.efs.issuerBucket), once machines() ran.
    issuer: "ServiceAccountIssuer | None" = None

    def machines(self) -> Machines:
        settings, context = self.context.settings, self.context
        aws_side = self._aws_control_plane()
        instance = aws_side.instance
        controller = instance.host
        bootstraps = {controller.name: self._bootstrap(controller, instance.private_ip,
                                                       endpoint=instance.ssh_endpoint)}
        # On-prem hosts reach the control plane only once the tunnel is up.
        bootstraps.update({h.name: self._bootstrap(h, "", controller=bootstraps[controller.name])
                           for h in settings.hosts})
        vpn = VpnBridge(f"{context.name}-vpn", VpnBridgeArgs(
            cluster_name=settings.cluster_name,
            vpn=settings.vpn,
            vpc_cidr=settings.aws.vpc.cidr,
            lan_cidr=settings.network.lan_cidr,
            hosts=settings.hosts,
            server_host=controller,
            server_ssh=bootstraps[controller.name].ssh,
            server_public_address=instance.public_ip,
            server_ready=bootstraps[controller.name].ready,
            onprem={h.name: bootstraps[h.name].machine for h in settings.hosts},
            client_profile=settings.vpn_client_profile,
            users=[user.name for user in settings.access.users],
            api_port=settings.kubernetes.api_port,
            user_networks=settings.vpn.user_networks if settings.vpn else {},
        ), opts=pulumi.ResourceOptions(parent=context.parent))
        machines = self._machines(
            aws_side, controller=controller, prepared=machines_of(bootstraps),
            hosts=[controller, *settings.hosts],
            storage_servers=[b.nfs_server for b in bootstraps.values() if b.nfs_server],
            join_after={h.name: vpn.tunnel_up_for(h.name) for h in settings.hosts},
            users_on_private_network=True, vpn=vpn)
        if self.efs is not None:
            # On-prem nodes have no IAM role: only the controller's can be named; with
            # storage.efs.issuerBucket, the role their EFS CSI driver gets from its
            # service account's token mounts and writes.
            self.issuer = self._service_account_issuer(aws_side)
            self.efs.allow_nodes([aws_side.instance.role_arn],
                                 [self.issuer.role.arn] if self.issuer else [])
        machines.gateways["onPrem"] = next(
            (h.address for h in settings.hosts if h.name == settings.vpn.onprem_gateway),
            settings.vpn.existing_server_address)
        return machines


    def _service_account_issuer(self, aws_side) -> "ServiceAccountIssuer | None":
        settings = self.context.settings
        issuer = service_account_issuer(settings.storage.efs, settings.layout,
                                        settings.aws.region)
        if issuer is None:
            return None
        return ServiceAccountIssuer(
            f"{self.context.name}-sa-issuer", settings.storage.efs.issuer_bucket, issuer,
            efs_csi.NAMESPACE, efs_csi.NODE_SERVICE_ACCOUNT, opts=aws_side.opts)

    def nodes_after(self, control_plane: ControlPlane, provider: k8s.Provider,
                    machines: Machines) -> list[pulumi.Resource]:
        """No nodes join on their own; the issuer's key set, from the key the installed
        controller signs tokens with."""
        if self.issuer is not None:
            self.issuer.publish_keys(control_plane.service_account_key())
        return []


class Cloud(_OnAws):
    boots_itself = True

    def machines(self) -> Machines:
        self._aws = self._aws_control_plane()
        instance, settings = self._aws.instance, self.context.settings
        # The instance's public address, its port and the host key it installs at boot,
        # as on hybrid (aws.adminCidrs opens SSH to where `pulumi up` runs).
        ssh = with_bundle(instance.host.name, Ssh(connection_to(instance.host, SshAccess(
            settings.ssh, settings.ssh_private_key, settings.bastion_private_key),
            instance.ssh_endpoint), instance.host.ssh_user), 0,
            depends_on=[instance.instance], parent=instance)
        return self._machines(self._aws, controller=instance.host, prepared={},
                              hosts=[instance.host], storage_servers=[],
                              booted=instance.instance, booted_ssh=ssh)

    def nodes_after(self, control_plane: ControlPlane, provider: k8s.Provider,
                    machines: Machines) -> list[pulumi.Resource]:
        """The EC2 pools, whose instances join at boot with the token the controller keeps
        in SSM, and the controller's services that rotate those tokens and remove the node
        of an instance a pool let go."""
        context, settings = self.context, self.context.settings
        pools = [
            GpuWorkerPool(f"{context.name}-{boot.pool.name}", GpuWorkerPoolArgs(
                boot, self._aws.network, context.distribution,
                self._aws.network.node_security_group, self._aws.boot_store,
                self.default_tags, after=[control_plane.installed]),
                opts=self._aws.opts)
            for boot in pool_boots(settings, context.distribution)
        ]
        if pools:
            cleanup = PoolNodeCleanup(f"{context.name}-node-cleanup", PoolNodeCleanupArgs(
                settings.cluster_name, settings.aws.region, context.pki,
                control_plane.node_endpoint, provider, context.distribution,
                control_plane.host.name, control_plane.ssh, self._aws.instance.role_name,
                after=[control_plane.installed]), opts=self._aws.opts)
            started = cleanup.start([p.token_parameter for p in pools])
            for pool in pools:
                pool.launch(after=[started])
        if self.efs is not None:
            # The pools' roles: the nodes that mount it, and where the CSI driver's
            # controller runs (components/addons/efs_csi.py).
            self.efs.allow_nodes([p.role_arn for p in pools])
            self.efs.allow_provisioner(
                {pool.name: p.role_name for pool, p in zip(settings.pools, pools)},
                settings.cluster_name)
        machines.images.update({pool.name: p.image for pool, p in zip(settings.pools, pools)})
        self.pools = [{"name": p.name, "instanceType": p.instance_type, "count": p.count,
                       "gpus": p.gpus, "gpuModel": p.gpu_model} for p in settings.pools]
        return [pool.group for pool in pools]
