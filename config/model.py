"""Typed model of the whole stack config (`gpu-cluster:*` keys). Every default lives here.

Field names are snake_case in Python and camelCase in the stack file, e.g.
`gpu-cluster:network` -> `lanCidr`. A section is registered here twice, once as a field of
StackConfig and once with its rules across keys in CROSS_CHECKS, which run on whatever
validated (config/partial.py), so every problem is reported at once.
"""

import re
from typing import Literal, Optional

from pydantic import Field, SecretStr, field_validator, model_validator

from contract import ports

from config import checks, versions
from config.access import AccessSettings
from config.aws_checks import cloud_checks, hybrid_checks
from config.autoscaling import AutoscalingSettings, autoscaling_checks
from config.backup import BackupSettings, backup_checks
from config.cloud import AwsSettings, VpnSettings
from config.control_plane import ControlPlaneEndpoint, control_plane_endpoint
from config.control_plane_checks import control_plane_checks
from config.firewall import HostFirewallSettings, firewall_checks
from config.hosts import Host, WorkerPool
from config.image_checks import image_checks
from config.images import ImageMirror, ImagesSettings
from config.kubeflow import KubeflowSettings
from config.kubeflow_checks import kubeflow_checks
from config.kubernetes import KubernetesSettings
from config.model_base import Section
from config.monitoring import MonitoringSettings, monitoring_checks
from config.queues import queue_checks
from config.mpi import MpiSettings
from config.release_pins import VersionOverrides, release_pin_checks
from config.storage import StorageSettings, storage_checks
from config.timesync import TimeSettings
from config.types import (
    AbsolutePath,
    AuthorizedKey,
    DnsLabel,
    DownloadUrl,
    HostOrIp,
    IPv4Cidr,
    Port,
    MultiLineSecret,
    SshPublicKey,
    UserName,
)

Layout = Literal["bare-metal", "hybrid", "cloud"]


class NetworkSettings(Section):
    lan_cidr: Optional[IPv4Cidr] = None
    """The on-prem LAN (required on bare-metal and hybrid; none on cloud); every host address must
    be inside it."""
    pod_cidr: IPv4Cidr = "10.244.0.0/16"
    """Pod network; must not overlap the others."""
    service_cidr: IPv4Cidr = "10.96.0.0/12"
    """Service network; must not overlap the others."""
    cni: Literal["calico", "kuberouter"] = "calico"
    """k0s: `calico` (VXLAN, node address pinned per host) or `kuberouter`; RKE2 always runs
    Canal."""
    # 0 lets the CNI detect it; set it below the smallest link MTU (tunnels, jumbo frames).
    mtu: int = Field(default=0, ge=0, le=9000)
    """CNI MTU; 0 lets the CNI detect it; set it below tunnel/link MTUs."""

    @field_validator("mtu")
    @classmethod
    def _mtu_range(cls, value: int) -> int:
        if value and value < 1280:
            raise ValueError("must be 0 (detect) or at least 1280")
        return value


class Bastion(Section):
    host: HostOrIp
    """Jump host to reach the hosts through."""
    port: Port = ports.SSH
    """Jump host SSH port."""
    user: Optional[UserName] = None
    """Jump host user; unset: `ssh.user`."""
    host_key: Optional[SshPublicKey] = None
    """The jump host's SSH host key (`ssh-ed25519 AAAA...` or ECDSA; not RSA), from `ssh-keyscan -t
    ed25519 HOST` with its fingerprint checked out of band ([SSH host
    keys](layouts.md#ssh-host-keys)); unset only with `ssh.acceptAnyHostKey`."""


