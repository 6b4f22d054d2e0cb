"""Typed model of the whole stack config (`gpu-cluster:*` keys). Every default lives here.

Field names are snake_case in Python and camelCase in the stack file, e.g.
`gpu-cluster:network` -> `lanCidr`. A section is registered here twice, once as a field of
StackConfig and once with its rules across keys in CROSS_CHECKS, which run on whatever
validated (config/partial.py), so every problem is reported at once.
"""

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from contract import ports
from contract.names import CONTROL_PLANE_ROLES, WORKER_ROLES

from config import checks, versions
from config.access import AccessSettings
from config.aws_checks import cloud_checks, hybrid_checks
from config.backup import BackupSettings, backup_checks
from config.cloud import AwsSettings, VpnSettings
from config.firewall import HostFirewallSettings, firewall_checks
from config.image_checks import image_checks
from config.images import ImageMirror, ImagesSettings
from config.kubeflow import KubeflowSettings
from config.kubeflow_checks import kubeflow_checks
from config.kubernetes import KubernetesSettings
from config.model_base import Section
from config.monitoring import MonitoringSettings, monitoring_checks
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
    InterfaceName,
    IPv4,
    IPv4Cidr,
    LabelKey,
    LabelValue,
    Port,
    MultiLineSecret,
    SshPublicKey,
    UserName,
)

Layout = Literal["bare-metal", "hybrid", "cloud"]
Role = Literal["controller", "worker", "controller+worker"]

# Roles whose host runs the Kubernetes control plane / a kubelet: CONTROL_PLANE_ROLES,
# WORKER_ROLES (contract/names.py, which the tools read too).


class NetworkSettings(Section):
    # The on-prem LAN the hosts talk to each other on (bare-metal and hybrid).
    lan_cidr: Optional[IPv4Cidr] = None
    pod_cidr: IPv4Cidr = "10.244.0.0/16"
    service_cidr: IPv4Cidr = "10.96.0.0/12"
    cni: Literal["calico", "kuberouter"] = "calico"
    # 0 lets the CNI detect it; set it below the smallest link MTU (tunnels, jumbo frames).
    mtu: int = Field(default=0, ge=0, le=9000)

    @field_validator("mtu")
    @classmethod
    def _mtu_range(cls, value: int) -> int:
        if value and value < 1280:
            raise ValueError("must be 0 (detect) or at least 1280")
        return value


class Bastion(Section):
    host: HostOrIp
    port: Port = ports.SSH
    # Defaults to gpu-cluster:ssh.user.
    user: Optional[UserName] = None
    # The bastion's SSH host key (`ssh-keyscan -t ed25519 HOST`, its fingerprint checked
    # out of band); required unless ssh.acceptAnyHostKey.
    host_key: Optional[SshPublicKey] = None


class SshSettings(Section):
    user: UserName = "ubuntu"
    port: Port = ports.SSH
    bastion: Optional[Bastion] = None
    # Retries while a host is unreachable (booting, flapping link) before a step fails.
    dial_error_limit: int = Field(default=10, ge=1, le=1000)
    per_dial_timeout_seconds: int = Field(default=15, ge=1, le=600)
    # Public keys the authorized-keys step keeps on every host reached over SSH, beside
    # the user's own (docs/day-2.md, "Rotating credentials").
    authorized_keys: list[AuthorizedKey] = Field(default=[], max_length=100)
    # Public keys the same step takes out of authorized_keys wherever they are (an old key
    # once the program logs in with the new one).
    revoked_keys: list[AuthorizedKey] = Field(default=[], max_length=100)
    # true: connect to hosts and the bastion that have no host key set, accepting any key
    # they show (pulumi-command remembers none); the preview warns. Off, a stack without
    # every host key is refused (config/checks.py).
    accept_any_host_key: bool = False


class Taint(Section):
    key: LabelKey
    value: LabelValue = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


