"""`gpu-cluster:backup`: scheduled snapshots of the control plane's state, kept outside the
controller, and where they go on each layout."""

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field

from config.model_base import Section
from config.partial import PartialConfig
from config.problems import Problem
from config.types import AbsolutePath, matching


# systemd.time(7) "Calendar Events": the shorthands, and `[WEEKDAYS] [DATE] TIME [UTC]`
# with `*`, lists (`,`), ranges (`..`) and repetitions (`/`) in each field. A subset:
# what a backup schedule needs, every character of it safe on a unit's line.
_SHORTHANDS = ("minutely", "hourly", "daily", "weekly", "monthly", "quarterly",
               "semiannually", "yearly", "annually")
_DAY_NAME = r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_DAYS = rf"{_DAY_NAME}(\.\.{_DAY_NAME})?(,{_DAY_NAME}(\.\.{_DAY_NAME})?)*"
_VALUE = r"\d{1,4}(\.\.\d{1,4})?(/\d{1,4})?"
_FIELD = rf"(\*(/\d{{1,4}})?|{_VALUE}(,{_VALUE})*)"
_CALENDAR = re.compile(
    rf"(?:(?P<days>{_DAYS}) )?"
    rf"(?:(?P<date>{_FIELD}-{_FIELD}(-{_FIELD})?) )?"
    rf"(?P<time>{_FIELD}:{_FIELD}(:{_FIELD})?)"
    r"(?: UTC)?")
# Range of each field, in the order they are written.
_DATE_RANGES = ((1970, 2199), (1, 12), (1, 31))
_TIME_RANGES = ((0, 23), (0, 59), (0, 59))


def _numbers_within(text: str, ranges: tuple) -> bool:
    fields = text.split("-" if "-" in text else ":")
    if len(fields) == 2 and ranges is _DATE_RANGES:
        ranges = ranges[1:]  # MONTH-DAY
    for field, (low, high) in zip(fields, ranges):
        for value in re.split(r"[,.]+", field):
            number, _, step = value.partition("/")
            if number != "*" and not low <= int(number) <= high:
                return False
            if step and int(step) == 0:
                return False
    return True


def _on_calendar(value: str) -> str:
    match = _CALENDAR.fullmatch(value)
    if value in _SHORTHANDS or (
            match and _numbers_within(match["time"], _TIME_RANGES)
            and (match["date"] is None or _numbers_within(match["date"], _DATE_RANGES))):
        return value
    raise ValueError(f"'{value}' is not a systemd calendar event like 'daily' or "
                     "'*-*-* 03:00:00' (systemd.time(7); check one with `systemd-analyze "
                     "calendar`)")


OnCalendar = Annotated[str, AfterValidator(_on_calendar)]

# An age X25519 recipient: Bech32 (BIP 173) with the human-readable part "age", 32 bytes
# of key as 52 characters and a 6-character checksum (age's spec, "The X25519 recipient
# type", https://github.com/C2SP/C2SP/blob/main/age.md; filippo.io/age x25519.go
# ParseX25519Recipient). The checksum catches a mistyped key before a snapshot is made
# that nobody can decrypt.
_BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_AGE_RECIPIENT = re.compile(rf"age1[{_BECH32}]{{58}}")


def _bech32_checksum_valid(text: str) -> bool:
    """BIP 173's verify_checksum (https://github.com/bitcoin/bips/blob/master/bip-0173.mediawiki,
    "Checksum"), for a lowercase string already matching _AGE_RECIPIENT."""
    hrp, _, data = text.rpartition("1")
    values = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    values += [_BECH32.index(c) for c in data]
    checksum = 1
    for value in values:
        top = checksum >> 25
        checksum = (checksum & 0x1ffffff) << 5 ^ value
        for bit, generator in enumerate((0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd,
                                         0x2a1462b3)):
            checksum ^= generator if (top >> bit) & 1 else 0
    return checksum == 1


def _age_recipient(value: str) -> str:
    if not (_AGE_RECIPIENT.fullmatch(value) and _bech32_checksum_valid(value)):
        raise ValueError("is not an age public key (age1 and 58 lowercase characters, as "
                         "`age-keygen` prints it; its checksum must match)")
    return value


def _distinct(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError("lists a key twice")
    return values


AgeRecipient = Annotated[str, AfterValidator(_age_recipient)]
# S3 keeps at most 100 noncurrent versions by count (NewerNoncurrentVersions, "up to
# 100", https://docs.aws.amazon.com/AmazonS3/latest/API/API_NoncurrentVersionExpiration.html).
MAX_RETENTION = 101
# An IAM user or role of an account, or the account itself (its root)
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-arns).
_IAM_PRINCIPAL = re.compile(
    r"arn:aws(-cn|-us-gov)?:iam::\d{12}:(root|(user|role)(/[\w+=,.@-]+)+)")


IamPrincipal = Annotated[str, AfterValidator(matching(
    _IAM_PRINCIPAL, "the ARN of an IAM user or role (arn:aws:iam::123456789012:role/NAME) or an "
    "account's root"))]


