"""The steps that prepare a machine for the cluster, in one list: run over SSH on bare
metal and hybrid hosts (components/hosts/bootstrap.py) and rendered into the boot user data
of EC2 instances (components/aws/boot.py). A new step is added here once.

[configure-apt] -> [configure-dnf] -> [configure-time] -> prepare-host -> [host-firewall] ->
[configure-registries] -> [install-nvidia] -> [reboot-if-needed] -> verify-boot; over SSH,
preflight comes first; host-firewall is on on-prem hosts only; configure-apt with
packages.aptMirror and configure-dnf with packages.epel (over SSH only: EC2 machines run
Ubuntu), before anything installs a package; configure-time with time.ntpServers, before
anything that checks a certificate."""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Optional, Union

import pulumi

from components.distributions.base import Distribution
from components.common.step_text import Script
from config import versions
from config.images import ImageMirror
from config.model import HostTuning, NvidiaSettings, PackageSettings
from config.timesync import TimeSettings

PREFLIGHT = Script("preflight.sh")
PREPARE_HOST = Script("prepare-host.sh", checks=True)
# The nftables table of on-prem hosts (components/hosts/firewall.py renders its ruleset).
HOST_FIREWALL = Script("host-firewall.sh", checks=True)
REMOVE_HOST_FIREWALL = Script("host-firewall-remove.sh")
INSTALL_NVIDIA = Script("install-nvidia.sh", checks=True)
REBOOT_IF_NEEDED = Script("reboot-if-needed.sh")
# reboot-if-needed on a worker over SSH: with the upgrade helpers that tell whether its node
# is drained (boot user data, which has a size limit, never needs them).
REBOOT_DRAINED_WORKER = Script("reboot-if-needed.sh", extra_libraries=("upgrade/lib.sh",))
VERIFY_BOOT = Script("verify-boot.sh")
CONFIGURE_REGISTRIES = Script("configure-registries.sh")
CONFIGURE_APT = Script("configure-apt.sh")
REMOVE_CONFIGURE_APT = Script("configure-apt-remove.sh")
CONFIGURE_DNF = Script("configure-dnf.sh")
REMOVE_CONFIGURE_DNF = Script("configure-dnf-remove.sh")
CONFIGURE_TIME = Script("configure-time.sh")
REMOVE_CONFIGURE_TIME = Script("configure-time-remove.sh")
# prepare-host's inputs that change the kernel's command line.
REBOOT_REASONS = ("DISABLE_IOMMU", "DISABLE_CPU_MITIGATIONS", "EXTRA_KERNEL_ARGS")


@dataclass(frozen=True)
class HostStep:
    """One step on a machine: `<machine>-<step>` over SSH, a user data part at boot."""

    step: str
    script: Script
    env: Mapping[str, pulumi.Input[str]]
    # Runs once the machine is back from the reboot before it (over SSH: keeps dialing).
    after_reboot: bool = False
    # Runs when the step is gone from the list (over SSH only).
    delete: Optional[Script] = None
    # Over SSH, on a worker whose node is drained before its host settings change
    # (bootstrap.DrainFirst): its drain-host step comes right after this one, before
    # anything changes ...
    drain_after: bool = False
    # ... and this script runs instead, with the node's name and kubectl, to tell whether
    # the node is drained.
    drained_worker_script: Optional[Script] = None
    # Over SSH, when the step before installs the driver: also checks its branch.
    checks_installed_driver: bool = False


@dataclass(frozen=True)
class HostProfile:
    """What the preparation depends on: its GPUs (0: none), whether the driver is installed
    or the host's own is kept, whether the container toolkit and the `nvidia` runtime are
    installed (install-nvidia) or the host brings them, NVSwitches (auto: as found on the
    PCI bus), and the SSH port held off until a reboot. verify-boot counts the GPUs in
    any case. An EC2 instance follows the Amazon Time Sync Service unless
    time.amazonTimeSync is false."""

    gpus: int
    install_driver: bool
    nvswitch: Union[bool, str]
    ssh_port: int
    install_toolkit: bool = True
    on_ec2: bool = False


@dataclass(frozen=True, kw_only=True)
class HostSettings:
    """The config sections the steps read, the same for every machine: built once (`of`,
    in layouts/contract.py) and passed whole through every caller, so a step that reads a
    new section adds its field here and nothing on the way. Each field is the stack
    config's section of that name: the host's settings and reboots (tuning), the NVIDIA
    stack on GPU hosts, where apt finds Ubuntu's packages, the NTP servers."""

    tuning: HostTuning = field(default_factory=HostTuning)
    nvidia: NvidiaSettings = field(default_factory=NvidiaSettings)
    packages: PackageSettings = field(default_factory=PackageSettings)
    time: TimeSettings = field(default_factory=TimeSettings)

    @classmethod
    def of(cls, config) -> "HostSettings":
        """From the stack config, which the steps never take whole: only these sections."""
        return cls(**{section.name: getattr(config, section.name) for section in fields(cls)})


