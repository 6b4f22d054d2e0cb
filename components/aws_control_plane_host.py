"""The EC2 instance that runs the control plane (and the VPN server) on the AWS layouts:
a fixed private address, IMDSv2 only, an encrypted root volume, an Elastic IP, and
security group rules that open only what the cluster and its admins need."""

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from cryptography.hazmat.primitives import serialization

from components.aws_network import AwsNetwork, newest_image
from config.cloud import control_plane_address
from config.model import StackConfig

# Canonical's account; the image is the newest Ubuntu 24.04 LTS server build.
UBUNTU_OWNER = "099720109477"
UBUNTU_IMAGE_NAME = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
UBUNTU_SSH_USER = "ubuntu"
EC2_SSH_PORT = 22
# k0s: API server, worker join API, konnectivity agents.
K0S_CONTROLLER_PORTS = {"kubernetes-api": 6443, "k0s-join-api": 9443, "konnectivity": 8132}


@dataclass
class ControlPlaneHostArgs:
    settings: StackConfig
    network: AwsNetwork


class ControlPlaneHost(pulumi.ComponentResource):
    """The instance only; what runs on it is bootstrapped over SSH like any host."""

    def __init__(self, name: str, args: ControlPlaneHostArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:ControlPlaneHost", name, None, opts)
        self._name, self._args = name, args
        self._opts = pulumi.ResourceOptions(parent=self)
        aws_settings = args.settings.aws
        self.private_ip = control_plane_address(aws_settings)
        self.ssh_user = UBUNTU_SSH_USER
        self.security_group = self._create_security_group()
        self.instance = self._create_instance()
        if aws_settings.control_plane.elastic_ip:
            eip = aws.ec2.Eip(f"{name}-eip", domain="vpc", instance=self.instance.id,
                              tags=self._tags(), opts=self._opts)
            self.public_ip: pulumi.Output[str] = eip.public_ip
        else:
            self.public_ip = pulumi.Output.from_input(self.private_ip)
        self.routes = self._route_lan_through_instance()
        self.register_outputs({"privateIp": self.private_ip, "publicIp": self.public_ip})

    def _tags(self) -> dict:
        settings = self._args.settings
        return {**settings.aws.tags, "Name": f"{settings.cluster_name}-control-plane",
                "gpu-cluster/cluster": settings.cluster_name}

    def _create_security_group(self) -> aws.ec2.SecurityGroup:
        settings = self._args.settings
        group = aws.ec2.SecurityGroup(
            f"{self._name}-sg", vpc_id=self._args.network.vpc_id,
            description=f"{settings.cluster_name} control plane and VPN server",
            tags=self._tags(), opts=self._opts)
        for name, protocol, port, cidrs in ingress_rules(settings):
            for index, cidr in enumerate(cidrs):
                aws.vpc.SecurityGroupIngressRule(
                    f"{self._name}-{name}-{index}", security_group_id=group.id,
                    ip_protocol=protocol, from_port=port, to_port=port, cidr_ipv4=cidr,
                    description=name, opts=self._opts)
        # Packages, images and the k0s release are fetched from the internet.
        aws.vpc.SecurityGroupEgressRule(
            f"{self._name}-egress", security_group_id=group.id, ip_protocol="-1",
            cidr_ipv4="0.0.0.0/0", description="all outbound", opts=self._opts)
        return group

    def _create_instance(self) -> aws.ec2.Instance:
        settings = self._args.settings
        spec = settings.aws.control_plane
        key = aws.ec2.KeyPair(f"{self._name}-key",
                              public_key=openssh_public_key(
                                  settings.ssh_private_key.get_secret_value()),
                              tags=self._tags(), opts=self._opts)
        ami = spec.ami or newest_image(UBUNTU_OWNER, UBUNTU_IMAGE_NAME, parent=self)
        return aws.ec2.Instance(
            f"{self._name}-instance",
            ami=ami,
            instance_type=spec.instance_type,
            subnet_id=self._args.network.subnet_ids[0],
            private_ip=self.private_ip,
            vpc_security_group_ids=[self.security_group.id],
            key_name=key.key_name,
            # On hybrid it forwards between the VPN and the VPC.
            source_dest_check=self._args.settings.vpn is None,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_tokens="required", http_endpoint="enabled", http_put_response_hop_limit=1),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                volume_size=spec.root_volume_gb, volume_type="gp3", encrypted=True,
                delete_on_termination=True),
            # Only the host name: k0s names the node after it. No secret ever goes here.
            user_data=cloud_config(spec.name),
            tags=self._tags(),
            # A new image must not replace (and wipe) the running control plane.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["ami"]),
        )

    def _route_lan_through_instance(self) -> list[aws.ec2.Route]:
        """The on-prem LAN, and the tunnel the gateway and admins send from, are reached
        through the instance (the VPN server)."""
        settings = self._args.settings
        if settings.vpn is None:
            return []
        destinations = {"lan": settings.network.lan_cidr}
        if settings.vpn.mode == "server-on-ec2":
            destinations["tunnel"] = settings.vpn.tunnel_cidr
        return [
            aws.ec2.Route(f"{self._name}-route-{what}-{index}", route_table_id=table,
                          destination_cidr_block=cidr,
                          network_interface_id=self.instance.primary_network_interface_id,
                          opts=self._opts)
            for what, cidr in destinations.items()
            for index, table in enumerate(self._args.network.route_table_ids)
        ]


def ingress_rules(settings: StackConfig) -> list[tuple[str, str, int, list[str]]]:
    """(name, protocol, port, source CIDRs) of every inbound rule; nothing else is open."""
    aws_settings, vpn = settings.aws, settings.vpn
    cluster_networks = cluster_cidrs(settings)
    admins = list(aws_settings.admin_cidrs)
    rules = [("ssh", "tcp", EC2_SSH_PORT, admins)]
    for name, port in K0S_CONTROLLER_PORTS.items():
        sources = cluster_networks + (admins if name == "kubernetes-api" else [])
        rules.append((name, "tcp", port, sources))
    if vpn is not None and vpn.mode == "server-on-ec2":
        rules.append(("openvpn", vpn.protocol, vpn.port, list(vpn.client_source_cidrs)))
    return rules


def cluster_cidrs(settings: StackConfig) -> list[str]:
    """The networks cluster nodes talk to the AWS side from: the VPC, on hybrid the LAN,
    and the tunnel our VPN gateway (a node too) sends from."""
    cidrs = [settings.aws.vpc.cidr]
    if settings.network.lan_cidr:
        cidrs.append(settings.network.lan_cidr)
    if settings.vpn is not None and settings.vpn.mode == "server-on-ec2":
        cidrs.append(settings.vpn.tunnel_cidr)
    return cidrs


def cloud_config(hostname: str) -> str:
    return f"#cloud-config\nhostname: {hostname}\npreserve_hostname: false\n"


def openssh_public_key(private_key: str) -> str:
    """The public half of the configured SSH key, for the EC2 key pair."""
    data = private_key.encode()
    if b"OPENSSH PRIVATE KEY" in data:
        key = serialization.load_ssh_private_key(data, password=None)
    else:
        key = serialization.load_pem_private_key(data, password=None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()
