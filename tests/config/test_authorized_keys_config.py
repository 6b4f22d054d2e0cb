"""ssh.authorizedKeys: OpenSSH public key lines, each checked whole, all problems named
at once with their key path."""

import pytest

from config import ConfigError, load
from tests.conftest import as_cli_config, bare_metal_config

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ0b29sZWRtZWFuZDI1NTE5a2V5Zm9ydGVzdHM ops@new"
ECDSA = ("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBPq0=")


def loaded(values: dict):
    cli = as_cli_config(values)
    return load(cli.config, cli.secret_keys, stack="test")


def test_keys_load_and_default_to_none():
    values = bare_metal_config()
    assert loaded(values).ssh.authorized_keys == []
    values.setdefault("ssh", {})["authorizedKeys"] = [ED25519, f"  {ECDSA} "]
    assert loaded(values).ssh.authorized_keys == [ED25519, ECDSA]


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
    cli = as_cli_config(values)
    with pytest.raises(ConfigError) as caught:
        load(cli.config, cli.secret_keys, stack="test")
    found = [str(problem) for problem in caught.value.problems]
    assert any(p.startswith("gpu-cluster:ssh.authorizedKeys[1]: ") for p in found), found
    assert any(p.startswith("gpu-cluster:ssh.authorizedKeys[2]: ") for p in found), found
    assert not any("authorizedKeys[0]" in p for p in found), found


@pytest.mark.parametrize("bad", [f"{ED25519}\nssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAB",
                                 f"{ED25519} with\x1bescape"])
def test_keys_spanning_lines_or_with_control_characters_are_refused(bad):
    values = bare_metal_config()
    values.setdefault("ssh", {})["authorizedKeys"] = [ED25519, bad]
    cli = as_cli_config(values)
    with pytest.raises(ConfigError) as caught:
        load(cli.config, cli.secret_keys, stack="test")
    found = [str(problem) for problem in caught.value.problems]
    mine = [p for p in found if p.startswith("gpu-cluster:ssh.authorizedKeys")]
    assert len(mine) == 1 and mine[0].startswith(
        "gpu-cluster:ssh.authorizedKeys: item 1 has a ") and mine[0].endswith(
        "it must be a single line of printable text"), found