def preparation_steps(settings: HostSettings, distribution: Distribution,
                      machine: HostProfile,
                      preflight_env: Optional[Mapping[str, str]] = None,
                      firewall_ruleset: Optional[str] = None,
                      registries: Optional[Mapping[str, pulumi.Input[str]]] = None
                      ) -> list[HostStep]:
    """`preflight_env` and `firewall_ruleset` are given over SSH only (boot user data
    never holds them: EC2 machines have security groups). `registries`:
    configure-registries' inputs (registry_env) when the cluster has an image mirror;
    before anything pulls an image. What the steps read of the config is `settings`."""
    tuning, nvidia = settings.tuning, settings.nvidia
    steps = []
    if preflight_env is not None:
        steps.append(HostStep("preflight", PREFLIGHT, preflight_env, drain_after=True))
    apt = apt_env(settings.packages)
    if apt:
        steps.append(HostStep("configure-apt", CONFIGURE_APT, apt, delete=REMOVE_CONFIGURE_APT))
    dnf = dnf_env(settings.packages)
    if dnf and preflight_env is not None:
        steps.append(HostStep("configure-dnf", CONFIGURE_DNF, dnf, delete=REMOVE_CONFIGURE_DNF))
    clock = time_env(settings.time, machine.on_ec2)
    if clock:
        steps.append(HostStep("configure-time", CONFIGURE_TIME, clock,
                              delete=REMOVE_CONFIGURE_TIME))
    # EC2 machines run Ubuntu images, which manage their network without NetworkManager.
    steps.append(HostStep("prepare-host", PREPARE_HOST, prepare_host_env(
        tuning, () if machine.on_ec2 else distribution.cni_interfaces)))
    if firewall_ruleset is not None:
        steps.append(HostStep("host-firewall", HOST_FIREWALL,
                              {"HOST_FIREWALL_RULESET": firewall_ruleset},
                              delete=REMOVE_HOST_FIREWALL))
    if registries:
        steps.append(HostStep("configure-registries", CONFIGURE_REGISTRIES, registries))
    if machine.gpus and machine.install_toolkit:
        steps.append(HostStep("install-nvidia", INSTALL_NVIDIA, install_nvidia_env(
            nvidia, distribution, machine.install_driver, machine.nvswitch)))
    reboot_env, verify_env = reboot_envs(tuning, nvidia, distribution, machine.gpus,
                                         machine.ssh_port, machine.nvswitch)
    if tuning.reboot_when_needed:
        steps.append(HostStep("reboot-if-needed", REBOOT_IF_NEEDED, reboot_env,
                              drained_worker_script=REBOOT_DRAINED_WORKER))
    steps.append(HostStep("verify-boot", VERIFY_BOOT, verify_env, after_reboot=True,
                          checks_installed_driver=True))
    return steps


def apt_env(packages: PackageSettings) -> dict[str, str]:
    """configure-apt's inputs; none without packages.aptMirror."""
    if packages.apt_mirror is None:
        return {}
    security = packages.apt_security_mirror
    return {"UBUNTU_APT_MIRROR": packages.apt_mirror,
            **({"UBUNTU_APT_SECURITY_MIRROR": security} if security else {})}


def dnf_env(packages: PackageSettings) -> dict[str, str]:
    """configure-dnf's inputs; none without packages.epel."""
    if not packages.epel:
        return {}
    mirror = {"EPEL_MIRROR": packages.epel_mirror} if packages.epel_mirror else {}
    return {"EPEL_KEY_FINGERPRINT": versions.EPEL_9_KEY_FINGERPRINT, **mirror}


def time_env(time: TimeSettings, on_ec2: bool) -> dict[str, str]:
    """configure-time's inputs; none without time.ntpServers."""
    servers = time.servers(on_ec2)
    if not servers:
        return {}
    return {"NTP_SERVERS": " ".join(servers), "NTS": _flag(time.uses_nts(on_ec2))}


def prepare_host_env(tuning: HostTuning, cni_interfaces: Sequence[str] = ()) -> dict[str, str]:
    """`cni_interfaces`: the distribution's (Distribution.cni_interfaces), which
    NetworkManager is told to leave alone where it runs."""
    return {
        "NM_UNMANAGED_INTERFACES": " ".join(cni_interfaces),
        "DISABLE_IOMMU": _flag(tuning.disable_iommu),
        "DISABLE_CPU_MITIGATIONS": _flag(tuning.disable_cpu_mitigations),
        "EXTRA_KERNEL_ARGS": " ".join(tuning.extra_kernel_args),
        "INOTIFY_MAX_USER_INSTANCES": str(tuning.inotify_max_user_instances),
        "INOTIFY_MAX_USER_WATCHES": str(tuning.inotify_max_user_watches),
        "INSTALL_NFS_CLIENT": _flag(tuning.install_nfs_client),
    }


