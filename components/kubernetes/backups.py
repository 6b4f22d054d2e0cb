"""Scheduled snapshots of the control plane's state (`gpu-cluster:backup`): the
install-backup step puts a systemd timer, the backup command and gpu-cluster-restore on
the controller, each the distribution's way of taking and restoring a snapshot
(<distribution>/cluster-state.sh) around the same shared scripts (scripts/backup/).

Over SSH it runs as any step. The cloud layout's controller installs itself from user
data, which EC2 caps at 16 KiB and which has no room for these scripts: there the step's
envelope, the very text SSH would send, is kept gzipped in SSM SecureStrings that a small
boot step reads and runs (backup_boot_step)."""

import base64
import gzip
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
from pulumi_command import remote

from components.common.remote_step import Ssh, run_step
from components.common.shell_text import without_comment_lines
from components.common.step_text import Script, envelope, read_script, render_envelope
from components.distributions.base import Distribution
from components.hosts.steps import HostStep
from config.backup import BackupSettings, Store

INSTALL_BACKUP = Script("backup/install-backup.sh")
REMOVE_BACKUP = Script("backup/remove-backup.sh")
BOOT_INSTALL_BACKUP = Script("aws/run-step-from-ssm.sh")
STEP = "install-backup"
# Where install-backup puts the S3 client, and where the instance's boot keeps the SSM
# client it shares code with (boot/run-boot.sh).
S3_CLIENT = "/usr/local/lib/gpu-cluster/backup/s3-object.py"
SSM_CLIENT = "/var/lib/gpu-cluster/boot/ssm-parameter.py"
# An SSM SecureString of the standard tier holds 4 KB
# (https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html).
SSM_CHUNK_CHARACTERS = 4000
# How many parameters hold the envelope: a fixed number, so that a longer or shorter script
# never adds or removes a resource; room for twice today's envelope.
ENVELOPE_PARAMETERS = 8


@dataclass(frozen=True)
class BackupTarget:
    """Where the snapshots go and what install-backup needs to know of it."""

    store: Store
    # A URL-like location for the stack output: s3://..., nfs://server/export/..., a path.
    location: pulumi.Input[str]
    # The store's settings for install-backup (BACKUP_BUCKET, BACKUP_NFS_SOURCE, ...).
    env: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)


def command_text(distribution: Distribution, command: str) -> str:
    """The backup command or gpu-cluster-restore as installed: the shared library, the
    backup settings' library, the distribution's snapshot functions, the command. The
    libraries without their comment lines: the envelope holds each twice more (the
    SSM parameters' room); the command keeps its own."""
    libraries = ("lib.sh", "backup/lib.sh", distribution.cluster_state)
    return "\n".join([*(without_comment_lines(read_script(path)) for path in libraries),
                      read_script(f"backup/{command}.sh")])


def install_backup_env(distribution: Distribution, settings: BackupSettings,
                       cluster_name: str, target: BackupTarget) -> dict:
    """install-backup's inputs. Every store gets the age public keys (backup.recipients)
    the controller encrypts each snapshot to; no key that decrypts leaves the config."""
    env = {
        "BACKUP_SCRIPT": command_text(distribution, "backup"),
        "RESTORE_SCRIPT": command_text(distribution, "restore"),
        "BACKUP_SCHEDULE": settings.schedule,
        "BACKUP_RETENTION": str(settings.retention),
        "BACKUP_NAME": cluster_name,
        "BACKUP_STORE": target.store,
        "CONTROLLER_SERVICE": distribution.controller_service,
        "BACKUP_RECIPIENTS": " ".join(settings.recipients),
        **target.env,
    }
    if target.store == "s3":
        env.update(S3_CLIENT=S3_CLIENT, SSM_CLIENT=SSM_CLIENT,
                   S3_CLIENT_SCRIPT=read_script("aws/s3-object.py"))
    return env


def install_backup_over_ssh(host: str, ssh: Ssh, env: Mapping[str, pulumi.Input[str]],
                            after: Sequence[pulumi.Resource],
                            parent: pulumi.Resource) -> remote.Command:
    """`<host>-install-backup` on the controller, once the control plane is installed;
    destroying it (backups turned off) removes the timer, never a snapshot."""
    return run_step(host, STEP, on=ssh, create=INSTALL_BACKUP, env=env,
                    delete=REMOVE_BACKUP, depends_on=after, parent=parent)


def envelope_chunks(host: str, env: Mapping[str, pulumi.Input[str]]) -> list[pulumi.Output[str]]:
    """The install-backup envelope, gzipped and base64-encoded, in ENVELOPE_PARAMETERS
    pieces of equal length (check_envelope_fits)."""
    text = envelope(host, STEP, INSTALL_BACKUP, env)
    encoded = text.apply(_encoded)
    size = encoded.apply(lambda e: math.ceil(len(e) / ENVELOPE_PARAMETERS))
    return [pulumi.Output.all(encoded, size).apply(lambda v, i=index: v[0][i * v[1]:(i + 1) * v[1]])
            for index in range(ENVELOPE_PARAMETERS)]


def check_envelope_fits(host: str, env: Mapping[str, str]) -> None:
    """Refuses an envelope the parameters cannot hold, rendered with the values not known
    yet (a bucket's name) at their longest."""
    length = len(_encoded(render_envelope(host, STEP, INSTALL_BACKUP, env)))
    if length > ENVELOPE_PARAMETERS * SSM_CHUNK_CHARACTERS:
        raise ValueError(f"the install-backup step is {length} characters encoded, over the "
                         f"{ENVELOPE_PARAMETERS} SSM parameters' "
                         f"{ENVELOPE_PARAMETERS * SSM_CHUNK_CHARACTERS}")


def _encoded(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()


def backup_boot_step(parameters: Sequence[str], region: str) -> HostStep:
    """The boot step that reads the envelope from `parameters` (in order) and runs it."""
    return HostStep("install-backup", BOOT_INSTALL_BACKUP, {
        "STEP_ENVELOPE_SSM_PARAMETERS": " ".join(parameters),
        "AWS_REGION": region,
    })
