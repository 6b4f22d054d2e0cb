"""Everything a host needs before it joins the cluster: preflight checks, host settings,
on GPU hosts the NVIDIA driver, container toolkit and containerd runtime, and the reboot
those need, checked before the host may join."""

from dataclasses import dataclass
from typing import Optional

import pulumi
from pulumi_command import remote

from components.distributions.base import Distribution
from components.hosts.authorized_keys import authorized_keys_step
from components.hosts.steps import Machine, preparation_steps
from components.common.remote_step import (
    Endpoint,
    Script,
    Ssh,
    SshAccess,
    connection_to,
    machine_env,
    run_step,
)
from config.model import Host, HostTuning, NvidiaSettings

SERVE_NFS = Script("serve-nfs.sh")
# root can own files on the export, so databases (MySQL) can chown their data directory.
NFS_EXPORT_OPTIONS = "rw,sync,no_subtree_check,no_root_squash"


@dataclass(frozen=True)
class NfsExport:
    """The export a host of the cluster serves (storage.nfs.host): its folder and the
    networks whose nodes mount it."""

    path: str
    client_cidrs: str


@dataclass
class HostBootstrapArgs:
    host: Host
    ssh: SshAccess
    # The host's settings and reboots (tuning), the NVIDIA stack on GPU hosts.
    tuning: HostTuning
    nvidia: NvidiaSettings
    distribution: Distribution
    # Where workers must be able to reach the control plane from (checked by preflight);
    # empty when it is only reachable later (through the VPN).
    control_plane_address: str
    # Reach the host there instead of as configured (an EC2 instance).
    endpoint: Optional[Endpoint] = None
    # When the host is the cluster's NFS server.
    nfs_export: Optional[NfsExport] = None


@dataclass(frozen=True)
class PreparedMachine:
    """What the rest of the program needs of a prepared machine: how to run a step on it,
    and the resource after which it is prepared (its verify-boot)."""

    ssh: Ssh
    ready: pulumi.Resource


class HostBootstrap(pulumi.ComponentResource):
    """The host's preparation steps over SSH (components/hosts/steps.py), `<host>-preflight`
    to `<host>-verify-boot` (`ready`), then `<host>-authorized-keys`, and `<host>-serve-nfs`
    on the NFS server."""

    def __init__(self, name: str, args: HostBootstrapArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:hosts:HostBootstrap", name, None, opts)
        self._args = args
        self.ssh = Ssh(connection_to(args.host, args.ssh, args.endpoint),
                       args.host.ssh_user or args.ssh.settings.user)

        self.ready: pulumi.Resource = self._create_preparation()
        # After the reboot the preparation may make; nothing waits for it.
        self.authorized_keys = authorized_keys_step(
            args.host, self.ssh, args.ssh.settings,
            depends_on=[self.ready], parent=self)
        self.nfs_server = (self._create_serve_nfs(self.ready, args.nfs_export)
                           if args.nfs_export is not None else None)
        self.machine = PreparedMachine(self.ssh, self.ready)
        self.register_outputs({})

    def step(self, step: str, script: Script, env: dict, depends_on: list) -> remote.Command:
        return run_step(
            self._args.host.name,
            step,
            on=self.ssh,
            create=script,
            env={**env, **machine_env(self._args.host)},
            depends_on=depends_on,
            parent=self,
        )

    def _create_preparation(self) -> pulumi.Resource:
        """The preparation steps in order, each after the one before. The check after the
        reboot dials until the host answers again, for tuning.rebootTimeoutSeconds."""
        args = self._args
        host = args.host
        machine = Machine(gpus=host.gpus if args.nvidia.install_driver else 0,
                          install_driver=True, nvswitch=host.nvswitch,
                          ssh_port=args.endpoint.port if args.endpoint
                          else args.ssh.settings.port)
        waiting = Ssh(connection_to(host, args.ssh, args.endpoint,
                                    wait_seconds=args.tuning.reboot_timeout_seconds),
                      self.ssh.user)
        previous: list = []
        for step in preparation_steps(args.tuning, args.nvidia, args.distribution, machine,
                                      preflight_env=self._preflight_env()):
            previous = [run_step(host.name, step.step, on=waiting if step.after_reboot
                                 else self.ssh, create=step.script,
                                 env={**step.env, **machine_env(host)},
                                 depends_on=previous, parent=self)]
        return previous[0]

    def _preflight_env(self) -> dict[str, str]:
        args = self._args
        host = args.host
        return {
            "HOST_NAME": host.name,
            "HOST_ADDRESS": host.address,
            "HOST_INTERFACE": host.interface or "",
            "HOST_ROLE": host.role,
            "GPU_COUNT": str(host.gpus),
            "CONTROL_PLANE_ADDRESS": args.control_plane_address,
            "CONTROL_PLANE_PORT": str(args.ssh.settings.port),
            "MIN_FREE_DISK_GB": str(args.tuning.min_free_disk_gb),
            "NVIDIA_DRIVER_BRANCH": args.nvidia.driver_branch,
        }

    def _create_serve_nfs(self, prepared: pulumi.Resource,
                          export: NfsExport) -> remote.Command:
        # Nodes mount the export at their LAN address (the kubelet mounts, not pods).
        return self.step("serve-nfs", SERVE_NFS, {
            "NFS_EXPORT_PATH": export.path,
            "NFS_CLIENT_CIDRS": export.client_cidrs,
            "NFS_EXPORT_OPTIONS": NFS_EXPORT_OPTIONS,
        }, depends_on=[prepared])