def _unique_taints(taints: list[Taint]) -> list[Taint]:
    # A node refuses to register with two taints of the same key and effect.
    seen = set()
    for taint in taints:
        if (taint.key, taint.effect) in seen:
            raise ValueError(f"taint {taint.key}:{taint.effect} is listed twice; Kubernetes "
                             "allows one taint per key and effect")
        seen.add((taint.key, taint.effect))
    return taints


Taints = Annotated[list[Taint], AfterValidator(_unique_taints)]


def _nvswitch(value):
    # `pulumi config set --path` stores true/false as strings unless told otherwise.
    if isinstance(value, bool) or value == "auto":
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ValueError(f"must be auto, true or false, got {value!r}")


NvSwitch = Annotated[Union[Literal["auto"], bool], BeforeValidator(_nvswitch)]


class Host(Section):
    name: DnsLabel
    # Address on the cluster LAN: the node IP and where the CNI is pinned.
    address: IPv4
    # Where SSH reaches the host, when not at `address`.
    ssh_address: Optional[HostOrIp] = None
    ssh_user: Optional[UserName] = None
    # The host's SSH host key (`ssh-keyscan -t ed25519 ADDRESS`, its fingerprint checked
    # out of band); required unless ssh.acceptAnyHostKey.
    ssh_host_key: Optional[SshPublicKey] = None
    # The NIC that carries `address`; checked by preflight (multi-NIC hosts).
    interface: Optional[InterfaceName] = None
    role: Role = "worker"
    gpus: int = Field(default=0, ge=0, le=64)
    # Written to the node as nvidia.com/gpu.product, the label GPU Feature Discovery uses.
    gpu_model: Optional[LabelValue] = None
    # NVSwitches (HGX A100/H100/H200 boards): their GPUs run CUDA only with NVIDIA Fabric
    # Manager, which install-nvidia installs at the driver's version. auto: when they are on
    # the PCI bus; false: never (it is yours to run).
    nvswitch: NvSwitch = "auto"
    labels: dict[LabelKey, LabelValue] = {}
    taints: Taints = []
    # true: cordon and drain the node (it stays in the cluster); false: uncordon it. Unset:
    # the program leaves the cordon alone.
    maintenance: Optional[bool] = None
    # This host's own answer to nvidia.installDriver / nvidia.installToolkit (unset: the
    # stack's): a vGPU guest or an image that brings its own driver keeps it.
    install_driver: Optional[bool] = None
    install_toolkit: Optional[bool] = None
    # Raised by the user when the machine behind this name is new hardware: its steps run
    # again on it, and the old node object is removed before it joins (README, Day-2).
    generation: int = Field(default=0, ge=0, le=1_000_000)

    @property
    def runs_control_plane(self) -> bool:
        return self.role in CONTROL_PLANE_ROLES

    @property
    def runs_workloads(self) -> bool:
        return self.role in WORKER_ROLES


