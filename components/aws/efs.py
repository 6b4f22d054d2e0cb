"""An encrypted EFS file system in the VPC with a mount target per subnet at fixed
addresses, NFS open only to the VPC and the on-prem LAN, and (unless the stack says
otherwise) protected from deletion: data outlives the cluster."""

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aws.control_plane_host import cluster_cidrs
from components.aws.network import AwsNetwork
from config.cloud import efs_mount_target_addresses
from config.model import StackConfig

NFS_PORT = 2049


@dataclass
class EfsFileSystemArgs:
    settings: StackConfig
    network: AwsNetwork


class EfsFileSystem(pulumi.ComponentResource):
    def __init__(self, name: str, args: EfsFileSystemArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:EfsFileSystem", name, None, opts)
        settings = args.settings
        tags = {**settings.aws.tags, "Name": f"{settings.cluster_name}-shared",
                "gpu-cluster/cluster": settings.cluster_name}
        opts = pulumi.ResourceOptions(parent=self)
        protect = settings.storage.efs.protect
        self.file_system = aws.efs.FileSystem(
            f"{name}-fs", encrypted=True, performance_mode="generalPurpose",
            throughput_mode="elastic",
            # Says so where the policy pack and the AWS console see it.
            tags={**tags, "gpu-cluster/data-protection": "on" if protect else "off"},
            # Protected: `pulumi destroy` refuses; once unprotected, it leaves the file
            # system and its data in the account.
            opts=pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect))
        group = aws.ec2.SecurityGroup(f"{name}-nfs", vpc_id=args.network.vpc_id,
                                      description=f"{settings.cluster_name} EFS (NFS)",
                                      tags=tags, opts=opts)
        for index, cidr in enumerate(cluster_cidrs(settings)):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-nfs-{index}", security_group_id=group.id, ip_protocol="tcp",
                from_port=NFS_PORT, to_port=NFS_PORT, cidr_ipv4=cidr, description="nfs",
                opts=opts)
        addresses = self.mount_target_addresses(settings, len(args.network.subnet_ids))
        self.mount_targets = [
            aws.efs.MountTarget(f"{name}-mount-{index}", file_system_id=self.file_system.id,
                                subnet_id=subnet, ip_address=address,
                                security_groups=[group.id], opts=opts)
            for index, (subnet, address) in enumerate(zip(args.network.subnet_ids, addresses))
        ]
        # Cloud nodes mount by the file system's DNS name, which AWS resolves to the mount
        # target in the client's own zone (no cross-zone traffic, no dependence on one
        # zone): https://docs.aws.amazon.com/efs/latest/ug/mounting-fs-mount-cmd-dns-name.html
        # On-prem nodes have no zone and no AWS DNS: they use the first subnet's target by
        # address, through the VPN.
        self.address: pulumi.Input[str] = (addresses[0] if settings.layout == "hybrid"
                                           else self.file_system.dns_name)
        self.register_outputs({"fileSystemId": self.file_system.id, "address": self.address})

    @staticmethod
    def mount_target_addresses(settings: StackConfig, subnets: int) -> list:
        """Fixed where known (.20 of created subnets); the first one as configured."""
        addresses = ([None] * subnets if settings.aws.vpc.id
                     else efs_mount_target_addresses(settings.aws))
        configured = settings.storage.efs.mount_target_address
        if configured:
            addresses[0] = configured
        return addresses