def reboot_envs(tuning: HostTuning, nvidia: NvidiaSettings, distribution: Distribution,
                gpus: int, ssh_port: int,
                nvswitch: Union[bool, str] = "auto") -> tuple[dict, dict]:
    """The inputs of reboot-if-needed and verify-boot: what a reboot is for (the driver,
    the kernel arguments; a change re-runs both), the SSH port held off until the reboot,
    the units that make a host a node (never rebooted here), the GPUs nvidia-smi must list
    after it and whether Fabric Manager must run."""
    prepared = prepare_host_env(tuning)
    reason = {key: prepared[key] for key in REBOOT_REASONS}
    reason["NVIDIA_DRIVER_BRANCH"] = nvidia.driver_branch if gpus else ""
    return ({**reason, "SSH_PORT": str(ssh_port),
             "REBOOT_TIMEOUT": str(tuning.reboot_timeout_seconds),
             "NODE_SERVICES": " ".join(distribution.node_services)},
            {**reason, "GPU_COUNT": str(gpus), "NVSWITCH": _nvswitch(nvswitch)})


def host_settings(tuning: HostTuning, nvidia: NvidiaSettings, gpus: int,
                  install_driver: bool = True, install_toolkit: bool = True) -> str:
    """What a host in the cluster must be drained for before its steps change it, as
    KEY=VALUE pairs (the value of the node annotation gpu-cluster.io/host-settings,
    upgrade/lib.sh): on a GPU host the driver branch the program installs, which needs the
    GPUs idle and a reboot, and the container toolkit it installs; the kernel arguments (a
    reboot), as a digest."""
    prepared = prepare_host_env(tuning)
    kernel = "\n".join(f"{key}={prepared[key]}" for key in REBOOT_REASONS)
    pairs = {"kernel-args": hashlib.sha256(kernel.encode()).hexdigest()[:12]}
    if gpus and install_toolkit:
        pairs = {"container-toolkit": nvidia.container_toolkit_version, **pairs}
    if gpus and install_driver and install_toolkit:
        pairs = {"nvidia-driver": nvidia.driver_branch, **pairs}
    return ",".join(f"{key}={value}" for key, value in pairs.items())


def install_nvidia_env(nvidia: NvidiaSettings, distribution: Distribution,
                       install_driver: bool = True,
                       nvswitch: Union[bool, str] = "auto") -> dict[str, str]:
    """NVSWITCH: true/false, or auto (Fabric Manager when NVSwitches are on the PCI bus)."""
    mirror = {"NVIDIA_APT_MIRROR": nvidia.apt_mirror} if nvidia.apt_mirror else {}
    return {
        **mirror,
        "INSTALL_DRIVER": _flag(install_driver),
        "NVSWITCH": _nvswitch(nvswitch),
        "NVIDIA_DRIVER_BRANCH": nvidia.driver_branch,
        "NVIDIA_CONTAINER_TOOLKIT_VERSION": nvidia.container_toolkit_version,
        "NVIDIA_REPO_KEY_FINGERPRINT": versions.NVIDIA_CONTAINER_TOOLKIT_KEY_FINGERPRINT,
        "NVIDIA_CUDA_REPO_KEY_FINGERPRINT": versions.NVIDIA_CUDA_REPO_KEY_FINGERPRINT,
        "CONTAINERD_DROPIN_PATH": f"{distribution.containerd_dropin_dir}/nvidia.toml",
        # Empty: the distribution adds the runtime itself; install-nvidia writes no drop-in.
        "CONTAINERD_DROPIN_CONTENT": distribution.nvidia_runtime_dropin() or "",
    }


def registry_env(distribution: Distribution, mirror: ImageMirror, upstreams: Sequence[str],
                 password: Mapping[str, pulumi.Input[str]]) -> dict[str, pulumi.Input[str]]:
    """configure-registries' inputs: the distribution's files for the mirror, and
    `password` (REGISTRY_PASSWORD over SSH, REGISTRY_PASSWORD_SSM_PARAMETER at boot; none
    without a login)."""
    files = distribution.registry_files(mirror, upstreams)
    env: dict[str, pulumi.Input[str]] = {
        "REGISTRY_FILE_COUNT": str(len(files)),
        "REGISTRY_HOSTS_DIR": distribution.registry_hosts_dir,
        "REGISTRY_SERVICES": " ".join(distribution.registry_services)}
    for number, file in enumerate(files, start=1):
        env.update({f"REGISTRY_FILE_{number}_PATH": file.path,
                    f"REGISTRY_FILE_{number}_MODE": file.mode,
                    f"REGISTRY_FILE_{number}_CONTENT": file.content})
    return {**env, **password}


def _nvswitch(value: Union[bool, str]) -> str:
    return value if value == "auto" else _flag(bool(value))


def _flag(value: bool) -> str:
    return "true" if value else "false"
