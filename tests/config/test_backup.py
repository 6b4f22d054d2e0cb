"""gpu-cluster:backup: the schedule is a calendar event systemd itself accepts, every
problem is named by its key and reported at once, where the snapshots go on each layout
(config/backup.py backup_store), and backups are refused without an age public key to
encrypt them to, each key checked as age itself checks it."""

import shutil
import subprocess

import pytest

from config.backup import BackupSettings, backup_store
from config.storage import NfsBackend, StorageSettings
from tests.builders import TEST_AGE_RECIPIENT, bare_metal_config, cloud_config, hybrid_config
from tests.config.loading import loads, problems_of

ACCEPTED = ["*-*-* 03:30:00", "daily", "hourly", "Mon..Fri 02:00", "Sat,Sun *-*-* 04:15:00 UTC",
            "*-*-01 00:00", "*-*-* 00/6:00:00", "*:0/15", "12-31 23:59:59"]
REFUSED = ["*-*-* 25:00", "*-13-01 00:00", "*:60", "*-*-* 03:30:00; rm -rf /",
           "*-*-* 03:30:00\nExecStart=/bin/sh", "every day", "", "*-*-* 03:00 Europe/Berlin%n",
           "00/0:00"]


def systemd_accepts(schedule: str) -> bool:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    return subprocess.run([analyze, "calendar", schedule], capture_output=True,
                          timeout=30).returncode == 0


def test_the_default_schedule_is_one_systemd_accepts():
    assert systemd_accepts(BackupSettings().schedule)


@pytest.mark.parametrize("schedule", ACCEPTED)
def test_an_accepted_schedule_is_one_systemd_accepts(schedule):
    values = bare_metal_config()
    values["backup"] = {"schedule": schedule, "path": "/mnt/backups",
                        "recipients": [TEST_AGE_RECIPIENT]}
    assert loads(values).backup.schedule == schedule
    assert systemd_accepts(schedule)


@pytest.mark.parametrize("schedule", REFUSED)
def test_a_schedule_outside_the_grammar_is_refused_at_its_key(schedule):
    values = bare_metal_config()
    values["backup"] = {"schedule": schedule}
    assert [path for path, _ in problems_of(values)] == ["backup.schedule"]


@pytest.mark.parametrize("schedule", ["*-*-* 25:00", "*-13-01 00:00", "*:60", "every day"])
def test_what_is_refused_for_its_values_systemd_refuses_too(schedule):
    assert not systemd_accepts(schedule)


def test_every_problem_of_the_section_is_reported_at_once():
    values = hybrid_config()
    values["backup"] = {"schedule": "soon", "retention": 0, "path": "relative/folder"}
    paths = sorted(path for path, _ in problems_of(values))
    # The section's other rules still run, with the broken keys left out (no recipients).
    assert paths == ["backup.path", "backup.recipients", "backup.retention", "backup.schedule"]


# retention: a count S3 can keep; lockDays: a retention S3 accepts.
@pytest.mark.parametrize("valid, key, field, value, ok", [
    *[(cloud_config, "retention", "retention", value, ok)
      for value, ok in [(1, True), (101, True), (0, False), (102, False)]],
    *[(hybrid_config, "lockDays", "lock_days", value, ok)
      for value, ok in [(1, True), (36500, True), (0, False), (36501, False)]]])
def test_counts_are_within_what_s3_accepts(valid, key, field, value, ok):
    values = valid()
    values["backup"] = {"recipients": [TEST_AGE_RECIPIENT], key: value}
    if ok:
        assert getattr(loads(values).backup, field) == value
    else:
        assert [path for path, _ in problems_of(values)] == [f"backup.{key}"]


def test_a_path_is_for_bare_metal():
    values = cloud_config()
    values["backup"] = {"path": "/mnt/backups", "recipients": [TEST_AGE_RECIPIENT]}
    [(path, message)] = problems_of(values)
    assert path == "backup.path" and "S3 bucket" in message


