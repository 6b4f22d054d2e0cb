"""An encrypted EFS file system in the VPC with a mount target per subnet at fixed
addresses, NFS open only to the VPC and the on-prem LAN, and (unless the stack says
otherwise) protected from deletion: data outlives the cluster."""

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aws.network import AwsNetwork
from config.cloud import VpcSettings, efs_mount_target_addresses
from config.storage import EfsBackend

NFS_PORT = 2049


@dataclass
class EfsFileSystemArgs:
    cluster_name: str
    efs: EfsBackend
    # Its mount targets' subnets are this VPC's: their addresses follow from its subnets.
    vpc: VpcSettings
    network: AwsNetwork
    # The networks NFS is open to (config.cloud.cluster_cidrs).
    cluster_cidrs: Sequence[str]
    # Nodes reach it by mount-target address, not by the file system's DNS name (hybrid:
    # on-prem nodes have no AWS DNS).
    by_address: bool = False


class EfsFileSystem(pulumi.ComponentResource):
    def __init__(self, name: str, args: EfsFileSystemArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:EfsFileSystem", name, None, opts)
        # The stack's and the cluster's tags are the provider's default_tags.
        tags = {"Name": f"{args.cluster_name}-shared"}
        opts = pulumi.ResourceOptions(parent=self)
        protect = args.efs.protect
        self.file_system = aws.efs.FileSystem(
            f"{name}-fs", encrypted=True, performance_mode="generalPurpose",
            throughput_mode="elastic",
            # Says so where the policy pack and the AWS console see it.
            tags={**tags, "gpu-cluster/data-protection": "on" if protect else "off"},
            # Protected: `pulumi destroy` refuses; once unprotected, it leaves the file
            # system and its data in the account.
            opts=pulumi.ResourceOptions(parent=self, protect=protect, retain_on_delete=protect))
        group = aws.ec2.SecurityGroup(f"{name}-nfs", vpc_id=args.network.vpc_id,
                                      description=f"{args.cluster_name} EFS (NFS)",
                                      tags=tags, opts=opts)
        for index, cidr in enumerate(args.cluster_cidrs):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-nfs-{index}", security_group_id=group.id, ip_protocol="tcp",
                from_port=NFS_PORT, to_port=NFS_PORT, cidr_ipv4=cidr, description="nfs",
                opts=opts)
        addresses = self.mount_target_addresses(args.vpc, args.efs,
                                               len(args.network.subnet_ids))
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
        self.address: pulumi.Input[str] = (addresses[0] if args.by_address
                                           else self.file_system.dns_name)
        self.register_outputs({"fileSystemId": self.file_system.id, "address": self.address})

    @staticmethod
    def mount_target_addresses(vpc: VpcSettings, efs: EfsBackend, subnets: int) -> list:
        """Fixed where known (.20 of created subnets); the first one as configured."""
        addresses = [None] * subnets if vpc.id else efs_mount_target_addresses(vpc)
        configured = efs.mount_target_address
        if configured:
            addresses[0] = configured
        return addresses

