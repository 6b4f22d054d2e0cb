"""The loopback SSH host (loopback.py) does what later tests rely on: the program's own step
command logs in by key, checks sudo and runs stdin as root through the real sudo; an SFTP
upload arrives byte for byte; a host key other than the one in known_hosts is refused."""

import hashlib
import os
import pwd
import secrets
import subprocess
from pathlib import Path

import pytest

from components.common.remote_step import step_command
from tests.hosts.loopback import LoopbackHost, loopback_host


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> LoopbackHost:
    with loopback_host(tmp_path_factory.mktemp("sshd")) as running:
        yield running


def test_the_programs_step_command_runs_stdin_as_root_through_sudo(host):
    command = step_command("gpu001", "preflight", "create", host.user)
    assert command.endswith("sudo -n bash -s -- create")

    result = host.run(command, stdin='echo "$(id -u) $(id -un) $1 $SUDO_USER"\n')

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"0 root create {host.user}\n"


def test_the_login_itself_is_the_unprivileged_user(host):
    result = host.run("id -un; id -u")

    assert result.returncode == 0, result.stderr
    name, uid = result.stdout.split()
    assert name == host.user and uid != "0"


@pytest.mark.parametrize("under", ["", "/tmp/"], ids=["relative", "absolute"])
def test_an_upload_arrives_byte_for_byte(host, tmp_path, under):
    local = tmp_path / "payload.bin"
    # Every byte value, NUL and line ends included, over more than one SFTP write.
    local.write_bytes(bytes(range(256)) + os.urandom(300_000))
    folder = f"{under}uploads-{secrets.token_hex(4)}"
    remote = f"{folder}/nested/deeper/payload.bin"
    # The same machine: a relative path is under the user's home.
    arrived = Path(pwd.getpwnam(host.user).pw_dir) / remote

    try:
        uploaded = host.put(local, remote)
        assert uploaded.returncode == 0, uploaded.stderr
        checked = host.run(f"sha256sum {remote}")
        assert arrived.read_bytes() == local.read_bytes()
        assert arrived.owner() == host.user
    finally:
        host.run(f"rm -rf {folder}")

    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.split()[0] == hashlib.sha256(local.read_bytes()).hexdigest()


def _known_hosts_with_another_key(host: LoopbackHost, directory: Path) -> Path:
    key = directory / "other_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    other = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(f"[{host.address}]:{host.port} {other}\n")
    return known_hosts


@pytest.mark.parametrize("client", ["ssh", "sftp"])
def test_a_host_key_other_than_the_known_one_is_refused(host, tmp_path, client):
    impostor = host.with_host_key(_known_hosts_with_another_key(host, tmp_path))
    payload = tmp_path / "payload"
    payload.write_text("never sent\n")

    result = impostor.run("true") if client == "ssh" else impostor.put(payload, "refused")

    assert result.returncode != 0
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in result.stderr
    assert "Host key verification failed." in result.stderr