def test_enabled_without_a_place_outside_the_controller_is_refused():
    values = bare_metal_config()  # NFS served by the controller itself
    values["backup"] = {"enabled": True, "recipients": [TEST_AGE_RECIPIENT]}
    [(path, message)] = problems_of(values)
    assert path == "backup.enabled" and "backup.path" in message


def test_the_nfs_export_needs_the_nfs_client_on_the_controller():
    values = bare_metal_config()
    values["storage"] = {"nfs": {"server": "192.168.2.50"}}
    values["tuning"] = {"installNfsClient": False}
    values["backup"] = {"recipients": [TEST_AGE_RECIPIENT]}
    [(path, message)] = problems_of(values)
    assert path == "backup" and "tuning.installNfsClient" in message
    values["backup"] = {"enabled": False}
    assert loads(values).backup.enabled is False


def test_unset_it_stays_off_where_there_is_nowhere_to_keep_them():
    settings = loads(bare_metal_config())
    assert backup_store(settings.layout, settings.backup, settings.storage,
                        settings.controller.name) is None


NFS_ON_CONTROLLER = StorageSettings(nfs=NfsBackend(host="controller"))
NFS_ON_WORKER = StorageSettings(nfs=NfsBackend(host="gpu000"))
NFS_SERVER = StorageSettings(nfs=NfsBackend(server="192.168.2.50"))


@pytest.mark.parametrize("layout, backup, storage, store", [
    ("cloud", {}, None, "s3"),
    ("hybrid", {}, NFS_SERVER, "s3"),
    ("hybrid", {"enabled": False}, None, None),
    ("bare-metal", {}, NFS_ON_CONTROLLER, None),
    ("bare-metal", {}, NFS_ON_WORKER, "nfs"),
    ("bare-metal", {}, NFS_SERVER, "nfs"),
    ("bare-metal", {"path": "/mnt/backups"}, NFS_ON_CONTROLLER, "path"),
    ("bare-metal", {"path": "/mnt/backups"}, NFS_SERVER, "path"),
    ("bare-metal", {"enabled": False}, NFS_SERVER, None),
])
def test_where_the_snapshots_go(layout, backup, storage, store):
    assert backup_store(layout, BackupSettings(**backup), storage, "controller") == store


# Public keys printed by age-keygen (age 1.1.1); their identities were not kept.
OTHER_RECIPIENT = "age1k9lrxq8lust2l5ev97xfpknx3tfqr3chjvmhp8z5gsvx7xn8we3qnzlamk"
# The X25519 recipient of age's own README (https://github.com/FiloSottile/age, "Usage").
README_RECIPIENT = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"


@pytest.mark.parametrize("values", [
    bare_metal_config() | {"backup": {"path": "/mnt/backups"}},
    bare_metal_config() | {"storage": {"nfs": {"server": "192.168.2.50"}}, "backup": {}},
    hybrid_config() | {"backup": {}},
    cloud_config() | {"backup": {"schedule": "daily"}},
], ids=["path", "nfs", "hybrid-s3", "cloud-s3"])
def test_backups_without_a_recipient_are_refused_naming_the_key(values):
    [(path, message)] = problems_of(values)
    assert path == "backup.recipients"
    assert "age-keygen" in message and "backup.enabled: false" in message


def test_backups_turned_off_or_nowhere_to_go_need_no_recipient():
    assert loads(bare_metal_config() | {"backup": {}}).backup.recipients == []
    values = cloud_config() | {"backup": {"enabled": False}}
    assert loads(values).backup.enabled is False


def test_recipients_are_kept_as_given():
    values = cloud_config() | {"backup": {"recipients": [TEST_AGE_RECIPIENT, OTHER_RECIPIENT,
                                                         README_RECIPIENT]}}
    assert loads(values).backup.recipients == [TEST_AGE_RECIPIENT, OTHER_RECIPIENT,
                                               README_RECIPIENT]


