"""The EC2 instance that runs the control plane (and the VPN server) on the AWS layouts:
a fixed private address, IMDSv2 only, an encrypted root volume, an Elastic IP, and
security group rules that open only what the cluster and its admins need. On the cloud
layout it installs the controller itself at boot (`boot`); on hybrid, steps over SSH do,
verifying the SSH host key the instance installed at boot."""

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_aws as aws
import pulumi_tls as tls

from components.aws import ssm_paths
from components.aws.boot import (
    EC2_SSH_PORT,
    BootReport,
    BootStore,
    MachineBoot,
    boot_profile,
    instance_role,
    machine_boot,
    secret_parameter,
)
from components.aws.controller_groups import admit_balancers, ingress_rules
from components.aws.network import AwsNetwork, pinned_image, port_range, warn_over_rules_quota
from components.kubernetes.pki import ClusterPki
from components.distributions.base import Distribution
from components.hosts.steps import HostStep, HostProfile
from components.common.remote_step import Endpoint
from components.common.step_text import Script
from config import versions
from config.cloud import (
    AwsSettings,
    VpnSettings,
    controller_addresses,
    controller_names,
)
from config.hosts import Host

INSTALL_SSH_HOST_KEY = Script("aws/install-ssh-host-key.sh")
REFUSE_SECOND_CLUSTER = Script("aws/refuse-second-cluster.sh")
UBUNTU_SSH_USER = "ubuntu"
# SSH reaches a new instance only once it has booted and installed its host key (a
# minute or two after EC2 says "running"); until then every dial fails (refused, or the
# boot's own host key) and is retried for this long.
BOOT_WAIT_SECONDS = 480
# What the controller's host preparation is for: no GPUs, SSH on EC2's port.
CONTROLLER_MACHINE = HostProfile(gpus=0, install_driver=False, nvswitch="auto",
                                 ssh_port=EC2_SSH_PORT, on_ec2=True)


@dataclass
class ControllerBoot:
    """What the instance needs to install the controller itself from its user data."""

    distribution: Distribution
    pki: ClusterPki
    # The host preparation steps for CONTROLLER_MACHINE (components/hosts/steps.py).
    preparation: Sequence[HostStep]
    # The distribution's cluster_secrets, by name: stored like the CA key.
    secrets: Mapping[str, pulumi.Output[str]] = field(default_factory=dict)
    # More values its steps read, stored and readable the same way, by name, and the
    # steps that run once the controller is installed (the backups'), by controller.
    stored: Mapping[str, pulumi.Output[str]] = field(default_factory=dict)
    after_install: Mapping[str, Sequence[HostStep]] = field(default_factory=dict)


def ec2_controllers(aws: AwsSettings, replicas: int) -> list[Host]:
    """The EC2 controllers, in order: names, fixed addresses and generations from the
    config."""
    generations = aws.control_plane.generations
    return [Host(name=name, address=address, role="controller", ssh_user=UBUNTU_SSH_USER,
                 generation=generations.get(name, 0))
            for name, address in zip(controller_names(aws, replicas),
                                      controller_addresses(aws, replicas))]