class BackupSettings(Section):
    # Unset: on wherever there is a place outside the controller to keep them (S3 on the
    # AWS layouts; on bare metal `path`, or the NFS export of a server other than it).
    enabled: Optional[bool] = None
    """Scheduled snapshots of the control plane's state, kept outside the controller (see
    [Backups](day-2.md#backups)); unset: on wherever there is such a place; `true` makes it a config
    error when there is none; `false` turns them off."""
    # When a snapshot is taken, as systemd's OnCalendar= (the controller's time zone).
    schedule: OnCalendar = "*-*-* 03:30:00"
    """When, as systemd's `OnCalendar=` (`daily`, `Mon..Fri 02:00`, `*-*-* 00/6:00:00`; try one with
    `systemd-analyze calendar`), the controller's time zone, up to 10 minutes later at random."""
    # How many snapshots are kept.
    retention: int = Field(default=7, ge=1, le=MAX_RETENTION)
    """Snapshots kept (1 to 101: S3 keeps at most 100 older versions by count)."""
    # Bare metal: a folder on the controller to keep them in (off-host storage mounted
    # there); the default is the NFS export's folder BACKUP_FOLDER.
    path: Optional[AbsolutePath] = None
    """Bare metal: the folder on the controller to keep them in (other storage mounted there);
    default: the folder `gpu-cluster-backups/<cluster>` of the NFS export when another machine
    serves it."""
    # The age public keys every snapshot is encrypted to, on the controller before it
    # leaves (all stores). Their private keys (identities) stay with whoever restores:
    # nothing on the cluster can decrypt a snapshot. Required when backups are on.
    recipients: Annotated[list[AgeRecipient], AfterValidator(_distinct)] = []
    """The age public keys (`age1...`, as `age-keygen` prints them; the checksum is checked) every
    snapshot is encrypted to on the controller; required when backups are on (see
    [Backups](day-2.md#backups))."""
    # AWS layouts: who may assume the restore role, the only one that can read and decrypt
    # the snapshots. Unset: the account's administrators (its root: only principals whose
    # own policies allow sts:AssumeRole on the role).
    restore_principals: list[IamPrincipal] = []
    """AWS layouts: the IAM users or roles (ARNs) that may assume the restore role, the only
    principal that reads and decrypts a snapshot; empty: the account's administrators (principals
    whose own policies allow `sts:AssumeRole` on it)."""
    # AWS layouts: each snapshot is locked (S3 Object Lock, governance mode) for this many
    # days: nobody without s3:BypassGovernanceRetention, the controller least of all, can
    # delete or replace it before then.
    lock_days: int = Field(default=7, ge=1, le=36500)
    """AWS layouts: each snapshot is locked (S3 Object Lock, governance mode) for this many days:
    nobody without `s3:BypassGovernanceRetention` deletes or replaces it before then."""


# The folder of the NFS export the snapshots go to.
BACKUP_FOLDER = "gpu-cluster-backups"
Store = Literal["s3", "nfs", "path"]


def backup_store(layout: Optional[str], backup: BackupSettings, storage,
                 controller: Optional[str]) -> Optional[Store]:
    """Where the snapshots go, or None when backups are off: S3 on the AWS layouts; on
    bare metal `backup.path`, else the NFS export when another machine serves it."""
    if backup.enabled is False:
        return None
    if layout in ("hybrid", "cloud"):
        return "s3"
    if backup.path is not None:
        return "path"
    nfs = storage.nfs if storage is not None else None
    if nfs is not None and (nfs.server is not None or nfs.host != controller):
        return "nfs"
    return None


def backup_checks(cfg: PartialConfig) -> list[Problem]:
    backup = cfg.backup
    if backup is None or not cfg.complete("hosts"):
        return []
    problems = []
    if backup.path is not None and cfg.layout in ("hybrid", "cloud"):
        problems.append(Problem("backup.path", "is for bare metal; on the AWS layouts the "
                                "snapshots go to an S3 bucket the program creates"))
    if cfg.layout not in ("hybrid", "cloud"):
        problems += [Problem(f"backup.{key}", "is for the AWS layouts, whose snapshots go to "
                             "an S3 bucket the program creates")
                     for key, field in (("restorePrincipals", "restore_principals"),
                                        ("lockDays", "lock_days"))
                     if field in backup.model_fields_set]
    controller = next((host.name for _, host in cfg.hosts if host.runs_control_plane), None)
    store = backup_store(cfg.layout, backup, cfg.storage, controller)
    if store == "nfs" and cfg.tuning is not None and not cfg.tuning.install_nfs_client:
        problems.append(Problem("backup", "the snapshots go to the NFS export, which the "
                                "controller mounts with the NFS client that "
                                "tuning.installNfsClient: false leaves out; set backup.path "
                                "or backup.enabled: false, or install the client"))
    if store is not None and not backup.recipients:
        problems.append(Problem("backup.recipients", "backups are on and encrypted on the "
                                "controller to these age public keys: list at least one "
                                "(`age-keygen -o restore-key.txt` prints it; keep that file, "
                                "which restores, off the cluster), or set backup.enabled: "
                                "false"))
    if backup.enabled and cfg.layout == "bare-metal" and store is None:
        problems.append(Problem("backup.enabled", "there is nowhere outside the controller "
                                "to keep the snapshots: set backup.path (a folder on the "
                                "controller where other storage is mounted) or storage.nfs "
                                "on a server other than the controller"))
    return problems