class SshSettings(Section):
    user: UserName = "ubuntu"
    """SSH user on the hosts (needs passwordless sudo); a login name as useradd(8) allows:
    `[a-z_][a-z0-9_-]*[$]?`, at most 32 characters, as are the other users."""
    port: Port = ports.SSH
    """SSH port on the hosts."""
    bastion: Optional[Bastion] = None
    """A jump host the program reaches the hosts through; unset: none."""
    dial_error_limit: int = Field(default=10, ge=1, le=1000)
    """Connection attempts before a step fails."""
    per_dial_timeout_seconds: int = Field(default=15, ge=1, le=600)
    """Timeout of each connection attempt."""
    # Public keys the authorized-keys step keeps on every host reached over SSH, beside
    # the user's own (docs/day-2.md, "Rotating credentials").
    authorized_keys: list[AuthorizedKey] = Field(default=[], max_length=100)
    """Extra OpenSSH public keys (`ssh-ed25519 AAAA... comment`, at most 100) kept in the SSH user's
    `authorized_keys` on every host reached over SSH ([Rotating
    credentials](day-2.md#rotating-credentials))."""
    # Public keys the same step takes out of authorized_keys wherever they are (an old key
    # once the program logs in with the new one).
    revoked_keys: list[AuthorizedKey] = Field(default=[], max_length=100)
    """OpenSSH public keys taken out of the SSH user's `authorized_keys` on every host reached over
    SSH, wherever they are (never one of `ssh.authorizedKeys` or the public half of
    `sshPrivateKey`)."""
    # true: connect to hosts and the bastion that have no host key set, accepting any key
    # they show (pulumi-command remembers none); the preview warns. Off, a stack without
    # every host key is refused (config/checks.py).
    accept_any_host_key: bool = False
    """`true` connects to hosts and a bastion without a host key set, accepting any key they show
    (no check, not even on first use); the preview warns, naming it and the hosts."""


