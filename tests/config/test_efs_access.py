"""storage.efs: IAM and TLS where every node has an AWS identity (cloud), the explicit
anonymousNfs only where on-prem hosts mount EFS (hybrid), and the access points' keys
checked at the boundary, every problem at once."""

import pytest

from config.storage import efs_mounts_with_iam
from tests.builders import cloud_config, hybrid_config
from tests.config.loading import loads, problem_lines


def with_efs(values: dict, **efs) -> dict:
    values["storage"] = {"efs": efs}
    return values


def test_the_cloud_layout_and_hybrid_with_an_issuer_mount_with_iam():
    assert efs_mounts_with_iam("cloud")
    assert not efs_mounts_with_iam("hybrid") and not efs_mounts_with_iam("bare-metal")
    issuer = loads(with_efs(hybrid_config(), issuerBucket="gpu-lab-issuer")).storage.efs
    assert efs_mounts_with_iam("hybrid", issuer)
    assert not efs_mounts_with_iam("bare-metal", issuer)


def test_a_hybrid_stack_with_an_issuer_needs_no_anonymous_nfs():
    efs = loads(with_efs(hybrid_config(), issuerBucket="gpu-lab-issuer")).storage.efs
    assert efs.anonymous_nfs is False


def test_a_cloud_stack_needs_no_anonymous_nfs():
    settings = loads(with_efs(cloud_config()))
    assert settings.storage.efs.anonymous_nfs is False
    assert (settings.storage.efs.directory_perms, settings.storage.efs.gid_range_start,
            settings.storage.efs.gid_range_end) == ("700", 50000, 60000)


def test_a_hybrid_stack_must_say_its_on_prem_hosts_mount_without_iam():
    problems = problem_lines(with_efs(hybrid_config()))
    assert [p for p in problems if p.startswith("gpu-cluster:storage.efs.anonymousNfs: ")] == [
        p for p in problems if "must be true on the hybrid layout without "
        "storage.efs.issuerBucket: its on-prem hosts then have no AWS identity" in p], problems
    assert len(problems) == 1


def test_access_point_keys_are_refused_where_claims_are_no_access_points():
    problems = problem_lines(with_efs(hybrid_config(), anonymousNfs=True, directoryPerms="750",
                                      gidRangeEnd=70000))
    assert sorted(problems) == [
        "gpu-cluster:storage.efs.directoryPerms: is only used where the claims are EFS "
        "access points (cloud, or hybrid with storage.efs.issuerBucket); remove it",
        "gpu-cluster:storage.efs.gidRangeEnd: is only used where the claims are EFS "
        "access points (cloud, or hybrid with storage.efs.issuerBucket); remove it"]


@pytest.mark.parametrize("efs, path, fragment", [
    ({"directoryPerms": "rwx"}, "storage.efs.directoryPerms",
     "'rwx' is not an octal file mode like 700 or 0750"),
    ({"directoryPerms": "700; rm -rf /"}, "storage.efs.directoryPerms", "is not an octal"),
    ({"directoryPerms": "7000\n"}, "storage.efs.directoryPerms", "has a line break"),
    ({"gidRangeStart": 0}, "storage.efs.gidRangeStart", "greater than or equal to 1"),
    ({"gidRangeEnd": 2**32}, "storage.efs.gidRangeEnd", "less than or equal to 4294967294"),
    ({"gidRangeStart": 60000, "gidRangeEnd": 60000}, "storage.efs.gidRangeEnd",
     "60000 must be greater than gidRangeStart 60000"),
    ({"gidRangeStart": "many"}, "storage.efs.gidRangeStart", "must be a whole number"),
], ids=["mode letters", "mode with a command", "mode with a newline", "zero id",
        "id beyond 32 bits", "empty range", "not a number"])
def test_bad_access_point_settings_name_the_key(efs, path, fragment):
    problems = problem_lines(with_efs(cloud_config(), **efs))
    assert any(p.startswith(f"gpu-cluster:{path}: ") and fragment in p for p in problems), \
        problems


def test_every_efs_problem_at_once():
    # A field's own problem, and a rule across keys beside another section's problem (a
    # section with a field problem is not checked across keys: config/partial.py).
    problems = problem_lines(with_efs(cloud_config(), directoryPerms="9", gidRangeEnd=2))
    assert [p.split(": ")[0] for p in problems] == ["gpu-cluster:storage.efs.directoryPerms"]
    values = with_efs(cloud_config(), gidRangeStart=5, gidRangeEnd=4)
    values["pools"][0]["count"] = -1
    paths = sorted(p.split(": ")[0] for p in problem_lines(values))
    assert paths == ["gpu-cluster:pools[0] (gpu).count", "gpu-cluster:storage.efs.gidRangeEnd"]
