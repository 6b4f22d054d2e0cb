"""ssh.authorizedKeys: OpenSSH public key lines, each checked whole, all problems named
at once with their key path."""

import pytest

from config import ConfigError
from config.types import public_key_of
from tests.builders import bare_metal_config
from tests.config.loading import loads, problem_lines

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0b29sZWRtZWFuZDI1NTE5a2V5Zm9ydGVzdHM ops@new"
ECDSA = ("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBPq0=")


def test_keys_load_and_default_to_none():
    values = bare_metal_config()
    assert loads(values).ssh.authorized_keys == []
    values.setdefault("ssh", {})["authorizedKeys"] = [ED25519, f"  {ECDSA} "]
    assert loads(values).ssh.authorized_keys == [ED25519, ECDSA]


@pytest.mark.parametrize("bad", [
    "ssh-dss AAAAB3NzaC1kc3MAAACBAP1dd",                     # type OpenSSH turned off
    "AAAAC3NzaC1lZDI1NTE5AAAAIGZ0b29sZWRtZWFuZDI1NTE5",      # no type
    "ssh-ed25519",                                           # no body
    "ssh-ed25519 AAAA*not+base64/AAAAAAAAAAAAAAAAAAAAAA",     # not base64
    f'command="/bin/sh" {ED25519}',                          # options
])
def test_bad_keys_are_named_with_their_path_all_at_once(bad):
    values = bare_metal_config()
    values.setdefault("ssh", {})["authorizedKeys"] = [ED25519, bad, "nonsense"]
    found = problem_lines(values)
    assert any(p.startswith("gpu-cluster:ssh.authorizedKeys[1]: ") for p in found), found
    assert any(p.startswith("gpu-cluster:ssh.authorizedKeys[2]: ") for p in found), found
    assert not any("authorizedKeys[0]" in p for p in found), found


@pytest.mark.parametrize("bad", [f"{ED25519}\nssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAB",
                                 f"{ED25519} with\x1bescape"])
def test_keys_spanning_lines_or_with_control_characters_are_refused(bad):
    values = bare_metal_config()
    values.setdefault("ssh", {})["authorizedKeys"] = [ED25519, bad]
    found = problem_lines(values)
    mine = [p for p in found if p.startswith("gpu-cluster:ssh.authorizedKeys")]
    assert len(mine) == 1 and mine[0].startswith(
        "gpu-cluster:ssh.authorizedKeys: item 1 has a ") and mine[0].endswith(
        "it must be a single line of printable text"), found


def _problems(values: dict) -> list[str]:
    with pytest.raises(ConfigError) as error:
        loads(values)
    return [line.removeprefix("  - ") for line in str(error.value).splitlines()]


def test_revoked_keys_load_checked_like_the_kept_ones():
    values = bare_metal_config()
    assert loads(values).ssh.revoked_keys == []
    values.setdefault("ssh", {})["revokedKeys"] = [ECDSA, "ssh-dss AAAAB3NzaC1kc3MAAACBAP1dd"]
    found = _problems(values)
    assert any(p.startswith("gpu-cluster:ssh.revokedKeys[1]: ") for p in found), found
    values["ssh"]["revokedKeys"] = [ECDSA]
    assert loads(values).ssh.revoked_keys == [ECDSA]


def test_a_key_both_kept_and_revoked_is_refused_by_its_body():
    values = bare_metal_config()
    values.setdefault("ssh", {}).update(authorizedKeys=[ED25519],
                                        revokedKeys=[ECDSA, ED25519.replace("ops@new", "old")])
    found = _problems(values)
    assert any(p.startswith("gpu-cluster:ssh.revokedKeys[1]: is also in ssh.authorizedKeys")
               for p in found), found
    assert not any("revokedKeys[0]" in p for p in found), found


def test_revoking_the_key_the_program_logs_in_with_is_refused():
    values = bare_metal_config()
    login = public_key_of(values["sshPrivateKey"])
    values.setdefault("ssh", {})["revokedKeys"] = [f"{login} laptop"]
    found = _problems(values)
    assert any(p.startswith("gpu-cluster:ssh.revokedKeys[0]: is the public half of "
                            "sshPrivateKey") for p in found), found
    # The message names the key's role, never the private key.
    assert not any("PRIVATE KEY" in p for p in found)
