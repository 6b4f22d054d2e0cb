"""A host key collected as the README says (`ssh-keyscan -t ed25519`) goes through the config
loader and into the program's own SSH connection (`connection_to`); a real OpenSSH client
that trusts exactly that connection's hostKey, and offers only its type as pulumi-command
does, then logs in to the real sshd on loopback (loopback.py) and runs a step command, and
is refused by it when the configured key is another host's.

pulumi-command 1.2.1 checks the same way (provider/pkg/provider/remote/connection.go:88-94):
the configured key through x/crypto's ssh.ParseAuthorizedKey, ssh.FixedHostKey (the key the
server shows must equal it) and HostKeyAlgorithms = [its type]; the proxy's (the bastion's)
connection through the same SSHConfig (:204). Its Go code cannot run here (no Go toolchain
or provider binary), so OpenSSH stands in for the comparison."""

import subprocess
from pathlib import Path

import pulumi
import pytest

from components.common.remote_step import SshAccess, connection_to, step_command
from config.loader import load
from config.problems import ConfigError
from tests.builders import as_cli_config, bare_metal_config
from tests.hosts.loopback import LoopbackHost, loopback_host


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> LoopbackHost:
    with loopback_host(tmp_path_factory.mktemp("sshd")) as running:
        yield running


def _scanned(host: LoopbackHost) -> str:
    """What the README's `ssh-keyscan -t ed25519 ADDRESS | cut -d' ' -f2-` prints."""
    scan = subprocess.run(["ssh-keyscan", "-t", "ed25519", "-p", str(host.port), host.address],
                          capture_output=True, text=True, timeout=30, check=True)
    [line] = [line for line in scan.stdout.splitlines() if not line.startswith("#")]
    return line.split(" ", 1)[1]


def _another_key(directory: Path) -> str:
    key = directory / "impostor_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return " ".join(key.with_suffix(".pub").read_text().split()[:2])


def _program_connection(host: LoopbackHost, host_key: str, bastion_key: str):
    """The connection the program makes to a host configured with `host_key`, through a
    bastion configured with `bastion_key`: both as the stack's config loads them."""
    values = bare_metal_config(workers=1)
    values["hosts"][1]["sshHostKey"] = host_key
    if not host_key:
        del values["hosts"][1]["sshHostKey"]
    values["ssh"]["bastion"] = {"host": host.address, "port": host.port, "hostKey": bastion_key}
    file = as_cli_config(values)
    settings = load(file.config, file.secret_keys, file.stack)
    access = SshAccess(settings.ssh, settings.ssh_private_key, settings.bastion_private_key)
    return connection_to(settings.hosts[1], access)


def _login_trusting(host: LoopbackHost, host_key: str, directory: Path,
                    stdin: str = "") -> subprocess.CompletedProcess:
    """The program's step command on `host` by the real ssh client, trusting `host_key`
    only and offering only its algorithm."""
    known_hosts = directory / "known_hosts_from_config"
    known_hosts.write_text(f"[{host.address}]:{host.port} {host_key}\n")
    client = host.with_host_key(known_hosts)
    command = step_command("gpu000", "preflight", "create", host.user)
    return subprocess.run(
        ["ssh", *client._options("-p"), "-o", f"HostKeyAlgorithms={host_key.split()[0]}",
         f"{host.user}@{host.address}", command],
        input=stdin, capture_output=True, text=True, timeout=60)


def test_the_host_key_from_ssh_keyscan_is_the_one_the_connection_pins_and_it_is_accepted(
        host, tmp_path):
    scanned = _scanned(host)
    assert scanned == host.host_public_key

    connection = _program_connection(host, scanned, scanned)

    pinned = pulumi.get(connection, "host_key")
    assert pinned == scanned
    result = _login_trusting(host, pinned, tmp_path, stdin='echo "as $(id -un) for $1"\n')
    assert result.returncode == 0, result.stderr
    assert result.stdout == "as root for create\n"


def test_a_host_answering_with_another_key_is_refused_before_stdin_is_sent(host, tmp_path):
    marker = tmp_path / "never-written"
    connection = _program_connection(host, _another_key(tmp_path), host.host_public_key)

    result = _login_trusting(host, pulumi.get(connection, "host_key"), tmp_path,
                             stdin=f"touch {marker}\n")

    assert result.returncode != 0
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in result.stderr
    assert "Host key verification failed." in result.stderr
    assert not marker.exists()


def test_the_bastion_connection_pins_its_own_configured_key(host, tmp_path):
    right = _program_connection(host, host.host_public_key, host.host_public_key)
    wrong = _program_connection(host, host.host_public_key, _another_key(tmp_path))

    accepted = _login_trusting(host, pulumi.get(pulumi.get(right, "proxy"), "host_key"),
                               tmp_path)
    refused = _login_trusting(host, pulumi.get(pulumi.get(wrong, "proxy"), "host_key"),
                              tmp_path)

    assert accepted.returncode == 0, accepted.stderr
    assert refused.returncode != 0 and "Host key verification failed." in refused.stderr


def test_a_host_without_a_configured_key_gets_no_connection_at_all(host):
    # Without a key pulumi-command would accept whatever answers (ssh.InsecureIgnoreHostKey,
    # connection.go:96-97), so the stack is refused before any connection exists.
    with pytest.raises(ConfigError, match=r"no SSH host key for hosts gpu000 "):
        _program_connection(host, "", host.host_public_key)