@dataclass(frozen=True, kw_only=True)
class ControlPlaneHostArgs:
    # The controller (ec2_controllers).
    host: Host
    cluster_name: str
    aws: AwsSettings
    network: AwsNetwork
    # The public half of the stack's SSH key, for the EC2 key pair (config.types.public_key_of).
    ssh_public_key: str
    api_port: int
    # The distribution's ports nodes reach the control plane at, beyond the API's:
    # name -> (port, protocol).
    control_plane_ports: Mapping[str, tuple[int, str]]
    # The networks nodes reach the AWS side from (config.cloud.cluster_cidrs).
    cluster_cidrs: Sequence[str]
    # The nodes' own addresses, which alone reach control_plane_ports (config.cloud.node_cidrs).
    node_cidrs: Sequence[str]
    # Where its boot's bundle and plan are fetched from.
    boot_store: BootStore
    # Hybrid: the VPN the instance serves or dials, and the on-prem LAN routed through it.
    vpn: Optional[VpnSettings] = None
    lan_cidr: Optional[str] = None
    # Hybrid with pools: the pools' own route tables (AwsNetwork.node_route_table_ids),
    # which route the LAN and the tunnel through it too.
    pool_route_table_ids: Sequence[pulumi.Input[str]] = ()
    boot: Optional[ControllerBoot] = None
    # The cluster's KMS key its SecureStrings are encrypted with (the backups' key; none:
    # the account's AWS-managed SSM key).
    secrets_key: Optional[pulumi.Input[str]] = None
    # With several controllers: this one's place (0 is the first, which serves the VPN),
    # the API load balancer's security group it admits the API and `balanced_ports` from,
    # and the group every controller is in (controller_peers_group).
    index: int = 0
    balancer_group: Optional[pulumi.Input[str]] = None
    # With several controllers, the public load balancer's group, admitted on the API port.
    public_balancer_group: Optional[pulumi.Input[str]] = None
    balanced_ports: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    peers_group: Optional[pulumi.Input[str]] = None
    # A controller after the first that installs itself at boot (cloud): the first's
    # `shared_parameters` it reads. One that installs itself at boot: where users reach
    # the API, in its certificate (none: its own Elastic IP).
    shared_parameters: Sequence[aws.ssm.Parameter] = ()
    user_address: Optional[pulumi.Input[str]] = None
    # Names of the API made at `up` (the load balancer's DNS name), in the certificate of
    # one that installs itself at boot, and the load balancer's address, where the first
    # of several refuses to initialise while a control plane answers.
    api_names: Sequence[pulumi.Input[str]] = ()
    balancer_address: Optional[str] = None
    # False: the instance waits for `launch` (one that joins at boot, after the one
    # before it joined).
    launch_now: bool = True


