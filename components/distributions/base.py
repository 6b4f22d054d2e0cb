"""What a Kubernetes distribution gives the rest of the program: the scripts that install,
join, upgrade and reset a node (admitting and removing one is the same for every
distribution: scripts/node/, given kubectl and controller_file), the inputs those scripts
take, the ports its control plane needs, how workers get their join tokens, and how the
NVIDIA runtime reaches its containerd. Nothing outside components/distributions/ knows which distribution it is."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional, Protocol

import pulumi

from components.common.step_text import SSM_READER, Script
from components.distributions.registry_mirror import RegistryFile
from config import versions
from config.images import ImageMirror
from config.control_plane import ControlPlaneEndpoint
from config.kubernetes import KubernetesSettings
from config.hosts import Host, WorkerPool
from config.model import HostTuning


@dataclass(frozen=True)
class DistributionSettings:
    """What a distribution reads of the stack config, gathered once by
    components/distributions/__init__.py distribution_settings."""

    cluster_name: str
    # The distribution, its version, the API's port and certificate names.
    kubernetes: KubernetesSettings
    # network.podCidr, serviceCidr, cni.
    pod_cidr: str
    service_cidr: str
    cni: str
    # The CNI's MTU (0: detected), below the VPN tunnel's on hybrid (StackConfig.cni_mtu).
    cni_mtu: int
    # Its kubelet settings: resolvConf and the CPU manager.
    tuning: HostTuning
    # nvidia.defaultRuntime: `nvidia` as GPU nodes' default container runtime.
    nvidia_default_runtime: bool
    # Where nodes reach the API and the server (config/control_plane.py).
    endpoint: ControlPlaneEndpoint
    # The configured hosts' addresses, and whether pools' instances (addresses not known in
    # advance) join too: what the CNI's interface can be pinned by.
    host_addresses: tuple[str, ...]
    has_pools: bool
    # Hybrid with pools: the subnets the pools' instances get addresses in, which the
    # CNI's pinning takes too (config/cloud.py pool_subnet_cidrs); empty elsewhere.
    pool_cidrs: tuple[str, ...] = ()
    # The sha256 the scripts require of kubernetes.version's release file, by architecture
    # (config/release_pins.py: the pins of config/versions.py, `versions.releaseSha256`).
    release_sha256: Mapping[str, str] = field(default_factory=dict)
    # versions.airgapBundleSha256: the release's image bundle each node installs; empty: none.
    airgap_bundle_sha256: Mapping[str, str] = field(default_factory=dict)
    # The public issuer of service-account tokens (config/storage.py
    # service_account_issuer), or None: the distribution's own.
    service_account_issuer: Optional[str] = None
    # The AWS cloud controller manager runs (components/distributions/__init__.py
    # runs_aws_cloud_controller): the EC2 nodes' kubelets (the controllers', the pools')
    # run with cloud provider external and their providerID; on-prem hosts keep the default.
    aws_cloud_provider: bool = False

    def release_env(self, prefix: str) -> dict[str, str]:
        """version_env of a distribution whose scripts read PREFIX_VERSION,
        PREFIX_SHA256_<ARCH> (empty where none is pinned: node/lib.sh refuses that
        architecture), PREFIX_RELEASE_URL (kubernetes.releaseUrl, only when set) and
        PREFIX_AIRGAP_SHA256_<ARCH> (versions.airgapBundleSha256, the architectures it pins)."""
        url = self.kubernetes.release_url
        return {f"{prefix}_VERSION": self.kubernetes.version,
                **{f"{prefix}_SHA256_{arch.upper()}": self.release_sha256.get(arch, "")
                   for arch in versions.RELEASE_ARCHITECTURES},
                **({f"{prefix}_RELEASE_URL": url} if url else {}),
                **{f"{prefix}_AIRGAP_SHA256_{arch.upper()}": sha256
                   for arch, sha256 in sorted(self.airgap_bundle_sha256.items())}}


@dataclass(frozen=True)
class JoinToken:
    """A worker's join token, and the URN of the step that issued it: the join names it
    when the API refuses the token, as `pulumi up --replace` on it issues a new one."""
    value: pulumi.Output[str]
    issued_by: pulumi.Output[str]


# A port a node or the control plane must accept: (number, "tcp" or "udp").
Port = tuple[int, str]

# kube-apiserver's --enable-admission-plugins names plugins "in addition to default enabled
# ones" (kube-apiserver reference); this one is off by default (kubernetes
# pkg/kubeapiserver/options/plugins.go, DefaultOffAdmissionPlugins). A pod that requests an
# extended resource such as nvidia.com/gpu gets the toleration key=<resource>, operator
# Exists, effect NoSchedule (kubernetes plugin/pkg/admission/extendedresourcetoleration/
# admission.go, Admit), so GPU pods tolerate GPU nodes' nvidia.com/gpu:NoSchedule taint
# without the `nvidia` RuntimeClass lending it to pods that request no GPU.
GPU_TOLERATION_PLUGIN = "ExtendedResourceToleration"


def read_at_boot(name: str, parameter: str) -> dict[str, str]:
    """Input `name` as an instance reads it at boot: empty, and the SSM SecureString that
    holds it as <name>_SSM_PARAMETER."""
    return {name: "", f"{name}_SSM_PARAMETER": parameter}


class PrefixedInputs:
    """The inputs a distribution's scripts read under its own prefix (K0S_, RKE2_): the
    release (DistributionSettings.release_env) and the cluster CA's key (<PREFIX>_CA_KEY)."""

    input_prefix: str
    settings: DistributionSettings

    def version_env(self) -> dict[str, str]:
        return self.settings.release_env(self.input_prefix)

    def ca_key_env(self, ca_key_pem: pulumi.Input[str]) -> dict:
        return {f"{self.input_prefix}_CA_KEY": ca_key_pem}

    def ca_key_from_ssm_env(self, parameter: str) -> dict:
        return read_at_boot(f"{self.input_prefix}_CA_KEY", parameter)

    def cloud_provider_env(self, on_ec2: bool) -> dict[str, str]:
        """<PREFIX>_CLOUD_PROVIDER: an EC2 node's kubelet with the external cloud provider
        and its providerID, which SSM_READER reads from IMDS (node/lib.sh
        read_aws_provider_id), where the AWS cloud controller manager runs (k0s's
        `--enable-cloud-provider`, docs/cloud-providers.md:14 at v1.36.3+k0s.2, "You must
        enable cloud provider mode for kubelet"; RKE2's `cloud-provider-name: external`,
        rke2/lib.sh rke2_configure_cloud_provider); an on-prem host's (hybrid) keeps none."""
        if not (on_ec2 and self.settings.aws_cloud_provider):
            return {}
        return {f"{self.input_prefix}_CLOUD_PROVIDER": "aws", "SSM_READER": SSM_READER.text()}


