"""Everything a host needs before it joins the cluster: preflight checks, host settings,
on GPU hosts the NVIDIA driver, container toolkit and containerd runtime, and the reboot
those need, checked before the host may join."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import pulumi
from pulumi_command import remote

from components.distributions.base import Distribution
from components.hosts.authorized_keys import authorized_keys_step
from components.hosts.bundle_step import with_bundle
from components.hosts.steps import (
    HostProfile,
    HostSettings,
    HostStep,
    host_settings,
    preparation_steps,
)
from components.common.remote_step import (
    Endpoint,
    Ssh,
    SshAccess,
    connection_to,
    run_step,
)
from components.common.step_text import Script
from config.backup import BACKUP_FOLDER
from contract.host_os import supported_os_input
from config.hosts import Host

SERVE_NFS = Script("serve-nfs.sh")
# root on a client is the anonymous user 65534 (nobody/nogroup on Ubuntu) on the export:
# a node's root, or a pod's, cannot own or read another's files as root. Nothing the
# program runs needs root there: serve-nfs gives the export's folder to 65534, so the
# provisioner (root in its pod, squashed) makes each claim's folder, mode 0777
# (nfs-subdir-external-provisioner v4.0.2 cmd/nfs-subdir-external-provisioner/
# provisioner.go:112,115, "os.MkdirAll(fullPath, 0777)", "os.Chmod(fullPath, 0777)"), and
# the backups' folder; the writers in those folders run as their own users: Katib's and
# Pipelines' MySQL as 999 (runAsUser in vendor/kubeflow-manifests-26.03 applications/katib/
# upstream/components/mysql/mysql.yaml:70 and applications/pipeline/upstream/third-party/
# mysql/base/mysql-deployment.yaml:59), so the image's entrypoint skips its chown, done
# as root only (docker-library/mysql docker-entrypoint.sh:208, `if [ "$user" = "0" ]`);
# Prometheus as 65534 (components/addons/monitoring/manifests.py); Grafana keeps no data
# there (an emptyDir). fsGroup would not help: "NFS volumes do not support ownership
# management" (kubernetes staging/src/k8s.io/api/core/v1/types.go, NFSVolumeSource).
NFS_ANONYMOUS_ID = 65534
NFS_EXPORT_OPTIONS = (f"rw,sync,no_subtree_check,root_squash,anonuid={NFS_ANONYMOUS_ID},"
                      f"anongid={NFS_ANONYMOUS_ID}")


@dataclass(frozen=True)
class NfsExport:
    """The export a host of the cluster serves (storage.nfs.host): its folder and the
    addresses of the machines that mount it (components/layouts/over_ssh.py nfs_client_addresses)."""

    path: str
    client_addresses: tuple[str, ...]


@dataclass(frozen=True)
class DrainFirst:
    """The step on the controller that drains a worker's node before its preparation
    changes what a drain is for (upgrade/drain-node.sh with HOST_SETTINGS): where it runs,
    the script and its inputs but the settings; and how the host, once drained, reads its
    own node (reboot-if-needed reboots a host in the cluster only while it is drained)."""

    controller: Ssh
    script: Script
    env: dict
    node_kubectl: str


@dataclass(frozen=True, kw_only=True)
class HostBootstrapArgs:
    host: Host
    ssh: SshAccess
    # What the steps read of the config (steps.HostSettings.of), the same on every host.
    settings: HostSettings
    distribution: Distribution
    # Where workers must be able to reach the control plane from (checked by preflight);
    # empty when it is only reachable later (through the VPN).
    control_plane_address: str
    # Reach the host there instead of as configured (an EC2 instance).
    endpoint: Optional[Endpoint] = None
    # When the host is the cluster's NFS server.
    nfs_export: Optional[NfsExport] = None
    # A worker of the cluster: its node is drained before its host settings change.
    drain_first: Optional[DrainFirst] = None
    # The host firewall's ruleset (components/hosts/firewall.py); None: no host-firewall
    # step (the EC2 control plane, or hostFirewall.enabled false, which removes its table).
    firewall_ruleset: Optional[str] = None
    # configure-registries' inputs when the cluster has an image mirror (steps.registry_env).
    registries: Optional[Mapping[str, pulumi.Input[str]]] = None


@dataclass(frozen=True)
class PreparedHost:
    """What the rest of the program needs of a prepared machine: how to run a step on it,
    and the resource after which it is prepared (its verify-boot)."""

    ssh: Ssh
    ready: pulumi.Resource
    # What the host was prepared with (steps.host_settings): recorded on its node once it
    # is Ready with them (upgrade/uncordon-node.sh).
    host_settings: str = ""


class HostBootstrap(pulumi.ComponentResource):
    """The host's preparation steps over SSH (components/hosts/steps.py), `<host>-preflight`
    to `<host>-verify-boot` (`ready`), then `<host>-authorized-keys`, and `<host>-serve-nfs`
    on the NFS server."""

    def __init__(self, name: str, args: HostBootstrapArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:hosts:HostBootstrap", name, None, opts)
        self._args = args
        self.ssh = with_bundle(args.host.name, Ssh(connection_to(args.host, args.ssh,
                                                                args.endpoint),
                                                  args.host.ssh_user or args.ssh.settings.user),
                               args.host.generation, depends_on=[], parent=self)
        # The same, dialing for as long as a reboot may take.
        waiting = args.settings.tuning.reboot_timeout_seconds
        self.waiting_ssh = Ssh(connection_to(args.host, args.ssh, args.endpoint,
                                             wait_seconds=waiting),
                               self.ssh.user, self.ssh.bundle)

        self.ready: pulumi.Resource = self._create_preparation()
        # After the reboot the preparation may make; nothing waits for it.
        self.authorized_keys = authorized_keys_step(
            args.host, self.ssh, args.ssh.settings,
            depends_on=[self.ready], parent=self)
        self.nfs_server = (self._create_serve_nfs(self.ready, args.nfs_export)
                           if args.nfs_export is not None else None)
        self.prepared = PreparedHost(self.ssh, self.ready, self._host_settings())
        self.register_outputs({})

    def step(self, step: str, script: Script, env: dict, depends_on: list) -> remote.Command:
        return run_step(
            self._args.host,
            step,
            on=self.ssh,
            create=script,
            env=env,
            depends_on=depends_on,
            parent=self,
        )

    def _nvidia(self) -> tuple[bool, bool]:
        """(install the driver, install the toolkit and runtime) on this host."""
        return self._args.settings.nvidia.for_host(self._args.host)

    def _host_settings(self) -> str:
        return host_settings(self._args.settings.tuning, self._args.settings.nvidia,
                             self._args.host.gpus,
                             *self._nvidia())

    def _create_preparation(self) -> pulumi.Resource:
        """The preparation steps in order, each after the one before. The check after the
        reboot dials until the host answers again, for tuning.rebootTimeoutSeconds. A
        worker's node is drained after preflight, before anything changes (drain_first)."""
        args = self._args
        host = args.host
        install_driver, install_toolkit = self._nvidia()
        machine = HostProfile(gpus=host.gpus, install_driver=install_driver,
                              nvswitch=host.nvswitch,
                              ssh_port=args.endpoint.port if args.endpoint
                              else args.ssh.settings.port, install_toolkit=install_toolkit,
                              on_ec2=args.endpoint is not None)
        waiting = self.waiting_ssh
        drain = args.drain_first
        previous: list = []
        for step in preparation_steps(args.settings, args.distribution, machine,
                                      preflight_env=self._preflight_env(),
                                      firewall_ruleset=args.firewall_ruleset,
                                      registries=args.registries):
            script, env = self._over_ssh(step, machine)
            previous = [run_step(host, step.step, on=waiting if step.after_reboot
                                 else self.ssh, create=script, env=env,
                                 delete=step.delete, depends_on=previous, parent=self)]
            if step.drain_after and drain is not None:
                previous = [self._drain_first(drain, previous)]
        return previous[0]

    def _over_ssh(self, step: HostStep, machine: HostProfile) -> tuple[Script, dict]:
        """A step's script and inputs over SSH, as the step declares them (boot user data
        stays as it is): on a worker drained first, the script that reads whether its node
        is drained; where install-nvidia installs the driver, the check of its branch."""
        drain = self._args.drain_first
        env = dict(step.env)
        script = step.script
        if step.checks_installed_driver and machine.gpus and machine.install_driver:
            env["CHECK_DRIVER_BRANCH"] = "true"
        if step.drained_worker_script is not None and drain is not None:
            script = step.drained_worker_script
            env.update({"NODE_NAME": self._args.host.name, "NODE_KUBECTL": drain.node_kubectl})
        return script, env

    def _drain_first(self, drain: DrainFirst, after: list) -> remote.Command:
        tuning = self._args.settings.tuning
        return run_step(self._args.host, "drain-host", on=drain.controller,
                        create=drain.script, env={
                            **drain.env,
                            "NODE_NAME": self._args.host.name,
                            "HOST_SETTINGS": self._host_settings(),
                            "REBOOT_WHEN_NEEDED": "true" if tuning.reboot_when_needed
                            else "false",
                        }, depends_on=after, parent=self)

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
            "MIN_FREE_DISK_GB": str(args.settings.tuning.min_free_disk_gb),
            "NVIDIA_DRIVER_BRANCH": args.settings.nvidia.driver_branch,
            "SUPPORTED_OS": supported_os_input(),
            # What a firewalld zone would have to open, which preflight's refusal names.
            "CLUSTER_PORTS": " ".join(f"{port}/{protocol}" for port, protocol in sorted(
                set(args.distribution.host_firewall_ports(host).values()))),
            # A driver already there is the host's to keep, of any branch (preflight's
            # default, true, leaves the other hosts' inputs as they were).
            **({} if self._nvidia()[0] else {"INSTALL_DRIVER": "false"}),
        }

    def _create_serve_nfs(self, prepared: pulumi.Resource,
                          export: NfsExport) -> remote.Command:
        # Nodes mount the export at their LAN address (the kubelet mounts, not pods): one
        # /32 each, never a network.
        return self.step("serve-nfs", SERVE_NFS, {
            "NFS_EXPORT_PATH": export.path,
            "NFS_CLIENT_CIDRS": " ".join(f"{address}/32" for address in export.client_addresses),
            "NFS_EXPORT_OPTIONS": NFS_EXPORT_OPTIONS,
            # Made by the controller's root before root was squashed.
            "NFS_OWNED_FOLDERS": BACKUP_FOLDER,
        }, depends_on=[prepared])