def _one_changed(key: str) -> str:
    """The key with one character of its data replaced by another Bech32 character."""
    position = 20
    replacement = "q" if key[position] != "q" else "p"
    return key[:position] + replacement + key[position + 1:]


@pytest.mark.parametrize("recipient", [
    _one_changed(TEST_AGE_RECIPIENT),  # a typo: the Bech32 checksum no longer matches
    TEST_AGE_RECIPIENT[:-1],  # one character short
    TEST_AGE_RECIPIENT.upper(),  # age writes them lowercase
    TEST_AGE_RECIPIENT + " " + OTHER_RECIPIENT,  # two keys in one item
    "AGE-SECRET-KEY-1" + "Q" * 58,  # an identity, never to be in config
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
    "age1" + "b" * 58,  # 'b' is not in Bech32's alphabet
    "",
])
def test_a_recipient_that_is_not_an_age_public_key_is_refused_at_its_key(recipient):
    values = cloud_config() | {"backup": {"recipients": [TEST_AGE_RECIPIENT, recipient]}}
    [(path, message)] = problems_of(values)
    assert path == "backup.recipients[1]"
    assert "is not an age public key" in message
    assert "AGE-SECRET-KEY" not in message


def test_a_recipient_with_a_line_break_is_refused_at_its_key():
    values = cloud_config() | {"backup": {"recipients": [TEST_AGE_RECIPIENT + "\n"]}}
    [(path, message)] = problems_of(values)
    assert path == "backup.recipients" and "line break" in message


def test_a_recipient_listed_twice_is_refused():
    values = cloud_config() | {"backup": {"recipients": [TEST_AGE_RECIPIENT] * 2}}
    [(path, message)] = problems_of(values)
    assert path == "backup.recipients" and "twice" in message


def test_age_itself_accepts_what_the_config_accepts_and_refuses_a_changed_key(tmp_path):
    """The validator against the real age: a key it accepts encrypts; one it refuses,
    age refuses too."""
    age = shutil.which("age")
    if age is None:
        pytest.skip("age is not installed (apt-get install age)")

    def encrypts(recipient: str) -> bool:
        return subprocess.run([age, "--encrypt", "--recipient", recipient, "-o",
                               str(tmp_path / "out")], input=b"snapshot",
                              capture_output=True, timeout=30).returncode == 0

    for recipient in (TEST_AGE_RECIPIENT, OTHER_RECIPIENT, README_RECIPIENT):
        assert encrypts(recipient)
    assert not encrypts(_one_changed(TEST_AGE_RECIPIENT))

@pytest.mark.parametrize("principal, ok", [
    ("arn:aws:iam::123456789012:role/restore-operators", True),
    ("arn:aws:iam::123456789012:user/team/alice", True),
    ("arn:aws:iam::123456789012:root", True),
    ("arn:aws:iam::123456789012:role/*", False),   # a wildcard names everyone
    ("*", False),
    ("arn:aws:sts::123456789012:assumed-role/r/s", False),  # a session, not a principal
    ("arn:aws:iam::123456789012:role/a\"}, {\"AWS\": \"*", False),
])
def test_restore_principals_are_iam_users_roles_or_an_account(principal, ok):
    values = cloud_config()
    values["backup"] |= {"restorePrincipals": [principal]}
    if ok:
        assert loads(values).backup.restore_principals == [principal]
    else:
        [(path, message)] = problems_of(values)
        assert path == "backup.restorePrincipals[0]" and "not the ARN" in message


def test_the_restore_role_and_the_lock_are_for_the_aws_layouts():
    values = bare_metal_config()
    values["storage"] = {"nfs": {"server": "192.168.2.50"}}
    values["backup"] = {"recipients": [TEST_AGE_RECIPIENT],
                        "restorePrincipals": ["arn:aws:iam::123456789012:root"], "lockDays": 3}
    problems = problems_of(values)
    assert sorted(path for path, _ in problems) == ["backup.lockDays", "backup.restorePrincipals"]
    assert all("AWS layouts" in message for _, message in problems)