# kube-apiserver --service-account-issuer: "When this flag is specified multiple times, the
# first is used to generate tokens and all are used to determine which issuers are
# accepted" (https://kubernetes.io/docs/reference/command-line-tools-reference/
# kube-apiserver/); --service-account-jwks-uri is where the discovery document says the
# keys are (pkg/serviceaccount/openidmetadata.go, JWKSPath).
def jwks_uri(issuer: str) -> str:
    return f"{issuer}/openid/v1/jwks"


def admission_plugins(distribution_defaults: Sequence[str]) -> str:
    """--enable-admission-plugins: the distribution's own list, which a value of ours
    replaces, and the GPU toleration plugin."""
    return ",".join(dict.fromkeys([*distribution_defaults, GPU_TOLERATION_PLUGIN]))


class Distribution(Protocol):
    name: str
    install_controller: Script
    join_worker: Script
    reset_node: Script
    # Run on the controller for each worker right before its join; prints the token. None:
    # every node joins with the one token of shared_join_token, and so do pools.
    create_join_token: Optional[Script]
    # Run on the first controller right before another controller joins it (install_controller
    # with controller_join_env); prints that controller's join token. None: a joining
    # controller is admitted by the cluster_secrets alone.
    create_controller_token: Optional[Script]
    # On the controller: a command printing a new worker join token that expires, the
    # lifetime (e.g. 24h) appended: what the controller's rotation stores for the pools.
    pool_token_command: str
    # On the controller: prints the public key service-account tokens are signed with (PEM).
    service_account_key: Script
    apply_worker_profile: Script
    # With several controllers: on a controller before its install step, refuses unless
    # every etcd member is healthy (etcd_quorum); on the first, once another joined, waits
    # for its member to be healthy (etcd_member), and before that one's reset its member
    # leaves etcd (leave_etcd).
    etcd_quorum: Script
    etcd_member: Script
    leave_etcd: Script
    # Whether the distribution holds the endpoint's VIP on its controllers itself (k0s's
    # control plane load balancing); otherwise the program's keepalived does
    # (components/hosts/vip.py).
    serves_vip: bool
    # The ports beyond the API's that a load balancer in front of several controllers
    # forwards (nodes' joins, their tunnels, controllers joining): name -> (port, protocol).
    load_balanced_ports: Mapping[str, tuple[int, str]]
    # On a worker host: installs the distribution before its join, upgrades it after
    # drain-node (version_env's inputs).
    upgrade_node: Script
    # The file under components/scripts/ whose functions take and restore a snapshot of the
    # control plane's state (cluster_state_snapshot, cluster_state_restore) for backups.
    cluster_state: str
    # The controller runs a kubelet even when it runs no workloads (RKE2's servers; k0s's
    # controllers on the AWS layouts, the cloud controller manager's and cluster-autoscaler's
    # home).
    controller_runs_kubelet: bool
    # That kubelet takes new settings only from the kubelet settings step
    # (worker_profile_env), which then runs on the controllers too.
    controller_profile_step: bool
    # The labels a controller's node carries (where the AWS cloud controller manager runs);
    # empty where a controller is no node.
    controller_node_labels: Mapping[str, str]
    # kubectl on the controller with its admin credential, by absolute path for systemd
    # units.
    kubectl_path: str
    # kubectl on a worker with its kubelet's credential, by absolute path: how a step on
    # the host reads its own Node (reboot-if-needed: is it drained).
    node_kubectl: str
    controller_service: str
    # A file the controller has while it is installed and its reset removes: node removal
    # (node/remove-node.sh) is a no-op without it.
    controller_file: str
    # The systemd units that run a node, controller or worker: a host with one of them
    # installed is in the cluster (reboot-if-needed leaves it alone).
    node_services: Sequence[str]
    kubelet_root_dir: str
    containerd_dropin_dir: str
    # Ports beyond the API's that nodes reach the control plane at: name -> (port,
    # protocol). The names become the security group rules' names.
    control_plane_ports: Mapping[str, Port]
    # Ports the control plane reaches nodes at (EC2 nodes open them to the VPC).
    node_ports: Mapping[str, Port]
    # Secrets the program generates for the cluster (random, kept in its state), by name:
    # given to install-controller (cluster_secrets_env) and to shared_join_token.
    cluster_secrets: Sequence[str]
    # Those of them that only admit joins, renewed when kubernetes.joinTokenGeneration is
    # raised (the others cannot change once the cluster runs).
    join_secrets: Sequence[str]

    # Names (NetworkManager's interface-name globs) of the interfaces the CNI makes on a node,
    # which NetworkManager must leave alone (prepare-host); none where the CNI names none.
    cni_interfaces: Sequence[str]

    def host_firewall_ports(self, host: Host) -> Mapping[str, Port]:
        """The ports `host` answers the cluster's nodes on and nobody else (the host
        firewall, components/hosts/firewall.py), by name: its control plane's beyond the
        API and its node's, for the CNI the settings choose. Not the API's port, nor
        NodePorts: users reach those."""

    @property
    def overlay_between_subnets(self) -> Mapping[str, Port]:
        """IP protocols without ports the CNI carries pods' packets in between nodes of
        different subnets (an EC2 pool's and an on-prem node on hybrid), by name: (0,
        protocol number); none where its overlay is a port of host_firewall_ports."""

    def node_env(self, node: Host | WorkerPool, node_ip: str) -> dict[str, str]: ...

    def version_env(self) -> dict[str, str]:
        """The release to install: upgrade_node's inputs, also part of node_env (a pool's
        instance installs at boot) and of controller_env."""

    def controller_env(self, host: Host, ca_cert_pem: pulumi.Input[str],
                       extra_sans: pulumi.Input[Sequence[str]] = ()) -> dict: ...

    def controller_join_env(self, token: Optional[JoinToken]) -> dict:
        """install_controller's inputs beyond controller_env (and the cluster_secrets) on a
        controller that joins the first one (endpoint.joins): the token create_controller_token
        printed, or none. A joining controller gets the CA from the cluster it joins, never
        ca_key_env."""

    def controller_join_from_ssm_env(self, parameter: str) -> dict:
        """The same token, read by the instance at boot from the SSM SecureString
        `parameter` (where create_controller_token is not None)."""

    def ca_key_env(self, ca_key_pem: pulumi.Input[str]) -> dict:
        """The cluster CA's key for install-controller on the first controller, given over
        SSH."""

    def ca_key_from_ssm_env(self, parameter: str) -> dict:
        """The same, read by the instance at boot from an SSM SecureString."""

    def cluster_secrets_env(self, secrets: Mapping[str, pulumi.Input[str]]) -> dict:
        """The cluster_secrets for install-controller, given over SSH."""

    def cluster_secrets_from_ssm_env(self, parameters: Mapping[str, str]) -> dict:
        """The same, each read at boot from the SSM SecureString named for it."""

    def join_env(self, token: JoinToken) -> dict:
        """join-worker's token inputs, over SSH."""

    def join_from_ssm_env(self, parameter: str) -> dict:
        """The same, read by a pool's instance at boot from an SSM SecureString."""

    def shared_join_token(self, api_endpoint: str, ca_cert_pem: str,
                          secrets: Mapping[str, str]) -> str:
        """The join token every node shares, from the cluster_secrets the program made.
        Only a distribution whose create_join_token is None has one (its pools join with
        it too); the others' pools join with the controller's rotated tokens."""

    def worker_profile_values(self) -> str: ...

    def worker_profile_env(self, host: Host) -> dict[str, str]:
        """apply-worker-profile's inputs on `host` (the controller's own, when
        controller_runs_kubelet)."""

    def nvidia_runtime_dropin(self) -> Optional[str]:
        """The containerd drop-in adding the `nvidia` runtime, or None when the
        distribution adds it by itself."""

    def runtime_class_wait(self, name: str) -> Optional[tuple[Script, dict[str, str]]]:
        """None when the program creates RuntimeClass `name`. Otherwise the distribution
        installs its own, and this step on the controller (its script and inputs) waits
        until it has: the program then patches that object instead of creating one."""

    # A folder of containerd host namespaces the mirror's step owns ("" for none).
    registry_hosts_dir: str
    # Units restarted when the registry files change (none: read at every pull).
    registry_services: Sequence[str]

    def registry_files(self, mirror: ImageMirror, upstreams: Sequence[str]) -> list[RegistryFile]:
        """The files that send `upstreams`' pulls through the image mirror
        (components/distributions/registry_mirror.py)."""
