"""An encrypted EFS file system in the VPC with a mount target per subnet at fixed
addresses, NFS open only to the cluster's node addresses, a file system policy, and
(unless the stack says otherwise) protected from deletion: data outlives the cluster."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

from components.aws.network import AwsNetwork
from config.cloud import VpcSettings, efs_mount_target_addresses
from config.storage import ACCESS_POINT_CLUSTER_TAG as CLUSTER_TAG
from config.storage import ACCESS_POINT_CSI_TAG as CSI_TAG
from config.storage import EfsBackend
from contract import ports

NFS_PORT = ports.NFS
# What an NFS client may do (https://docs.aws.amazon.com/efs/latest/ug/
# iam-access-control-nfs-efs.html, "EFS actions for clients").
MOUNT, WRITE, ROOT = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite",
                      "elasticfilesystem:ClientRootAccess")
ANONYMOUS_NFS_WARNING = (
    "storage.efs.anonymousNfs: the EFS file system lets NFS clients without an IAM identity "
    "or TLS mount it as root; its security group admits the cluster's node addresses only")


def efs_policy(file_system_arn: str, node_roles: Sequence[str], anonymous_nfs: bool,
               client_roles: Sequence[str] = ()) -> str:
    """The file system policy. Without it AWS's default policy lets any client that reaches
    a mount target mount, write and be root ("Default EFS file system policy", the page
    above). By default: TLS (aws:SecureTransport), mount and write for the node roles and
    the client roles (the on-prem nodes' EFS CSI driver, through its web identity:
    components/aws/service_account_issuer.py), root for the node roles only (no statement
    allows the anonymous principal of a client mounted without `iam`), held by explicit
    denies against any identity policy (an allow in either the identity or the file system
    policy suffices for EFS, the page above; an explicit deny overrides both,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
    With storage.efs.anonymousNfs, AWS's default policy spelled out: the security group is
    then the only limit."""
    through_mount_target = {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}
    if anonymous_nfs:
        return json.dumps({"Version": "2012-10-17", "Statement": [{
            "Sid": "NfsClientsOfTheNodeAddresses", "Effect": "Allow",
            "Principal": {"AWS": "*"}, "Action": [MOUNT, WRITE, ROOT],
            "Resource": file_system_arn, "Condition": through_mount_target}]})
    roles, clients = sorted(node_roles), sorted(client_roles)
    statements = [
        {"Sid": "NodesMountWriteAndAreRoot", "Effect": "Allow", "Principal": {"AWS": roles},
         "Action": [MOUNT, WRITE, ROOT], "Resource": file_system_arn,
         "Condition": through_mount_target}]
    if clients:
        # Their mounts are access points, whose POSIX user EFS enforces: no root needed.
        statements.append(
            {"Sid": "ClientsMountAndWrite", "Effect": "Allow", "Principal": {"AWS": clients},
             "Action": [MOUNT, WRITE], "Resource": file_system_arn,
             "Condition": through_mount_target})
    statements += [
        {"Sid": "TlsOnly", "Effect": "Deny", "Principal": {"AWS": "*"},
         "Action": [MOUNT, WRITE, ROOT], "Resource": file_system_arn,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
        # A negated operator matches a request without the key: the anonymous client too.
        {"Sid": "NodeRolesOnly", "Effect": "Deny", "Principal": {"AWS": "*"},
         "Action": [MOUNT, WRITE, ROOT], "Resource": file_system_arn,
         "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sorted(roles + clients)}}}]
    if clients:
        statements.append(
            {"Sid": "RootForNodeRolesOnly", "Effect": "Deny", "Principal": {"AWS": "*"},
             "Action": ROOT, "Resource": file_system_arn,
             "Condition": {"ArnNotEquals": {"aws:PrincipalArn": roles}}})
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def provisioner_policy(file_system_arn: str, cluster_name: str) -> str:
    """What the EFS CSI driver's controller calls (the driver's docs/iam-policy-example.json
    at v3.4.1), narrowed: access points are created on this file system only, carrying the
    driver's tag and the cluster's, and only those are tagged or deleted."""
    # Access points in the file system's region and account (its ARN's fields 3 and 4).
    region, account = file_system_arn.split(":")[3:5]
    access_points = f"arn:aws:elasticfilesystem:{region}:{account}:access-point/*"
    ours = {"StringEquals": {f"aws:ResourceTag/{CSI_TAG}": "true",
                             f"aws:ResourceTag/{CLUSTER_TAG}": cluster_name}}
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "Describe", "Effect": "Allow",
         "Action": ["elasticfilesystem:DescribeAccessPoints",
                    "elasticfilesystem:DescribeFileSystems",
                    "elasticfilesystem:DescribeMountTargets", "ec2:DescribeAvailabilityZones"],
         "Resource": "*"},
        {"Sid": "CreateOnTheClusterFileSystem", "Effect": "Allow",
         "Action": "elasticfilesystem:CreateAccessPoint", "Resource": file_system_arn,
         "Condition": {"StringEquals": {f"aws:RequestTag/{CSI_TAG}": "true",
                                        f"aws:RequestTag/{CLUSTER_TAG}": cluster_name}}},
        {"Sid": "TagAndDeleteTheClusterAccessPoints", "Effect": "Allow",
         "Action": ["elasticfilesystem:TagResource", "elasticfilesystem:DeleteAccessPoint"],
         "Resource": access_points, "Condition": ours},
    ]})


def efs_client_cidrs(node_addresses: Sequence[str]) -> list[str]:
    """The /32 of each node address, in order, once."""
    return [f"{address}/32" for address in dict.fromkeys(node_addresses)]


@dataclass(frozen=True, kw_only=True)
class EfsFileSystemArgs:
    cluster_name: str
    efs: EfsBackend
    # Its mount targets' subnets are this VPC's: their addresses follow from its subnets.
    vpc: VpcSettings
    network: AwsNetwork
    # The addresses of the nodes NFS is open to: the controller, on-prem hosts.
    node_addresses: Sequence[str]
    # Nodes reach it by mount-target address, not by the file system's DNS name (hybrid:
    # on-prem nodes have no AWS DNS).
    by_address: bool = False
    # Cloud: the pools' instances, whose addresses are not known, by their security group.
    node_security_group: Optional[aws.ec2.SecurityGroup] = None


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
        # Node addresses only: never the VPC, the LAN or the VPN's range. By index, as the
        # networks were: their rules are updated in place, not replaced.
        for index, cidr in enumerate(efs_client_cidrs(args.node_addresses)):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-nfs-{index}", security_group_id=group.id,
                ip_protocol="tcp", from_port=NFS_PORT, to_port=NFS_PORT, cidr_ipv4=cidr,
                description="nfs from a node", opts=opts)
        if args.node_security_group is not None:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-nfs-pool-nodes", security_group_id=group.id, ip_protocol="tcp",
                from_port=NFS_PORT, to_port=NFS_PORT,
                referenced_security_group_id=args.node_security_group.id,
                description="nfs from the pools' nodes", opts=opts)
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
        self._name, self._anonymous_nfs = name, args.efs.anonymous_nfs
        if self._anonymous_nfs:
            pulumi.log.warn(ANONYMOUS_NFS_WARNING, resource=self)
        self.register_outputs({"fileSystemId": self.file_system.id, "address": self.address})

    def allow_provisioner(self, roles: dict[str, pulumi.Input[str]],
                          cluster_name: str) -> list:
        """The EFS CSI driver's controller, on the roles (by pool name) of the nodes it may
        run on: what it calls to make and remove the claims' access points
        (provisioner_policy). Named by pool, so a pool removed takes only its own."""
        return [aws.iam.RolePolicy(
            f"{self._name}-csi-controller-{pool}", role=role,
            policy=self.file_system.arn.apply(
                lambda arn: provisioner_policy(arn, cluster_name)),
            opts=pulumi.ResourceOptions(parent=self)) for pool, role in roles.items()]

    def allow_nodes(self, node_roles: Sequence[pulumi.Input[str]],
                    client_roles: Sequence[pulumi.Input[str]] = ()) -> aws.efs.FileSystemPolicy:
        """The file system policy, once every node role exists (efs_policy); client roles
        mount and write, never as root."""
        count = len(node_roles)
        return aws.efs.FileSystemPolicy(
            f"{self._name}-policy", file_system_id=self.file_system.id,
            policy=pulumi.Output.all(self.file_system.arn, *node_roles, *client_roles).apply(
                lambda v: efs_policy(v[0], v[1:1 + count], self._anonymous_nfs,
                                     v[1 + count:])),
            opts=pulumi.ResourceOptions(parent=self))

    @staticmethod
    def mount_target_addresses(vpc: VpcSettings, efs: EfsBackend, subnets: int) -> list:
        """Fixed where known (.20 of created subnets); the first one as configured."""
        addresses = [None] * subnets if vpc.id else efs_mount_target_addresses(vpc)
        configured = efs.mount_target_address
        if configured:
            addresses[0] = configured
        return addresses

