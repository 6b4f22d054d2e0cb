"""The AWS side both AWS layouts share (components/layouts/__init__.py says what each is):
the provider, the VPC, the control-plane instance, its backup bucket and the EFS file
system. Only a stack using AWS imports it, and with it the AWS SDK."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.backup_bucket import (
    SNAPSHOT_OBJECT,
    BackupBucket,
    BackupBucketArgs,
    backup_prefix,
)
from components.aws.api_load_balancer import ApiLoadBalancer, ApiLoadBalancerArgs
from components.aws.boot import BootStore
from components.aws.cloud_controller import CloudController, CloudControllerArgs
from components.aws.control_plane_host import (
    CONTROLLER_MACHINE,
    ControllerBoot,
    ControlPlaneHost,
    ControlPlaneHostArgs,
    ec2_controllers,
)
from components.aws.controller_groups import controller_peers_group
from components.aws import ssm_paths
from components.aws.network import AwsNetwork, AwsNetworkArgs
from components.aws.tags import default_tags
from components.aws.efs import EfsFileSystem, EfsFileSystemArgs
from components.kubernetes.backups import (
    BackupTarget,
    backup_turn_env,
    install_backup_step,
    install_backup_env,
)
from components.hosts.steps import preparation_steps
from components.network.vpn_clients import gateway_address
from components.layouts.contract import Efs, EfsWebIdentity, Layout
from components.layouts.over_ssh import node_outputs, registries_env
from config.backup import backup_store
from config.cloud import api_load_balancer_addresses, cluster_cidrs, node_cidrs
from config.hosts import Host
from config.model import StackConfig
from config.storage import efs_mounts_with_iam
from config.types import public_key_of
from contract import names


def mirror_password(settings: StackConfig) -> Optional[pulumi.Output[str]]:
    mirror = settings.image_mirror
    if mirror is None or not mirror.username or settings.image_mirror_password is None:
        return None
    return pulumi.Output.secret(settings.image_mirror_password.get_secret_value())


def boot_password(settings: StackConfig, parameter: str) -> dict:
    return ({"REGISTRY_PASSWORD_SSM_PARAMETER": parameter}
            if mirror_password(settings) is not None else {})


def s3_backup_target(settings: StackConfig, bucket: pulumi.Input[str],
                     location: pulumi.Input[str]) -> BackupTarget:
    return BackupTarget("s3", location, {
        "BACKUP_BUCKET": bucket,
        "BACKUP_OBJECT": f"{backup_prefix(settings.cluster_name)}/{SNAPSHOT_OBJECT}",
        "AWS_REGION": settings.aws.region})


def pools_from_onprem(settings: StackConfig, distribution) -> dict:
    """Hybrid with pools: what the pools' security group admits from on-prem
    (AwsNetworkArgs): a worker's node ports (the host firewall's list,
    components/hosts/firewall.py) from the on-prem nodes' addresses and the VPN gateway's
    tunnel address, with the CNI's overlay between subnets where it is no port
    (Distribution.overlay_between_subnets), and the VPN server's "fragmentation
    needed"."""
    if settings.layout != "hybrid" or not settings.pools:
        return {}
    workers = [host for host in settings.hosts if host.runs_workloads]
    ports = {**(distribution.host_firewall_ports(workers[0]) if workers else {}),
             **distribution.overlay_between_subnets}
    sources = [f"{host.address}/32" for host in settings.hosts]
    if settings.vpn is not None and settings.vpn.mode == "server-on-ec2":
        sources.append(f"{gateway_address(settings.vpn.tunnel_cidr)}/32")
    # The first controller runs the VPN (server or client) and forwards into the tunnel.
    server = [f"{settings.control_plane_endpoint.controller_addresses[0]}/32"]
    return {"onprem_sources": sources, "onprem_ports": ports, "path_mtu_sources": server}