class HostTuning(Section):
    # IOMMU off lets GPUs talk peer-to-peer (multi-GPU training).
    disable_iommu: bool = True
    # Spectre/Meltdown mitigations cost GPU hosts real throughput; opt-in only.
    disable_cpu_mitigations: bool = False
    extra_kernel_args: list[str] = []
    # Kubeflow's many watchers exhaust the defaults ("too many open files").
    inotify_max_user_instances: int = Field(default=2280, ge=128)
    inotify_max_user_watches: int = Field(default=1255360, ge=8192)
    cpu_manager_policy: Literal["none", "static"] = "none"
    # CPUs kept for the system when cpuManagerPolicy is static, e.g. "0-1".
    reserved_cpus: Optional[str] = None
    # The real upstream resolvers, not systemd-resolved's 127.0.0.53 stub (DNS loops in pods).
    kubelet_resolv_conf: AbsolutePath = "/run/systemd/resolve/resolv.conf"
    min_free_disk_gb: int = Field(default=50, ge=1)
    install_nfs_client: bool = True
    # Reboot a host that is not in the cluster yet when its steps need it (kernel
    # arguments, the NVIDIA driver, nouveau), and check it before it joins. False leaves
    # reboots to you: the check then only warns while one is pending.
    reboot_when_needed: bool = True
    # How long `pulumi up` waits for a rebooting host to answer SSH again.
    reboot_timeout_seconds: int = Field(default=900, ge=60, le=3600)

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
    # The pinned driver branch on GPU hosts; false keeps the host's own (a vGPU guest's
    # GRID driver, an image's), of any branch.
    install_driver: bool = True
    # The pinned NVIDIA Container Toolkit and containerd's `nvidia` runtime on GPU hosts,
    # which the device plugin's and the DCGM exporter's pods run with (RuntimeClass
    # `nvidia`); false leaves both to the host (the preview warns).
    install_toolkit: bool = True
    driver_branch: str = Field(default=versions.NVIDIA_DRIVER_BRANCH, pattern=r"^\d{3}$")
    container_toolkit_version: str = Field(
        default=versions.NVIDIA_CONTAINER_TOOLKIT, pattern=r"^\d+\.\d+\.\d+(-\d+)?$"
    )
    # Make nvidia the node's default container runtime instead of selecting it per pod
    # with the `nvidia` RuntimeClass.
    default_runtime: bool = False
    # A mirror of NVIDIA's container toolkit apt repository (its gpgkey and stable/deb/
    # layout) instead of nvidia.github.io; the key is still checked by fingerprint.
    apt_mirror: Optional[DownloadUrl] = None

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
    apt_security_mirror: Optional[DownloadUrl] = None

    @model_validator(mode="after")
    def _security_needs_the_archive(self) -> "PackageSettings":
        if self.apt_security_mirror and not self.apt_mirror:
            raise ValueError("aptSecurityMirror needs aptMirror: apt reads both from the file "
                             "configure-apt writes")
        return self


class GpuSettings(Section):
    # Pods sharing each GPU by time-slicing; 1 gives every pod whole GPUs.
    time_slicing_replicas: int = Field(default=1, ge=1, le=64)
    # How the device plugin exposes MIG partitions (A100/H100 with MIG enabled).
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    # GPU Feature Discovery labels nodes with GPU model, memory, CUDA and driver versions
    # (needs node-feature-discovery, installed with it).
    feature_discovery: bool = False


# The machine generation (hosts[].generation) of a replaced host's node.
MACHINE_GENERATION_LABEL = "gpu-cluster/machine-generation"


class WorkerPool(Section):
    """EC2 instances of one type that join the cluster at boot (cloud layout)."""

    name: DnsLabel
    instance_type: str = Field(pattern=r"^[a-z0-9-]+\.[a-z0-9]+$",
                               max_length=64)
    count: int = Field(ge=0, le=1000)
    # NVIDIA GPUs per instance; 0 for CPU-only pools.
    gpus: int = Field(default=0, ge=0, le=16)
    gpu_model: Optional[LabelValue] = None
    # Default: AWS's Deep Learning Base GPU AMI (Ubuntu 22.04) pinned by name in
    # config/versions.py, which ships the NVIDIA driver, the container toolkit and the
    # AWS CLI.
    ami: Optional[str] = Field(default=None, pattern=r"^ami-[0-9a-f]{8,17}$")
    # Install the pinned NVIDIA driver at boot (for an `ami` without one).
    install_driver: bool = False
    root_volume_gb: int = Field(default=200, ge=50, le=16384)
    labels: dict[LabelKey, LabelValue] = {}
    taints: Taints = []
    # All instances in one cluster placement group (one zone, low-latency network) for
    # multi-node training.
    placement_group: bool = False