class HostTuning(Section):
    # IOMMU off lets GPUs talk peer-to-peer (multi-GPU training).
    disable_iommu: bool = True
    """`intel_iommu=off amd_iommu=off` for GPU peer-to-peer."""
    # Spectre/Meltdown mitigations cost GPU hosts real throughput; opt-in only.
    disable_cpu_mitigations: bool = False
    """`mitigations=off`; opt in only on hosts one team uses: with two teams or more every host that
    runs workloads is shared (no team is bound to a node) and the preview warns, naming the key and
    the hosts."""
    extra_kernel_args: list[str] = []
    """More kernel arguments."""
    # Kubeflow's many watchers exhaust the defaults ("too many open files").
    inotify_max_user_instances: int = Field(default=2280, ge=128)
    """`fs.inotify.max_user_instances` (Kubeflow)."""
    inotify_max_user_watches: int = Field(default=1255360, ge=8192)
    """`fs.inotify.max_user_watches` (Kubeflow)."""
    cpu_manager_policy: Literal["none", "static"] = "none"
    """Kubelet CPU manager; `static` pins CPUs for guaranteed pods. Changing it on a running
    cluster: drain each worker when `pulumi up` asks (see `apply-worker-profile`)."""
    reserved_cpus: Optional[str] = None
    """CPUs kept for the system with `static`, e.g. `0-1` (then required)."""
    # The real upstream resolvers, not systemd-resolved's 127.0.0.53 stub (DNS loops in pods).
    kubelet_resolv_conf: AbsolutePath = "/run/systemd/resolve/resolv.conf"
    """The resolv.conf of pods: the real resolvers, not the 127.0.0.53 stub."""
    min_free_disk_gb: int = Field(default=50, ge=1)
    """Free space preflight requires under `/var/lib`."""
    install_nfs_client: bool = True
    """Install `nfs-common` for NFS volumes."""
    # Reboot a host that is not in the cluster yet when its steps need it (kernel
    # arguments, the NVIDIA driver, nouveau), and check it before it joins. False leaves
    # reboots to you: the check then only warns while one is pending.
    reboot_when_needed: bool = True
    """Reboot a host not yet in the cluster when its steps need it (kernel arguments, the NVIDIA
    driver, nouveau), before it joins; `false` leaves reboots to you."""
    reboot_timeout_seconds: int = Field(default=900, ge=60, le=3600)
    """How long `pulumi up` waits for a rebooting host to answer SSH again."""

    @field_validator("extra_kernel_args")
    @classmethod
    def _kernel_args(cls, value: list[str]) -> list[str]:
        bad = [arg for arg in value if not re.fullmatch(r"[A-Za-z0-9_.,:=/+-]{1,1024}", arg)]
        if bad:
            raise ValueError(f"kernel arguments must be single words without quotes: {bad}")
        return value

    @field_validator("reserved_cpus")
    @classmethod
    def _cpuset(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", value):
            raise ValueError(f"'{value}' is not a CPU list like 0-1 or 0,2")
        return value


class NvidiaSettings(Section):
    install_driver: bool = True
    """Install the pinned driver branch on GPU hosts; `false` keeps each host's own driver, of any
    branch, which preflight requires and names (see [Upgrading the NVIDIA
    driver](day-2.md#upgrading-the-nvidia-driver))."""
    # The pinned NVIDIA Container Toolkit and containerd's `nvidia` runtime on GPU hosts,
    # which the device plugin's and the DCGM exporter's pods run with (RuntimeClass
    # `nvidia`); false leaves both to the host (the preview warns).
    install_toolkit: bool = True
    """Install the pinned container toolkit and containerd's `nvidia` runtime on GPU hosts (the
    device plugin's and the DCGM exporter's pods run with it), with or without the driver; `false`
    leaves both to the hosts and the preview warns, naming the key; refused while the program
    installs the driver."""
    driver_branch: str = Field(
        default=versions.NVIDIA_DRIVER_BRANCH, pattern=r"^\d{3}$")
    """NVIDIA driver branch: Ubuntu's `nvidia-headless-<branch>-server`; on the RHEL 9 family the
    `nvidia-driver:<branch>-open` module stream of NVIDIA's CUDA repository."""
    container_toolkit_version: str = Field(
        default=versions.NVIDIA_CONTAINER_TOOLKIT, pattern=r"^\d+\.\d+\.\d+(-\d+)?$")
    """The version of `nvidia-container-toolkit`: its apt version, and on the RHEL 9 family its RPM
    `VERSION-RELEASE` (NVIDIA publishes both as `<version>-1`)."""
    default_runtime: bool = False
    """Make `nvidia` containerd's default runtime on GPU hosts."""
    apt_mirror: Optional[DownloadUrl] = None
    """A mirror of NVIDIA's container toolkit repository (`https://...` or `file:///path` with its
    `gpgkey`, `stable/deb/` and, for RHEL 9 family hosts, `stable/rpm/`) instead of
    `nvidia.github.io`; the key is still checked against the pinned fingerprint."""

    def for_host(self, host: "Host") -> tuple[bool, bool]:
        """(install the driver, install the toolkit and runtime) on `host`: its own
        installDriver / installToolkit, else the stack's."""
        driver = self.install_driver if host.install_driver is None else host.install_driver
        toolkit = self.install_toolkit if host.install_toolkit is None else host.install_toolkit
        return driver, toolkit


class PackageSettings(Section):
    # A mirror of Ubuntu's archive (the layout of archive.ubuntu.com/ubuntu) that hosts' apt
    # reads instead of the sources their image came with (configure-apt.sh); packages are
    # still checked against Ubuntu's archive key. Security updates come from
    # aptSecurityMirror, or from aptMirror when that is not set.
    apt_mirror: Optional[DownloadUrl] = None
    """A mirror of Ubuntu's archive (the layout of `archive.ubuntu.com/ubuntu`; `https://...` or
    `file:///path`) that every machine's apt reads instead of its image's sources, still checked
    against Ubuntu's archive key; removing it restores the original file (see [Image
    mirror](distributions.md#image-mirror))."""
    apt_security_mirror: Optional[DownloadUrl] = None
    """Where the `<codename>-security` suite comes from; needs `packages.aptMirror`; unset:
    `packages.aptMirror`."""

    # RHEL 9 family hosts: EPEL 9 and the CodeReady Linux Builder repository it needs
    # (configure-dnf.sh), for dkms, openvpn and age (os/lib.sh OS_PACKAGES).
    epel: bool = False
    """On RHEL 9 family hosts, add EPEL 9 (the Fedora community's repository; dkms for the NVIDIA
    driver, openvpn, age), checked against its pinned key, and enable CRB, which EPEL's packages
    need; the preview warns. Ubuntu hosts are left alone; removing it undoes both."""
    epel_mirror: Optional[DownloadUrl] = None
    """A mirror of EPEL (the layout of `dl.fedoraproject.org/pub/epel`: `RPM-GPG-KEY-EPEL-9` and
    `9/Everything/<arch>/`) instead of Fedora's mirror list; the key is still checked against
    the pinned fingerprint; needs `packages.epel`."""

    @model_validator(mode="after")
    def _mirrors_need_their_repository(self) -> "PackageSettings":
        if self.apt_security_mirror and not self.apt_mirror:
            raise ValueError("aptSecurityMirror needs aptMirror: apt reads both from the file "
                             "configure-apt writes")
        if self.epel_mirror and not self.epel:
            raise ValueError("epelMirror needs epel: true: configure-dnf adds EPEL only then")
        return self


class GpuSettings(Section):
    time_slicing_replicas: int = Field(default=1, ge=1, le=64)
    """Pods sharing each GPU by time-slicing; 1 gives pods whole GPUs."""
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    """How the device plugin exposes MIG partitions: `none`, `single`, `mixed`."""
    # GPU Feature Discovery labels nodes with GPU model, memory, CUDA and driver versions
    # (needs node-feature-discovery, installed with it).
    feature_discovery: bool = False
    """GPU Feature Discovery (with node-feature-discovery) from the device plugin's pinned chart:
    node labels for GPU model, memory, CUDA and driver versions."""


class StackConfig(Section):
    layout: Layout
    """Where the machines are: `bare-metal` (on-prem hosts only), `hybrid` (an EC2 control plane and
    on-prem hosts, joined by a VPN) or `cloud` (EC2 only); see [Layouts](layouts.md)."""
    # Certificate common names add up to 15 characters ("<cluster>-onprem-gateway") and
    # X.509 allows 64.
    cluster_name: DnsLabel = Field(max_length=49)
    """Names the cluster, its kubeconfig context and resources; a DNS label."""
    kubernetes: KubernetesSettings = KubernetesSettings()
    """The distribution, its version, the API server and upgrades (see
    [Distributions](distributions.md#distributions))."""
    network: NetworkSettings = NetworkSettings()
    """The LAN, pod and service networks, the CNI and its MTU."""
    ssh: SshSettings = SshSettings()
    """How the program reaches the hosts over SSH, and the keys it keeps on them."""
    ssh_private_key: Optional[MultiLineSecret] = None
    """Private key (PEM or OpenSSH) for the hosts and the EC2 key pair; required on every layout."""
    bastion_private_key: Optional[MultiLineSecret] = None
    """Private key for the bastion; unset: `sshPrivateKey`."""
    vpn_client_profile: Optional[MultiLineSecret] = None
    """`client-to-existing` (required): the instance's `.ovpn` profile from the existing server."""
    hosts: list[Host] = []
    """The on-prem machines, by name and LAN address (bare-metal, hybrid)."""
    tuning: HostTuning = HostTuning()
    """Kernel arguments, sysctls, the kubelet's CPU manager and reboots of the hosts."""
    host_firewall: HostFirewallSettings = HostFirewallSettings()
    """The nftables firewall of on-prem hosts: node ports for the nodes only (see [Host
    firewall](layouts.md#host-firewall))."""
    nvidia: NvidiaSettings = NvidiaSettings()
    """The NVIDIA driver and container toolkit on GPU hosts."""
    packages: PackageSettings = PackageSettings()
    """Where hosts find their OS's packages: Ubuntu's archive, EPEL on RHEL 9 family hosts."""
    time: TimeSettings = TimeSettings()
    """The NTP servers every machine's clock follows (see [Image
    mirror](distributions.md#image-mirror), *Time*)."""
    gpu: GpuSettings = GpuSettings()
    """Time-slicing, MIG and GPU Feature Discovery of the device plugin."""
    storage: StorageSettings
    """The volumes' backends: at least one of `nfs`, `efs`, `localPath` (below); the one marked
    `default` is the default StorageClass."""
    mpi: MpiSettings = MpiSettings()
    """The MPI operator and NCCL settings of the acceptance MPIJob."""
    aws: Optional[AwsSettings] = None
    """The AWS side of the hybrid and cloud layouts; unset: no AWS (bare-metal)."""
    vpn: Optional[VpnSettings] = None
    """The OpenVPN bridge between the LAN and the VPC (hybrid); unset: none."""
    pools: list[WorkerPool] = []
    """EC2 GPU worker pools that join the cluster at boot (cloud layout)."""
    autoscaling: AutoscalingSettings = AutoscalingSettings()
    """cluster-autoscaler on the pools (cloud layout): when an idle pool node goes (see
    [Autoscaling](layouts.md#autoscaling))."""
    access: AccessSettings = AccessSettings()
    """Teams' namespaces and quotas, users and their kubeconfigs (see [Teams and
    users](teams.md#teams-and-users))."""
    kubeflow: Optional[KubeflowSettings] = None
    """Kubeflow from the pinned kubeflow/manifests release (see [Kubeflow](kubeflow.md#kubeflow));
    unset: no Kubeflow."""
    kubeflow_password: Optional[SecretStr] = None
    """The deprecated `kubeflow.user`'s password (at least 12 characters) or its bcrypt hash;
    required with `kubeflow.user`."""
    kubeflow_password_hashes: Optional[dict[DnsLabel, SecretStr]] = None
    """Per `access.users` name with an email, the bcrypt hash of their Kubeflow password; required
    for each such user without `kubeflow.connectors`."""
    kubeflow_connector_secrets: Optional[dict[DnsLabel, SecretStr]] = None
    """Per connector `id`, its OIDC client secret or LDAP bind password."""
    kubeflow_tls_key: Optional[MultiLineSecret] = None
    """The PEM private key of `kubeflow.access.tls.certificate`; required with `tls.mode:
    certificate`."""
    backup: BackupSettings = BackupSettings()
    """Scheduled snapshots of the control plane's state (see [Backups](day-2.md#backups))."""
    monitoring: MonitoringSettings = MonitoringSettings()
    """DCGM exporter, kube-state-metrics, Prometheus and Grafana (see
    [Monitoring](monitoring.md#monitoring))."""
    versions: VersionOverrides = VersionOverrides()
    """Beside the pins of `config/versions.py`: checksums of a release it pins none for (see [Supply
    chain](distributions.md#supply-chain))."""
    images: ImagesSettings = ImagesSettings()
    """One image mirror for every node's containerd (see [Image
    mirror](distributions.md#image-mirror))."""
    image_mirror_password: Optional[SecretStr] = None
    """The password or token of `images.mirror.username` (printable ASCII without spaces, `"` or
    `\\`); required with it."""

    @property
    def image_mirror(self) -> Optional[ImageMirror]:
        """images.mirror, or the deprecated kubeflow.imageMirror it replaces (the same
        keys; config/image_checks.py refuses both at once and warns about the old one)."""
        if self.images.mirror is not None:
            return self.images.mirror
        old = self.kubeflow.image_mirror if self.kubeflow is not None else None
        return ImageMirror.model_validate(old.model_dump()) if old is not None else None

    @property
    def cni_mtu(self) -> int:
        """The configured CNI MTU; on hybrid, by default, one that fits through the VPN
        tunnel with VXLAN's 50 bytes (0 lets the CNI detect it)."""
        if self.network.mtu or self.vpn is None:
            return self.network.mtu
        return self.vpn.mtu - 50

    @property
    def controllers(self) -> tuple[Host, ...]:
        """The hosts that run the control plane, in config order (none: it is the EC2
        instance of hybrid and cloud)."""
        return tuple(host for host in self.hosts if host.runs_control_plane)

    @property
    def controller(self) -> Host:
        """The first controller: the one that initialises the cluster."""
        return next(iter(self.controllers))

    @property
    def control_plane_endpoint(self) -> ControlPlaneEndpoint:
        """Where nodes and users reach the API (config/control_plane.py)."""
        return control_plane_endpoint(self.controllers, self.aws, self.kubernetes,
                                      self.network.lan_cidr, self.cluster_name)

    @property
    def workers(self) -> list[Host]:
        """Hosts that only run workloads (a controller+worker host is the controller)."""
        return [host for host in self.hosts if not host.runs_control_plane]


# Each section's rules across keys, from its own module: config/single_pass.py runs them on
# what validated (config/partial.py PartialConfig).
CROSS_CHECKS = (checks.network_checks, checks.host_checks, checks.ssh_checks,
                checks.nvidia_checks, checks.tuning_checks, firewall_checks, storage_checks,
                hybrid_checks, cloud_checks, kubeflow_checks, image_checks, backup_checks,
                monitoring_checks, release_pin_checks, control_plane_checks, queue_checks,
                autoscaling_checks)

# Keys whose value must be set with `pulumi config set --secret`.
SECRET_KEYS = ("sshPrivateKey", "bastionPrivateKey", "vpnClientProfile", "kubeflowPassword",
               "kubeflowTlsKey", "kubeflowPasswordHashes", "kubeflowConnectorSecrets",
               "imageMirrorPassword")
# Secret keys that hold SSH private keys.
PRIVATE_KEY_KEYS = ("sshPrivateKey", "bastionPrivateKey")
