"""Everything a host needs before it joins the cluster: preflight checks, host settings,
on GPU hosts the NVIDIA driver, container toolkit and containerd runtime, and the reboot
those need, checked before the host may join."""

from dataclasses import dataclass
from typing import Optional

import pulumi
from pulumi_command import remote

from components.distributions.base import Distribution
from components.hosts.steps import Machine, preparation_steps
from components.common.remote_step import Endpoint, Script, Ssh, connection_to, run_step
from config.model import Host, StackConfig

SERVE_NFS = Script("serve-nfs.sh")
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
    """The host's preparation steps over SSH (components/hosts/steps.py), `<host>-preflight`
    to `<host>-verify-boot` (`ready`), and `<host>-serve-nfs` on the NFS server."""

    def __init__(self, name: str, args: HostBootstrapArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:hosts:HostBootstrap", name, None, opts)
        self._args = args
        self.ssh = Ssh(connection_to(args.host, args.settings, args.endpoint),
                       args.host.ssh_user or args.settings.ssh.user)

        self.ready: pulumi.Resource = self._create_preparation()
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

    def _create_preparation(self) -> pulumi.Resource:
        """The preparation steps in order, each after the one before. The check after the
        reboot dials until the host answers again, for tuning.rebootTimeoutSeconds."""
        args = self._args
        host, settings = args.host, args.settings
        install = settings.nvidia.install_driver
        machine = Machine(gpus=host.gpus if install else 0, install_driver=True,
                          nvswitch=host.nvswitch,
                          ssh_port=args.endpoint.port if args.endpoint else settings.ssh.port)
        waiting = Ssh(connection_to(host, settings, args.endpoint,
                                    wait_seconds=settings.tuning.reboot_timeout_seconds),
                      self.ssh.user)
        previous: list = []
        for step in preparation_steps(settings, args.distribution, machine,
                                      preflight_env=self._preflight_env()):
            previous = [run_step(host.name, step.step, on=waiting if step.after_reboot
                                 else self.ssh, create=step.script, env=dict(step.env),
                                 depends_on=previous, parent=self)]
        return previous[0]

    def _preflight_env(self) -> dict[str, str]:
        host, settings = self._args.host, self._args.settings
        return {
            "HOST_NAME": host.name,
            "HOST_ADDRESS": host.address,
            "HOST_INTERFACE": host.interface or "",
            "HOST_ROLE": host.role,
            "GPU_COUNT": str(host.gpus),
            "CONTROL_PLANE_ADDRESS": self._args.control_plane_address,
            "CONTROL_PLANE_PORT": str(settings.ssh.port),
            "MIN_FREE_DISK_GB": str(settings.tuning.min_free_disk_gb),
            "NVIDIA_DRIVER_BRANCH": settings.nvidia.driver_branch,
        }

    def _create_serve_nfs(self, prepared: pulumi.Resource) -> remote.Command:
        settings = self._args.settings
        # Nodes mount the export at their LAN address (the kubelet mounts, not pods).
        return self.step("serve-nfs", SERVE_NFS, {
            "NFS_EXPORT_PATH": settings.storage.nfs.path,
            "NFS_CLIENT_CIDRS": settings.network.lan_cidr,
            "NFS_EXPORT_OPTIONS": NFS_EXPORT_OPTIONS,
        }, depends_on=[prepared])
