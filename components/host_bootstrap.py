"""Everything a host needs before it joins the cluster: preflight checks, host settings,
on GPU hosts the NVIDIA driver, container toolkit and containerd runtime, and the reboot
those need, checked before the host may join."""

from dataclasses import dataclass
from typing import Optional, Union

import pulumi
from pulumi_command import remote

from components.distributions.base import Distribution
from components.remote_step import Endpoint, Script, Ssh, connection_to, run_step
from config.model import Host, StackConfig

PREFLIGHT = Script("preflight.sh")
PREPARE_HOST = Script("prepare-host.sh")
INSTALL_NVIDIA = Script("install-nvidia.sh")
SERVE_NFS = Script("serve-nfs.sh")
REBOOT_IF_NEEDED = Script("reboot-if-needed.sh")
# prepare-host's inputs that change the kernel's command line.
REBOOT_REASONS = ("DISABLE_IOMMU", "DISABLE_CPU_MITIGATIONS", "EXTRA_KERNEL_ARGS")
VERIFY_BOOT = Script("verify-boot.sh")
# root can own files on the export, so databases (MySQL) can chown their data directory.
NFS_EXPORT_OPTIONS = "rw,sync,no_subtree_check,no_root_squash"


@dataclass
class HostBootstrapArgs:
    host: Host
    settings: StackConfig
    distribution: Distribution
    # Where workers must be able to reach the control plane from (checked by preflight);
    # empty when it is only reachable later (through the VPN).
    control_plane_address: str
    # Reach the host there instead of as configured (an EC2 instance).
    endpoint: Optional[Endpoint] = None


