"""The EC2 instance that runs the control plane (and the VPN server) on the AWS layouts:
a fixed private address, IMDSv2 only, an encrypted root volume, an Elastic IP, and
security group rules that open only what the cluster and its admins need. On the cloud
layout it installs the controller itself at boot (`boot`); on hybrid, steps over SSH do."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws
from cryptography.hazmat.primitives import serialization

from components.aws_boot import boot_user_data, instance_profile_reading, secret_parameter
from components.aws_network import AwsNetwork, newest_image
from components.cluster_pki import ClusterPki
from components.distributions.k0s import K0s
from components.host_bootstrap import PREPARE_HOST, prepare_host_env
from components.remote_step import SSM_READER, envelope
from config.cloud import control_plane_address
from config.model import Host, StackConfig

# Canonical's account; the image is the newest Ubuntu 24.04 LTS server build.
UBUNTU_OWNER = "099720109477"
UBUNTU_IMAGE_NAME = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-*"
UBUNTU_SSH_USER = "ubuntu"
EC2_SSH_PORT = 22
# k0s: API server, worker join API, konnectivity agents.
K0S_CONTROLLER_PORTS = {"kubernetes-api": 6443, "k0s-join-api": 9443, "konnectivity": 8132}


@dataclass
class ControllerBoot:
    """What the instance needs to install the controller itself from its user data."""

    distribution: K0s
    pki: ClusterPki


@dataclass
class ControlPlaneHostArgs:
    settings: StackConfig
    network: AwsNetwork
    boot: Optional[ControllerBoot] = None


class ControlPlaneHost(pulumi.ComponentResource):
    def __init__(self, name: str, args: ControlPlaneHostArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:ControlPlaneHost", name, None, opts)
        self._name, self._args = name, args
        self._opts = pulumi.ResourceOptions(parent=self)
        aws_settings = args.settings.aws
        self.private_ip = control_plane_address(aws_settings)
        self.host = Host(name=aws_settings.control_plane.name, address=self.private_ip,
                         role="controller", ssh_user=UBUNTU_SSH_USER)
        self.security_group = self._create_security_group()
        elastic_ip = aws_settings.control_plane.elastic_ip
        if args.boot is None:
            self.instance = self._create_instance(cloud_config(self.host.name))
            eip = (aws.ec2.Eip(f"{name}-eip", domain="vpc", instance=self.instance.id,
                               tags=self._tags(), opts=self._opts) if elastic_ip else None)
        else:
            # The address goes into the API certificate the instance makes at boot, so it
            # is allocated before the instance and associated after.
            eip = (aws.ec2.Eip(f"{name}-eip", domain="vpc", tags=self._tags(),
                               opts=self._opts) if elastic_ip else None)
            public = eip.public_ip if eip else None
            self.instance = self._create_instance(self._boot_user_data(public),
                                                  self._create_boot_profile())
            if eip:
                aws.ec2.EipAssociation(f"{name}-eip", allocation_id=eip.allocation_id,
                                       instance_id=self.instance.id, opts=self._opts)
        self.public_ip: pulumi.Output[str] = (
            eip.public_ip if eip else pulumi.Output.from_input(self.private_ip))
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

    def _create_boot_profile(self) -> aws.iam.InstanceProfile:
        """The CA key the controller needs at boot, readable by its role only."""
        self.ca_key_parameter = secret_parameter(
            f"{self._name}-ca-key", ca_key_parameter_name(self._args.settings),
            self._args.boot.pki.ca_private_key_pem, self._tags(), self._opts)
        return instance_profile_reading(f"{self._name}-role", self.ca_key_parameter,
                                        self._tags(), self._opts)

    def _boot_user_data(self, public_ip: Optional[pulumi.Output[str]]) -> pulumi.Output[str]:
        """Host settings, then k0s as controller with the program's CA: the same scripts
        the hybrid layout runs over SSH; the CA key is read from SSM, not user data."""
        settings, boot, host = self._args.settings, self._args.boot, self.host
        sans = [public_ip] if public_ip is not None else []
        return boot_user_data([
            envelope(host.name, "prepare-host", PREPARE_HOST, prepare_host_env(settings)),
            envelope(host.name, "install-controller", boot.distribution.install_controller, {
                **boot.distribution.controller_env(host, boot.pki.ca_cert_pem,
                                                   pulumi.Output.all(*sans)),
                "K0S_CA_KEY": "",
                "K0S_CA_KEY_SSM_PARAMETER": ca_key_parameter_name(settings),
                "AWS_REGION": settings.aws.region,
                "SSM_READER": SSM_READER.text(),
            }),
        ], cloud_config(host.name))

    def _create_instance(self, user_data: pulumi.Input[str],
                         profile: Optional[aws.iam.InstanceProfile] = None) -> aws.ec2.Instance:
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
            iam_instance_profile=profile.name if profile else None,
            # On hybrid it forwards between the VPN and the VPC.
            source_dest_check=self._args.settings.vpn is None,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_tokens="required", http_endpoint="enabled", http_put_response_hop_limit=1),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                volume_size=spec.root_volume_gb, volume_type="gp3", encrypted=True,
                delete_on_termination=True),
            # The host name (k0s names the node after it) and on cloud the boot steps; no
            # secret ever goes here.
            user_data_base64=user_data if self._args.boot else None,
            user_data=None if self._args.boot else user_data,
            tags=self._tags(),
            # A new image must not replace (and wipe) the running control plane; cloud-init
            # runs user data once, so a changed boot script applies to a new instance only.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["ami", "userDataBase64"]),
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


def ca_key_parameter_name(settings: StackConfig) -> str:
    return f"/gpu-cluster/{settings.cluster_name}/control-plane/ca-key"


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
