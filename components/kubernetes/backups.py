"""Scheduled snapshots of the control plane's state (`gpu-cluster:backup`): the
install-backup step puts a systemd timer, the backup command and gpu-cluster-restore on
the controller, each the distribution's way of taking and restoring a snapshot
(<distribution>/cluster-state.sh) around the same shared scripts (scripts/backup/).

It runs from the step bundle, over SSH as any step and in the cloud controller's boot
plan: the commands and the libraries they source are files of that bundle, each installed
once, named in its inputs with their sha256."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
from pulumi_command import remote

from components.common.bundle import step_bundle
from components.common.remote_step import Ssh, run_step
from components.common.step_text import Script
from components.distributions.base import Distribution
from components.hosts.steps import HostStep
from config.backup import BackupSettings, Store
from config.hosts import Host

INSTALL_BACKUP = Script("backup/install-backup.sh")
REMOVE_BACKUP = Script("backup/remove-backup.sh")
STEP = "install-backup"
# Where install-backup puts the S3 client, and where the instance's boot keeps the SSM
# client it shares code with (boot/run-boot.sh).
S3_CLIENT = "/usr/local/lib/gpu-cluster/backup/s3-object.py"
SSM_CLIENT = "/var/lib/gpu-cluster/boot/ssm-parameter.py"


@dataclass(frozen=True)
class BackupTarget:
    """Where the snapshots go and what install-backup needs to know of it."""

    store: Store
    # A URL-like location for the stack output: s3://..., nfs://server/export/..., a path.
    location: pulumi.Input[str]
    # The store's settings for install-backup (BACKUP_BUCKET, BACKUP_NFS_SOURCE, ...).
    env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)


def backup_files(distribution: Distribution, store: Store) -> str:
    """install-backup's BACKUP_FILES: `PATH=SHA256` of each file of the step bundle the
    installed commands run (install-backup's installed_path says where each goes)."""
    paths = ["lib.sh", "backup/lib.sh", distribution.cluster_state, "backup/backup.sh",
             "backup/restore.sh", *(["aws/s3-object.py"] if store == "s3" else [])]
    bundle = step_bundle()
    return " ".join(f"{path}={bundle.sha256(path)}" for path in paths)


def install_backup_env(distribution: Distribution, settings: BackupSettings,
                       cluster_name: str, target: BackupTarget) -> dict:
    """install-backup's inputs. Every store gets the age public keys (backup.recipients)
    the controller encrypts each snapshot to; no key that decrypts leaves the config."""
    env = {
        "BACKUP_FILES": backup_files(distribution, target.store),
        "BACKUP_SCHEDULE": settings.schedule,
        "BACKUP_RETENTION": str(settings.retention),
        "BACKUP_NAME": cluster_name,
        "BACKUP_STORE": target.store,
        "CONTROLLER_SERVICE": distribution.controller_service,
        "BACKUP_RECIPIENTS": " ".join(settings.recipients),
        **target.env,
    }
    if target.store == "s3":
        env.update(S3_CLIENT=S3_CLIENT, SSM_CLIENT=SSM_CLIENT)
    return env


def backup_turn_env(controllers: Sequence[tuple[Host, object]], host: Host,
                    api_port: int) -> dict[str, str]:
    """install-backup's inputs on `host`, one of several controllers: each controller's
    name and address in config order, and the API's port, by which the first whose API
    answers takes each snapshot (backup/lib.sh backup_taker)."""
    return {"BACKUP_CONTROLLERS": ",".join(f"{c.name}={c.address}" for c, _ in controllers),
            "BACKUP_NODE": host.name, "API_PORT": str(api_port)}


def install_backup_over_ssh(host: str, ssh: Ssh, env: Mapping[str, pulumi.Input[str]],
                            after: Sequence[pulumi.Resource],
                            parent: pulumi.Resource) -> remote.Command:
    """`<host>-install-backup` on the controller, once the control plane is installed;
    destroying it (backups turned off) removes the timer, never a snapshot."""
    return run_step(host, STEP, on=ssh, create=INSTALL_BACKUP, env=env,
                    delete=REMOVE_BACKUP, depends_on=after, parent=parent)


def install_backup_step(env: Mapping[str, pulumi.Input[str]]) -> HostStep:
    """install-backup among a controller's boot steps, once the control plane is installed."""
    return HostStep(STEP, INSTALL_BACKUP, env)