class HostBootstrap(pulumi.ComponentResource):
    """`<host>-preflight` -> `<host>-prepare-host` [-> `<host>-install-nvidia`]
    [-> `<host>-reboot-if-needed`] -> `<host>-verify-boot` (`ready`)."""

    def __init__(self, name: str, args: HostBootstrapArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:hosts:HostBootstrap", name, None, opts)
        self._args = args
        self.ssh = Ssh(connection_to(args.host, args.settings, args.endpoint),
                       args.host.ssh_user or args.settings.ssh.user)

        preflight = self._create_preflight()
        prepared = self._create_prepare_host(preflight)
        installed: pulumi.Resource = prepared
        if args.host.gpus and args.settings.nvidia.install_driver:
            installed = self._create_install_nvidia(prepared)
        self.ready: pulumi.Resource = self._create_reboot(installed)
        nfs = args.settings.storage.nfs
        self.nfs_server = (self._create_serve_nfs(self.ready)
                           if nfs is not None and nfs.host == args.host.name else None)
        self.register_outputs({})

    def step(self, step: str, script: Script, env: dict, depends_on: list) -> remote.Command:
        return run_step(
            self._args.host.name,
            step,
            on=self.ssh,
            create=script,
            env=env,
            depends_on=depends_on,
            parent=self,
        )

    def _create_preflight(self) -> remote.Command:
        host, settings = self._args.host, self._args.settings
        return self.step("preflight", PREFLIGHT, {
            "HOST_NAME": host.name,
            "HOST_ADDRESS": host.address,
            "HOST_INTERFACE": host.interface or "",
            "HOST_ROLE": host.role,
            "GPU_COUNT": str(host.gpus),
            "CONTROL_PLANE_ADDRESS": self._args.control_plane_address,
            "CONTROL_PLANE_PORT": str(settings.ssh.port),
            "MIN_FREE_DISK_GB": str(settings.tuning.min_free_disk_gb),
            "NVIDIA_DRIVER_BRANCH": settings.nvidia.driver_branch,
        }, depends_on=[])

    def _create_prepare_host(self, preflight: remote.Command) -> remote.Command:
        return self.step("prepare-host", PREPARE_HOST, prepare_host_env(self._args.settings),
                         depends_on=[preflight])

    def _create_install_nvidia(self, prepared: remote.Command) -> remote.Command:
        return self.step("install-nvidia", INSTALL_NVIDIA,
                         install_nvidia_env(self._args.settings, self._args.distribution,
                                            nvswitch=self._args.host.nvswitch),
                         depends_on=[prepared])


    def _create_reboot(self, installed: pulumi.Resource) -> pulumi.Resource:
        """The reboot what came before needs (when the stack allows it), then the check that
        the host runs as prepared. The check's connection keeps dialing while the host
        reboots, for tuning.rebootTimeoutSeconds."""
        args = self._args
        tuning, host = args.settings.tuning, args.host
        port = args.endpoint.port if args.endpoint else args.settings.ssh.port
        gpus = host.gpus if args.settings.nvidia.install_driver else 0
        reboot_env, verify_env = reboot_envs(args.settings, gpus, port, host.nvswitch)
        after = installed
        if tuning.reboot_when_needed:
            after = self.step("reboot-if-needed", REBOOT_IF_NEEDED, reboot_env,
                              depends_on=[installed])
        waiting = Ssh(connection_to(host, args.settings, args.endpoint,
                                    wait_seconds=tuning.reboot_timeout_seconds),
                      self.ssh.user)
        return run_step(host.name, "verify-boot", on=waiting, create=VERIFY_BOOT,
                        env=verify_env, depends_on=[after], parent=self)

    def _create_serve_nfs(self, prepared: pulumi.Resource) -> remote.Command:
        settings = self._args.settings
        # Nodes mount the export at their LAN address (the kubelet mounts, not pods).
        return self.step("serve-nfs", SERVE_NFS, {
            "NFS_EXPORT_PATH": settings.storage.nfs.path,
            "NFS_CLIENT_CIDRS": settings.network.lan_cidr,
            "NFS_EXPORT_OPTIONS": NFS_EXPORT_OPTIONS,
        }, depends_on=[prepared])


def prepare_host_env(settings: StackConfig) -> dict[str, str]:
    tuning = settings.tuning
    return {
        "DISABLE_IOMMU": _flag(tuning.disable_iommu),
        "DISABLE_CPU_MITIGATIONS": _flag(tuning.disable_cpu_mitigations),
        "EXTRA_KERNEL_ARGS": " ".join(tuning.extra_kernel_args),
        "INOTIFY_MAX_USER_INSTANCES": str(tuning.inotify_max_user_instances),
        "INOTIFY_MAX_USER_WATCHES": str(tuning.inotify_max_user_watches),
        "INSTALL_NFS_CLIENT": _flag(tuning.install_nfs_client),
    }


def reboot_envs(settings: StackConfig, gpus: int, ssh_port: int,
                nvswitch: Union[bool, str] = "auto") -> tuple[dict, dict]:
    """The inputs of reboot-if-needed and verify-boot: what a reboot is for (the driver,
    the kernel arguments; a change re-runs both), the SSH port held off until the reboot,
    the GPUs nvidia-smi must list after it and whether Fabric Manager must run."""
    prepared = prepare_host_env(settings)
    reason = {key: prepared[key] for key in REBOOT_REASONS}
    reason["NVIDIA_DRIVER_BRANCH"] = settings.nvidia.driver_branch if gpus else ""
    return ({**reason, "SSH_PORT": str(ssh_port),
             "REBOOT_TIMEOUT": str(settings.tuning.reboot_timeout_seconds)},
            {**reason, "GPU_COUNT": str(gpus),
             "NVSWITCH": nvswitch if nvswitch == "auto" else _flag(nvswitch)})


def install_nvidia_env(settings: StackConfig, distribution: Distribution, install_driver: bool = True,
                       nvswitch: Union[bool, str] = "auto") -> dict[str, str]:
    """NVSWITCH: true/false, or auto (Fabric Manager when NVSwitches are on the PCI bus)."""
    nvidia = settings.nvidia
    return {
        "INSTALL_DRIVER": _flag(install_driver),
        "NVSWITCH": nvswitch if nvswitch == "auto" else _flag(nvswitch),
        "NVIDIA_DRIVER_BRANCH": nvidia.driver_branch,
        "NVIDIA_CONTAINER_TOOLKIT_VERSION": nvidia.container_toolkit_version,
        "CONTAINERD_DROPIN_PATH": f"{distribution.containerd_dropin_dir}/nvidia.toml",
        "CONTAINERD_DROPIN_CONTENT": distribution.nvidia_runtime_dropin(),
    }


def _flag(value: bool) -> str:
    return "true" if value else "false"