@dataclass(frozen=True)
class AwsSide:
    """What the AWS layouts build on: the VPC, the control-plane instance, the options of
    resources on AWS (its provider), the boot bucket, the backup bucket, the provider's
    default tags; with several controllers, the others and their load balancers."""

    network: AwsNetwork
    instance: ControlPlaneHost
    opts: pulumi.ResourceOptions
    boot_store: BootStore
    backup_bucket: Optional[BackupBucket]
    default_tags: dict
    others: tuple[ControlPlaneHost, ...] = ()
    balancer: Optional[ApiLoadBalancer] = None
    # With several controllers, the way in from aws.adminCidrs (ApiLoadBalancer.public).
    public_balancer: Optional[ApiLoadBalancer] = None

    @property
    def controllers(self) -> tuple[ControlPlaneHost, ...]:
        return (self.instance, *self.others)


class OnAws(Layout):
    """The AWS side both AWS layouts share."""

    boots_itself = False

    def _aws_side(self) -> AwsSide:
        context, settings = self.context, self.context.settings
        tags = default_tags(settings.cluster_name, settings.aws.tags)
        # Changing default_tags updates the provider in place and re-tags its resources:
        # pulumi-aws forces a provider replacement only for `region` (ForcesProviderReplace
        # in provider/resources.go), which pulumi-terraform-bridge's DiffConfig honours
        # (pkg/tfbridge/provider.go, configDiffer.DiffConfig).
        provider = aws.Provider(f"{context.name}-aws", region=settings.aws.region,
                                default_tags=aws.ProviderDefaultTagsArgs(tags=tags),
                                opts=pulumi.ResourceOptions(parent=context.parent))
        opts = pulumi.ResourceOptions(parent=context.parent, providers=[provider])
        network = AwsNetwork(f"{context.name}-network", AwsNetworkArgs(
            settings=settings.aws, cluster_name=settings.cluster_name,
            node_security_group=self.boots_itself or bool(settings.pools),
            node_ports=context.distribution.node_ports,
            node_port_sources=[f"{address}/32" for address in
                               settings.control_plane_endpoint.controller_addresses],
            **pools_from_onprem(settings, context.distribution)), opts=opts)
        backup = settings.backup
        bucket = (BackupBucket(f"{context.name}-backups", BackupBucketArgs(
            cluster_name=settings.cluster_name, retention=backup.retention,
            region=settings.aws.region, lock_days=backup.lock_days,
            restore_principals=tuple(backup.restore_principals)), opts=opts)
            if backup_store(settings.layout, settings.backup, None, None) else None)
        password = mirror_password(settings)
        boot = (ControllerBoot(context.distribution, context.pki,
                               tuple(preparation_steps(
                                   context.host_settings, context.distribution,
                                   CONTROLLER_MACHINE, registries=registries_env(
                                       settings, context.distribution, boot_password(
                                           settings, ssm_paths.control_plane_secret(
                                               settings.cluster_name,
                                               ssm_paths.IMAGE_MIRROR_PASSWORD))))),
                               context.secrets,
                               stored={ssm_paths.IMAGE_MIRROR_PASSWORD: password} if password is not None else {})
                if self.boots_itself else None)
        boot_store = BootStore(f"{context.name}-boot", settings.cluster_name, opts=opts)
        endpoint = settings.control_plane_endpoint
        replicas = endpoint.replicas
        sources = cluster_cidrs(settings.aws.vpc, settings.network.lan_cidr, settings.vpn)
        nodes = node_cidrs(settings.aws.vpc, [h.address for h in settings.hosts],
                           bool(settings.pools))
        balancer = (self._balancer(network, sources, nodes, opts) if replicas > 1 else None)
        # `pulumi up` and the admin kubeconfig (on cloud, the users too) come from
        # aws.adminCidrs over the internet.
        public = self._public_balancer(network, opts) if balancer is not None else None
        hosts = ec2_controllers(settings.aws, replicas)
        if boot is not None and bucket is not None:
            self._install_backup_at_boot(boot, bucket, hosts)
        peers = (controller_peers_group(
            f"{context.name}-controllers", network.vpc_id, settings.cluster_name,
            context.distribution.host_firewall_ports(hosts[0]), opts)
            if replicas > 1 else None)
        controllers: list[ControlPlaneHost] = []
        for index, host in enumerate(hosts):
            first = controllers[0] if controllers else None
            controllers.append(ControlPlaneHost(
                f"{context.name}-control-plane-host" + (f"-{index + 1}" if index else ""),
                ControlPlaneHostArgs(
                    host=host, cluster_name=settings.cluster_name, aws=settings.aws,
                    network=network,
                    ssh_public_key=public_key_of(settings.ssh_private_key.get_secret_value()),
                    api_port=settings.kubernetes.api_port,
                    control_plane_ports=context.distribution.control_plane_ports,
                    cluster_cidrs=sources, node_cidrs=nodes,
                    boot_store=boot_store, vpn=settings.vpn,
                    lan_cidr=settings.network.lan_cidr, boot=boot,
                    pool_route_table_ids=(network.node_route_table_ids
                                          if settings.pools else ()),
                    secrets_key=bucket.key.arn if bucket is not None else None,
                    index=index,
                    balancer_group=balancer.security_group.id if balancer else None,
                    public_balancer_group=public.security_group.id if public else None,
                    balanced_ports=context.distribution.load_balanced_ports,
                    peers_group=peers.id if peers else None,
                    shared_parameters=first.shared_parameters if first else (),
                    user_address=(public.dns_name if public else
                                  first.user_address if first else None),
                    api_names=[balancer.dns_name] if balancer and boot else (),
                    balancer_address=endpoint.node_address if balancer and boot else None,
                    # Those that join at boot start once the one before them joined.
                    launch_now=first is None or boot is None),
                opts=opts))
        for index, controller in enumerate(controllers):
            if boot is None or index == 0:
                for entrance in filter(None, (balancer, public)):
                    entrance.attach(index, controller.instance)
        if bucket is not None:
            for index, controller in enumerate(controllers):
                bucket.allow_writes_by(
                    f"{context.name}-backup-writer" + (f"-{index + 1}" if index else ""),
                    controller.role_name, settings.cluster_name, opts)
        self._aws = AwsSide(network, controllers[0], opts, boot_store, bucket, tags,
                            tuple(controllers[1:]), balancer, public)
        return self._aws

    def _cloud_controller(self, provider: k8s.Provider) -> None:
        """The AWS cloud controller manager on the controllers, which are nodes, through the
        nodes' provider (components/aws/cloud_controller.py)."""
        context = self.context
        CloudController(f"{context.name}-cloud-controller", CloudControllerArgs(
            cluster_name=context.settings.cluster_name, provider=provider,
            controller_roles=[c.role_name for c in self._aws.controllers],
            node_selector=context.distribution.controller_node_labels), opts=self._aws.opts)

    def _balancer(self, network: AwsNetwork, api_sources: list[str], node_sources: list[str],
                  opts: pulumi.ResourceOptions) -> ApiLoadBalancer:
        """The network load balancer in front of the controllers: the API from the
        cluster's networks, the distribution's other ports from the nodes and the
        controllers (which join through it)."""
        settings = self.context.settings
        endpoint = settings.control_plane_endpoint
        return ApiLoadBalancer(f"{self.context.name}-api", ApiLoadBalancerArgs(
            cluster_name=settings.cluster_name, vpc_id=network.vpc_id,
            subnet_ids=network.subnet_ids[:endpoint.replicas],
            addresses=api_load_balancer_addresses(settings.aws, endpoint.replicas),
            controller_addresses=endpoint.controller_addresses,
            api_port=endpoint.port, ports=self.context.distribution.load_balanced_ports,
            api_sources=api_sources,
            node_sources=[*node_sources,
                          *(f"{address}/32" for address in endpoint.controller_addresses)]),
            opts=opts)

    def _public_balancer(self, network: AwsNetwork,
                         opts: pulumi.ResourceOptions) -> ApiLoadBalancer:
        """The API alone, from aws.adminCidrs, in front of the controllers: the address
        users and `pulumi up` reach it at when the first controller's is not enough."""
        settings = self.context.settings
        endpoint = settings.control_plane_endpoint
        return ApiLoadBalancer(f"{self.context.name}-public-api", ApiLoadBalancerArgs(
            cluster_name=settings.cluster_name, vpc_id=network.vpc_id,
            subnet_ids=network.subnet_ids[:endpoint.replicas],
            controller_addresses=endpoint.controller_addresses, api_port=endpoint.port,
            ports={}, api_sources=settings.aws.admin_cidrs, public=True), opts=opts)

    def _backup_target(self, bucket: BackupBucket) -> BackupTarget:
        return s3_backup_target(self.context.settings, bucket.bucket.bucket, bucket.location)

    def _install_backup_at_boot(self, boot: ControllerBoot, bucket: BackupBucket,
                                hosts: list[Host]) -> None:
        """install-backup among each controller's boot steps, after its install; with
        several, the first whose API answers takes each snapshot."""
        context, settings = self.context, self.context.settings
        env = install_backup_env(context.distribution, settings.backup, settings.cluster_name,
                                 self._backup_target(bucket))
        boot.after_install = {host.name: (install_backup_step({**env, **(backup_turn_env(
            [(h, None) for h in hosts], host, settings.kubernetes.api_port)
            if len(hosts) > 1 else {})}),) for host in hosts}

    def _efs(self, aws_side: AwsSide) -> Optional[EfsFileSystem]:
        """The EFS file system of storage.efs, mounted by the controller where it is a
        node's gateway to it, the on-prem hosts and the pools."""
        settings = self.context.settings
        if settings.storage.efs is None:
            return None
        # Its nodes: the controller, the on-prem hosts (hybrid: from their LAN addresses,
        # routed through the tunnel unchanged; the gateway's own packets from its fixed
        # tunnel address), the pools (cloud).
        gateway = ([gateway_address(settings.vpn.tunnel_cidr)]
                   if settings.vpn is not None and settings.vpn.mode == "server-on-ec2"
                   else [])
        # On hybrid the controllers mount EFS as the nodes do; on the cloud layout they
        # run none of the users' pods (tainted) and the pools are the nodes.
        controller = ([] if settings.layout == "cloud"
                      else [ec2.private_ip for ec2 in aws_side.controllers])
        return EfsFileSystem(f"{self.context.name}-efs", EfsFileSystemArgs(
            cluster_name=settings.cluster_name, efs=settings.storage.efs, vpc=settings.aws.vpc,
            network=aws_side.network,
            node_addresses=controller + [h.address for h in settings.hosts] + gateway,
            by_address=settings.layout == "hybrid",
            node_security_group=aws_side.network.node_security_group),
            opts=aws_side.opts)

    def _efs_service(self, efs: Optional[EfsFileSystem],
                     web_identity: Optional[EfsWebIdentity] = None) -> Optional[Efs]:
        if efs is None:
            return None
        settings = self.context.settings
        with_iam = efs_mounts_with_iam(settings.layout, settings.storage.efs)
        return Efs(address=efs.address,
                   file_system_id=efs.file_system.id if with_iam else None,
                   mount_target_addresses=tuple(t.ip_address for t in efs.mount_targets),
                   web_identity=web_identity)

    def _backup_over_ssh(self, aws_side: AwsSide) -> Optional[BackupTarget]:
        """What the cluster installs over SSH for the snapshots: nothing where the
        controller installs it at boot."""
        if aws_side.backup_bucket is None or self.boots_itself:
            return None
        return self._backup_target(aws_side.backup_bucket)

    def _outputs(self, aws_side: AwsSide, hosts: list, gateways: dict) -> dict:
        instance = aws_side.instance
        return {
            names.NODES_OUTPUT: node_outputs(hosts),
            "images": {"controlPlane": instance.image},
            "controlPlaneSshHostKey": instance.ssh_host_public_key,
            names.GATEWAYS_OUTPUT: {"aws": instance.public_ip, **gateways},
            "backupLocation": (aws_side.backup_bucket.location
                               if aws_side.backup_bucket is not None else None),
        }

    def _public_address(self, aws_side: AwsSide):
        if aws_side.public_balancer is not None:
            return aws_side.public_balancer.dns_name
        return (aws_side.instance.public_ip
                if self.context.settings.aws.control_plane.elastic_ip else None)