class ControlPlaneHost(pulumi.ComponentResource):
    def __init__(self, name: str, args: ControlPlaneHostArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:aws:ControlPlaneHost", name, None, opts)
        self._name, self._args = name, args
        self._opts = pulumi.ResourceOptions(parent=self)
        self.host = args.host
        self.private_ip = args.host.address
        # The first controller alone serves (or dials) the VPN and routes the LAN.
        self._vpn = args.vpn if args.index == 0 else None
        self.security_group = self._create_security_group()
        self._create_ssh_host_key()
        self._role = instance_role(f"{name}-role", self._tags(), self._opts)
        # What other components grant the instance (writing its backups).
        self.role_name, self.role_arn = self._role.name, self._role.arn
        # One that installs itself at boot: its address may go into the API certificate
        # its boot makes (`user_address`, a single controller's), so it is allocated
        # before the instance and associated after.
        self._eip = (aws.ec2.Eip(f"{name}-eip", domain="vpc", tags=self._tags(),
                                 opts=self._opts)
                     if args.aws.control_plane.elastic_ip and args.boot is not None else None)
        self.user_address: Optional[pulumi.Input[str]] = (
            args.user_address if args.user_address is not None else
            self._eip.public_ip if self._eip is not None else None)
        self._stored_parameters = self._store_boot_secrets()
        self._machine_boot = self._boot()
        if args.launch_now:
            self.launch()

    def launch(self, after: Sequence[pulumi.Resource] = (),
               stored: Mapping[str, pulumi.Input[str]] = MappingProxyType({})) -> aws.ec2.Instance:
        """The instance, once `after`; `stored`: more secrets its boot reads, by name
        (a joining controller's join token), readable by its role alone."""
        name, args = self._name, self._args
        reads = [*self._stored_parameters, *(
            secret_parameter(f"{name}-{secret}", self._parameter(secret), value, self._tags(),
                             self._opts, args.secrets_key)
            for secret, value in stored.items())]
        # Its boot reads the parameters: they exist before it starts.
        self.instance = self._create_instance(self._machine_boot,
                                              self._create_boot_profile(reads),
                                              [*reads, *after])
        eip = self._eip
        if args.boot is None:
            eip = (aws.ec2.Eip(f"{name}-eip", domain="vpc", instance=self.instance.id,
                               tags=self._tags(), opts=self._opts)
                   if args.aws.control_plane.elastic_ip else None)
        elif eip is not None:
            aws.ec2.EipAssociation(f"{name}-eip", allocation_id=eip.allocation_id,
                                   instance_id=self.instance.id, opts=self._opts)
        self.public_ip: pulumi.Output[str] = (
            eip.public_ip if eip else pulumi.Output.from_input(self.private_ip))
        self.ssh_endpoint = Endpoint(self.public_ip, EC2_SSH_PORT, self.ssh_host_public_key,
                                     BOOT_WAIT_SECONDS)
        self.routes = self._route_lan_through_instance()
        self.register_outputs({"privateIp": self.private_ip, "publicIp": self.public_ip})
        return self.instance

    def _tags(self) -> dict:
        # The stack's and the cluster's tags are the provider's default_tags.
        index = self._args.index
        return {"Name": f"{self._args.cluster_name}-control-plane"
                        + (f"-{index + 1}" if index else "")}

    def _create_security_group(self) -> aws.ec2.SecurityGroup:
        args = self._args
        group = aws.ec2.SecurityGroup(
            f"{self._name}-sg", vpc_id=args.network.vpc_id,
            description=f"{args.cluster_name} control plane"
                        + (" and VPN server" if args.index == 0 else ""),
            tags=self._tags(), opts=self._opts)
        rules = ingress_rules(args.aws.admin_cidrs, args.api_port, args.cluster_cidrs,
                              args.node_cidrs, args.control_plane_ports, self._vpn)
        for name, protocol, port, cidrs in rules:
            for index, cidr in enumerate(cidrs):
                aws.vpc.SecurityGroupIngressRule(
                    f"{self._name}-{name}-{index}", security_group_id=group.id,
                    ip_protocol=protocol, cidr_ipv4=cidr, description=name,
                    opts=self._opts, **port_range(port, protocol))
        balanced = admit_balancers(self._name, group.id, args.api_port, args.balanced_ports,
                                   args.balancer_group, args.public_balancer_group, self._opts)
        warn_over_rules_quota(f"{self._name}-sg",
                              sum(len(cidrs) for *_, cidrs in rules) + balanced, self)
        # Packages, images and the distribution's release are fetched from the internet.
        aws.vpc.SecurityGroupEgressRule(
            f"{self._name}-egress", security_group_id=group.id, ip_protocol="-1",
            cidr_ipv4="0.0.0.0/0", description="all outbound", opts=self._opts)
        return group

    def _create_ssh_host_key(self) -> None:
        """An SSH host key made here, installed by the instance at boot from a SecureString:
        its public half is known before the instance exists, so SSH to it is verified
        (`ssh_host_public_key`, the stack output `controlPlaneSshHostKey`). A control plane
        created before the program made its key keeps its own: `aws.controlPlane.sshHostKey`
        names it."""
        key = tls.PrivateKey(f"{self._name}-ssh-host-key", algorithm="ED25519", opts=self._opts)
        self.ssh_host_key_parameter = secret_parameter(
            f"{self._name}-ssh-host-key", self._parameter("ssh-host-key"),
            key.private_key_openssh, self._tags(), self._opts, self._args.secrets_key)
        self._made_host_public_key = key.public_key_openssh.apply(str.strip)
        configured = self._args.aws.control_plane.ssh_host_key
        self.ssh_host_public_key: pulumi.Input[str] = (
            configured if configured else self._made_host_public_key)

    def _parameter(self, secret: str) -> str:
        if self._args.index:
            return ssm_paths.controller_secret(self._args.cluster_name, self.host.name, secret)
        return ssm_paths.control_plane_secret(self._args.cluster_name, secret)

    def _store_boot_secrets(self) -> list[aws.ssm.Parameter]:
        """The SecureStrings its boot reads beyond those `launch` stores: its SSH host key;
        the first's CA key and the cluster's secrets (`shared_parameters`, which the
        others read too where their join needs them); the others', those of the first."""
        args, boot, name = self._args, self._args.boot, self._name
        self.shared_parameters: list[aws.ssm.Parameter] = []
        reads = [self.ssh_host_key_parameter]
        if boot is None:
            return reads
        if args.index:
            return reads + list(args.shared_parameters)
        self.ca_key_parameter = secret_parameter(
            f"{name}-ca-key", self._parameter("ca-key"), boot.pki.ca_private_key_pem,
            self._tags(), self._opts, args.secrets_key)
        self.shared_parameters = [
            secret_parameter(f"{name}-{secret}", self._parameter(secret), value, self._tags(),
                             self._opts, args.secrets_key)
            for secret, value in {**boot.secrets, **boot.stored}.items()]
        return reads + [self.ca_key_parameter, *self.shared_parameters]

    def _create_boot_profile(self, reads: Sequence[aws.ssm.Parameter]) -> aws.iam.InstanceProfile:
        """What the instance reads at boot, readable by its role only: its bundle and plan,
        and `reads`."""
        return boot_profile(f"{self._name}-role", self._role, reads,
                            ssm_paths.boot_status(self._args.cluster_name, self.host.name),
                            self._opts, self._machine_boot.object_arns)

    def _boot(self) -> MachineBoot:
        """Its SSH host key; on cloud, then host settings and the controller: the first
        with the program's CA, the others joining it (reading the first's secrets and,
        where the distribution issues one, their join token); the same scripts the hybrid
        layout runs over SSH. Every secret is read from SSM, never put in user data or the
        plan."""
        args, boot, host = self._args, self._args.boot, self.host
        steps = [HostStep("install-ssh-host-key", INSTALL_SSH_HOST_KEY, {
            "SSH_HOST_KEY_SSM_PARAMETER": self._parameter("ssh-host-key"),
            "SSH_HOST_PUBLIC_KEY": self._made_host_public_key,
        })]
        if boot is not None:
            distribution = boot.distribution
            sans = [*([self.user_address] if self.user_address is not None else []),
                    *args.api_names]
            if args.index == 0:
                access = distribution.ca_key_from_ssm_env(self._parameter("ca-key"))
            elif distribution.create_controller_token is not None:
                access = distribution.controller_join_from_ssm_env(
                    self._parameter(ssm_paths.CONTROLLER_JOIN_TOKEN))
            else:
                access = {}
            steps += boot.preparation
            if args.index == 0 and args.balancer_address is not None:
                steps.append(HostStep("refuse-second-cluster", REFUSE_SECOND_CLUSTER, {
                    "API_ADDRESS": args.balancer_address, "API_PORT": str(args.api_port),
                    "CONTROLLER_FILE": distribution.controller_file}))
            steps += [
                HostStep("install-controller", distribution.install_controller, {
                    **distribution.controller_env(host, boot.pki.ca_cert_pem,
                                                  pulumi.Output.all(*sans)),
                    **access,
                    **distribution.cluster_secrets_from_ssm_env({
                        name: ssm_paths.control_plane_secret(args.cluster_name, name)
                        for name in boot.secrets}),
                }),
                *boot.after_install.get(host.name, ()),
            ]
        report = BootReport(args.aws.region, ssm_paths.boot_status(args.cluster_name, host.name))
        return machine_boot(self._name, host.name, steps, args.boot_store, report,
                            cloud_config(host.name), self._opts)

    def _create_instance(self, boot: MachineBoot, profile: aws.iam.InstanceProfile,
                         after: Sequence[pulumi.Resource]) -> aws.ec2.Instance:
        spec = self._args.aws.control_plane
        # A changed public_key forces a new key pair (terraform-provider-aws
        # internal/service/ec2/ec2_key_pair.go: public_key ForceNew) while the instance
        # ignores its key_name below: a rotated sshPrivateKey keeps the key pair, which only
        # seeded authorized_keys at first boot (ssh.authorizedKeys carries the new key).
        key = aws.ec2.KeyPair(f"{self._name}-key", public_key=self._args.ssh_public_key,
                              tags=self._tags(),
                              opts=pulumi.ResourceOptions.merge(self._opts, pulumi.ResourceOptions(
                                  ignore_changes=["publicKey"])))
        self.image = spec.ami or pinned_image(versions.UBUNTU_IMAGE_OWNER,
                                              versions.UBUNTU_IMAGE_NAME, parent=self)
        return aws.ec2.Instance(
            f"{self._name}-instance",
            ami=self.image,
            instance_type=spec.instance_type,
            subnet_id=self._args.network.subnet_ids[self._args.index],
            private_ip=self.private_ip,
            # Its way out from the first boot on, before an Elastic IP is associated (and
            # with none): the subnet is public, but an internet gateway serves only
            # instances that have a public address. AWS releases it when an Elastic IP
            # is associated.
            associate_public_ip_address=True,
            vpc_security_group_ids=[self.security_group.id, *(
                [self._args.peers_group] if self._args.peers_group is not None else [])],
            key_name=key.key_name,
            iam_instance_profile=profile.name,
            # On hybrid it forwards between the VPN and the VPC.
            source_dest_check=self._vpn is None,
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_tokens="required", http_endpoint="enabled", http_put_response_hop_limit=1),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                volume_size=spec.root_volume_gb, volume_type="gp3", encrypted=True,
                delete_on_termination=True),
            # The host name (the node is named after it) and the boot steps; no secret
            # ever goes here.
            user_data_base64=boot.user_data,
            tags=self._tags(),
            # Each of these forces a replacement, which would wipe the running control plane
            # and could not keep its private address (terraform-provider-aws
            # internal/service/ec2/ec2_instance.go marks ami, key_name and
            # associate_public_ip_address ForceNew): a new image, a rotated SSH key (the key
            # pair only seeds authorized_keys at first boot) and instances made before the
            # public address was set keep the running machine. cloud-init runs user data
            # once, so a changed boot script applies to a new instance only.
            # It fetches its bundle and plan as it boots. A raised generation
            # (aws.controlPlane.generations) replaces it, the old one first: its fixed
            # private address can be on one instance only.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*boot.objects, *after],
                replacement_trigger=self.host.generation or None, delete_before_replace=True,
                ignore_changes=["ami", "keyName", "associatePublicIpAddress", "userData",
                                "userDataBase64"]),
        )

    def _route_lan_through_instance(self) -> list[aws.ec2.Route]:
        """The on-prem LAN, and the tunnel the gateway and admins send from, are reached
        through the instance (the VPN server), from every subnet of the VPC's nodes: the
        controllers' and, on hybrid with pools, the pools' (with egress nat their own
        table). No route to the pod network: every CNI the program runs crosses between
        the VPC and the LAN in an overlay between node addresses (Canal's and Calico's
        VXLAN; kube-router's IP in IP between nodes of different subnets,
        components/distributions/k0s.py CNI_FIREWALL_PORTS)."""
        vpn = self._vpn
        if vpn is None:
            return []
        destinations = {"lan": self._args.lan_cidr}
        if vpn.mode == "server-on-ec2":
            destinations["tunnel"] = vpn.tunnel_cidr
        return [
            aws.ec2.Route(f"{self._name}-route-{what}-{index}", route_table_id=table,
                          destination_cidr_block=cidr,
                          network_interface_id=self.instance.primary_network_interface_id,
                          opts=self._opts)
            for what, cidr in destinations.items()
            for index, table in enumerate([*self._args.network.route_table_ids,
                                           *self._args.pool_route_table_ids])
        ]


def cloud_config(hostname: str) -> str:
    return f"#cloud-config\nhostname: {hostname}\npreserve_hostname: false\n"
