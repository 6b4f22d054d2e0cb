"""Everything a host needs before it joins the cluster: preflight checks, host settings,
and on GPU hosts the NVIDIA driver, container toolkit and containerd runtime."""

from dataclasses import dataclass
from typing import Optional

import pulumi
from pulumi_command import remote

from components.distributions.k0s import K0s
from components.remote_step import Endpoint, Script, Ssh, connection_to, run_step
from config.model import Host, StackConfig

PREFLIGHT = Script("preflight.sh")
PREPARE_HOST = Script("prepare-host.sh")
INSTALL_NVIDIA = Script("install-nvidia.sh")
SERVE_NFS = Script("serve-nfs.sh")
# root can own files on the export, so databases (MySQL) can chown their data directory.
NFS_EXPORT_OPTIONS = "rw,sync,no_subtree_check,no_root_squash"


@dataclass
class HostBootstrapArgs:
    host: Host
    settings: StackConfig
    distribution: K0s
    # Where workers must be able to reach the control plane from (checked by preflight);
    # empty when it is only reachable later (through the VPN).
    control_plane_address: str
    # Reach the host there instead of as configured (an EC2 instance).
    endpoint: Optional[Endpoint] = None


class HostBootstrap(pulumi.ComponentResource):
    """`<host>-preflight` -> `<host>-prepare-host` [-> `<host>-install-nvidia`]."""

    def __init__(self, name: str, args: HostBootstrapArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:hosts:HostBootstrap", name, None, opts)
        self._args = args
        self.ssh = Ssh(connection_to(args.host, args.settings, args.endpoint),
                       args.host.ssh_user or args.settings.ssh.user)

        preflight = self._create_preflight()
        prepared = self._create_prepare_host(preflight)
        self.ready: pulumi.Resource = prepared
        if args.host.gpus and args.settings.nvidia.install_driver:
            self.ready = self._create_install_nvidia(prepared)
        nfs = args.settings.storage.nfs
        self.nfs_server = (self._create_serve_nfs(prepared)
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
                         install_nvidia_env(self._args.settings, self._args.distribution),
                         depends_on=[prepared])


    def _create_serve_nfs(self, prepared: remote.Command) -> remote.Command:
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


def install_nvidia_env(settings: StackConfig, distribution: K0s,
                       install_driver: bool = True) -> dict[str, str]:
    nvidia = settings.nvidia
    return {
        "INSTALL_DRIVER": _flag(install_driver),
        "NVIDIA_DRIVER_BRANCH": nvidia.driver_branch,
        "NVIDIA_CONTAINER_TOOLKIT_VERSION": nvidia.container_toolkit_version,
        "CONTAINERD_DROPIN_PATH": f"{distribution.containerd_dropin_dir}/nvidia.toml",
        "CONTAINERD_DROPIN_CONTENT": distribution.nvidia_runtime_dropin(),
    }


def _flag(value: bool) -> str:
    return "true" if value else "false"
