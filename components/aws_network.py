"""The VPC side of the hybrid and cloud layouts: a VPC with a public subnet per
availability zone and its route table, or an existing VPC adopted by id."""

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from config.cloud import AwsSettings, subnet_cidrs


@dataclass
class AwsNetworkArgs:
    settings: AwsSettings
    cluster_name: str
    # A security group for EC2 nodes (cloud pools).
    node_security_group: bool = False


class AwsNetwork(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    subnet_ids: list[pulumi.Output[str]]
    route_table_ids: list[pulumi.Output[str]]

    def __init__(self, name: str, args: AwsNetworkArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:Network", name, None, opts)
        self._name, self._args = name, args
        self.cidr = args.settings.vpc.cidr
        if args.settings.vpc.id:
            self._adopt()
        else:
            self._create()
        self.node_security_group = (self._create_node_security_group()
                                    if args.node_security_group else None)
        self.register_outputs({"vpcId": self.vpc_id})

    def _adopt(self) -> None:
        vpc = self._args.settings.vpc
        self.vpc_id = pulumi.Output.from_input(vpc.id)
        self.subnet_ids = [pulumi.Output.from_input(s) for s in vpc.subnet_ids]
        self.route_table_ids = [pulumi.Output.from_input(r) for r in vpc.route_table_ids]

    def _create(self) -> None:
        settings, name = self._args.settings, self._name
        opts = pulumi.ResourceOptions(parent=self)
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=settings.vpc.cidr,
                          enable_dns_hostnames=True, enable_dns_support=True,
                          tags=self._tags(f"{self._args.cluster_name}"), opts=opts)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id,
                                          tags=self._tags(self._args.cluster_name), opts=opts)
        routes = aws.ec2.RouteTable(
            f"{name}-public", vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags=self._tags(f"{self._args.cluster_name}-public"), opts=opts)
        zones = aws.get_availability_zones_output(
            state="available", opts=pulumi.InvokeOutputOptions(parent=self))
        self.subnet_ids = []
        for index, cidr in enumerate(subnet_cidrs(settings.vpc)):
            subnet = aws.ec2.Subnet(
                f"{name}-subnet-{index}", vpc_id=vpc.id, cidr_block=cidr,
                availability_zone=zones.names[index],
                # Instances get addresses only where asked for (the Elastic IP).
                map_public_ip_on_launch=False,
                tags=self._tags(f"{self._args.cluster_name}-{index}"), opts=opts)
            aws.ec2.RouteTableAssociation(f"{name}-subnet-{index}", subnet_id=subnet.id,
                                          route_table_id=routes.id, opts=opts)
            self.subnet_ids.append(subnet.id)
        self.vpc_id = vpc.id
        self.route_table_ids = [routes.id]

    def _create_node_security_group(self) -> aws.ec2.SecurityGroup:
        """For EC2 nodes: all traffic among themselves (pod network, kubelets), nothing in
        from elsewhere (they dial out to the control plane), everything out."""
        opts = pulumi.ResourceOptions(parent=self)
        group = aws.ec2.SecurityGroup(
            f"{self._name}-nodes", vpc_id=self.vpc_id,
            description=f"{self._args.cluster_name} nodes",
            tags=self._tags(f"{self._args.cluster_name}-nodes"), opts=opts)
        aws.vpc.SecurityGroupIngressRule(
            f"{self._name}-nodes-from-nodes", security_group_id=group.id, ip_protocol="-1",
            referenced_security_group_id=group.id, description="nodes", opts=opts)
        aws.vpc.SecurityGroupEgressRule(
            f"{self._name}-nodes-egress", security_group_id=group.id, ip_protocol="-1",
            cidr_ipv4="0.0.0.0/0", description="all outbound", opts=opts)
        return group

    def _tags(self, name: str) -> dict:
        return {**self._args.settings.tags, "Name": name,
                "gpu-cluster/cluster": self._args.cluster_name}


def newest_image(owner: str, name: str, parent: pulumi.Resource) -> pulumi.Output[str]:
    """The id of the newest image of `owner` whose name matches `name` (a glob)."""
    return aws.ec2.get_ami_output(
        most_recent=True, owners=[owner],
        filters=[aws.ec2.GetAmiFilterArgs(name="name", values=[name])],
        opts=pulumi.InvokeOutputOptions(parent=parent)).id