class StackConfig(Section):
    layout: Layout
    # Certificate common names add up to 15 characters ("<cluster>-onprem-gateway") and
    # X.509 allows 64.
    cluster_name: DnsLabel = Field(max_length=49)
    kubernetes: KubernetesSettings = KubernetesSettings()
    network: NetworkSettings = NetworkSettings()
    ssh: SshSettings = SshSettings()
    ssh_private_key: Optional[MultiLineSecret] = None
    bastion_private_key: Optional[MultiLineSecret] = None
    # The EC2 side's OpenVPN profile when vpn.mode is client-to-existing.
    vpn_client_profile: Optional[MultiLineSecret] = None
    hosts: list[Host] = []
    tuning: HostTuning = HostTuning()
    # nftables on on-prem hosts: node ports for the nodes only (config/firewall.py).
    host_firewall: HostFirewallSettings = HostFirewallSettings()
    nvidia: NvidiaSettings = NvidiaSettings()
    # Where hosts' apt finds Ubuntu's packages.
    packages: PackageSettings = PackageSettings()
    # The NTP servers every machine's clock follows (config/timesync.py).
    time: TimeSettings = TimeSettings()
    gpu: GpuSettings = GpuSettings()
    storage: StorageSettings
    mpi: MpiSettings = MpiSettings()
    aws: Optional[AwsSettings] = None
    vpn: Optional[VpnSettings] = None
    pools: list[WorkerPool] = []
    # Teams' namespaces and quotas, and users with a kubeconfig of their own.
    access: AccessSettings = AccessSettings()
    # Kubeflow from the pinned kubeflow/manifests release; off unless configured.
    kubeflow: Optional[KubeflowSettings] = None
    # The Kubeflow (Dex) user's password, or its bcrypt hash (the deprecated kubeflow.user).
    kubeflow_password: Optional[SecretStr] = None
    # Per access.users name, the bcrypt hash of the user's Kubeflow password (Dex).
    kubeflow_password_hashes: Optional[dict[DnsLabel, SecretStr]] = None
    # Per kubeflow.connectors id, its OIDC client secret or LDAP bind password.
    kubeflow_connector_secrets: Optional[dict[DnsLabel, SecretStr]] = None
    # The private key of kubeflow.access.tls.certificate (PEM).
    kubeflow_tls_key: Optional[MultiLineSecret] = None
    # Scheduled snapshots of the control plane's state (config/backup.py).
    backup: BackupSettings = BackupSettings()
    # GPU monitoring: DCGM exporter, Prometheus, Grafana (config/monitoring.py).
    monitoring: MonitoringSettings = MonitoringSettings()
    # Beside the pins of config/versions.py: a release's sha256 (config/release_pins.py).
    versions: VersionOverrides = VersionOverrides()
    # One image mirror for every node (config/images.py).
    images: ImagesSettings = ImagesSettings()
    # The password of images.mirror.username.
    image_mirror_password: Optional[SecretStr] = None

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
    def controller(self) -> Host:
        return next(host for host in self.hosts if host.runs_control_plane)

    @property
    def workers(self) -> list[Host]:
        """Hosts that only run workloads (a controller+worker host is the controller)."""
        return [host for host in self.hosts if not host.runs_control_plane]


# Each section's rules across keys, from its own module: config/single_pass.py runs them on
# what validated (config/partial.py PartialConfig).
CROSS_CHECKS = (checks.network_checks, checks.host_checks, checks.ssh_checks,
                checks.nvidia_checks, checks.tuning_checks, firewall_checks, storage_checks,
                hybrid_checks, cloud_checks, kubeflow_checks, image_checks, backup_checks,
                monitoring_checks, release_pin_checks)

# Keys whose value must be set with `pulumi config set --secret`.
SECRET_KEYS = ("sshPrivateKey", "bastionPrivateKey", "vpnClientProfile", "kubeflowPassword",
               "kubeflowTlsKey", "kubeflowPasswordHashes", "kubeflowConnectorSecrets",
               "imageMirrorPassword")
# Secret keys that hold SSH private keys.
PRIVATE_KEY_KEYS = ("sshPrivateKey", "bastionPrivateKey")
