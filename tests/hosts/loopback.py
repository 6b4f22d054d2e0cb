"""A real OpenSSH server and sudo on loopback, for tests that run the program's SSH commands
as they are and upload files over SFTP (as pulumi-command's CopyToRemote does).

`loopback_host(directory)` starts /usr/sbin/sshd on a config of its own in `directory`
(never /etc/ssh/sshd_config, nor the system's port 22), listening on 127.0.0.1 only, with
a fresh ed25519 host key, and lets in one dedicated unprivileged user, by key only. That
user has passwordless sudo through a drop-in of its own, so `sudo -n bash -s` runs as on
a host the program prepares. The user, its home and the drop-in stay on the machine
(made again idempotently by the next run); the client key a run added to the user's
authorized_keys is removed when it ends. Several pytest workers may run one each: each has
its own directory, port and key; what they share (the user, its authorized_keys) is
changed under a lock. The clients are the real `ssh` and `sftp`, told to read no config,
agent or known_hosts but the host's own.
"""

import contextlib
import dataclasses
import fcntl
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

import pytest
from tests.builders import run_checked

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
USER = "gpu-cluster-ssh-test"
# A second login user with no sudo rule at all, for hosts where the program's user lacks it.
USER_WITHOUT_SUDO = "gpu-cluster-ssh-nosudo"
SUDOERS = Path("/etc/sudoers.d") / USER
# sshd's privilege separation folder: it refuses to start without it (Debian's unit makes
# it with RuntimeDirectory=sshd, which nothing runs here).
PRIVSEP_DIR = Path("/run/sshd")
# Held while the user, its authorized_keys or the drop-in change (parallel workers).
LOCK = Path("/run") / f"{USER}.lock"
START_SECONDS = 10
TOOLS = ("sudo", "visudo", "useradd", "usermod", "ssh", "sftp", "ssh-keygen")


@dataclass(frozen=True)
class LoopbackHost:
    """The running sshd: where it listens, who logs in with which key, and the host key
    the client accepts (known_hosts)."""

    address: str
    port: int
    user: str
    private_key: Path
    known_hosts: Path
    host_public_key: str  # "ssh-ed25519 AAAA...", as pulumi-command's host_key takes it

    def run(self, command: str, stdin: str = "",
            timeout: float = 60) -> subprocess.CompletedProcess:
        """`command` through the real ssh client, as the user, `stdin` on its stdin (text)."""
        return subprocess.run(["ssh", *self._options("-p"), self._login(), command],
                              input=stdin, capture_output=True, text=True, timeout=timeout)

    def put(self, local: Path, remote: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Uploads `local` to `remote` (relative to the user's home, or absolute) through
        the real sftp client in batch mode, after making the remote parent folders as
        CopyToRemote's MkdirAll does ("-mkdir": one that exists is no error)."""
        parents = reversed(PurePosixPath(remote).parents[:-1])
        batch = [f"-mkdir {_sftp_quoted(str(parent))}" for parent in parents]
        batch.append(f"put {_sftp_quoted(str(local))} {_sftp_quoted(remote)}")
        return subprocess.run(["sftp", "-b", "-", *self._options("-P"), self._login()],
                              input="\n".join(batch) + "\n", capture_output=True, text=True,
                              timeout=timeout)

    def with_host_key(self, known_hosts: Path) -> "LoopbackHost":
        """The same host, with the client trusting the keys in `known_hosts` instead."""
        return dataclasses.replace(self, known_hosts=known_hosts)

    def _login(self) -> str:
        return f"{self.user}@{self.address}"

    def _options(self, port_flag: str) -> list[str]:
        # -F /dev/null: not root's ~/.ssh/config; no agent and only this key; only this
        # known_hosts, and a host key missing or different from it is refused.
        return ["-F", "/dev/null", port_flag, str(self.port), "-i", str(self.private_key),
                "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10"]


def _sftp_quoted(path: str) -> str:
    # sftp's batch parser takes a double-quoted argument with \ escapes.
    if any(not char.isprintable() for char in path):
        raise ValueError(f"{path!r}: sftp's batch lines cannot hold it")
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _problem() -> Optional[str]:
    if os.geteuid() != 0:
        return "the loopback SSH host needs root (a login user, sudoers, sshd)"
    if not Path(SSHD).exists() or not Path(SFTP_SERVER).exists():
        return "sshd is not installed (apt-get install openssh-server)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install sudo openssh-client)"
    return None


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _ensure_user(user: str = USER) -> Path:
    """The user (with a home and a shell), able to log in by key, with passwordless sudo
    (USER only); returns its home. Each part is made again only when missing or different."""
    if subprocess.run(["id", "-u", user], capture_output=True).returncode != 0:
        run_checked("useradd", "--create-home", "--shell", "/bin/bash", user)
    # useradd leaves the password "!" (locked), which sshd refuses without PAM even for a
    # key; "*" has no password that could match, but is not locked.
    run_checked("usermod", "-p", "*", user)
    if user != USER:
        return Path(run_checked("getent", "passwd", user).split(":")[5])
    rule = f"{USER} ALL=(ALL:ALL) NOPASSWD: ALL\n"
    if not SUDOERS.exists() or SUDOERS.read_text() != rule:
        # sudo skips files in sudoers.d whose names hold a dot, so the draft is never read.
        draft = SUDOERS.with_name(f".{USER}.draft")
        draft.write_text(rule)
        draft.chmod(0o440)
        run_checked("visudo", "-cf", str(draft))
        draft.replace(SUDOERS)
    return Path(run_checked("getent", "passwd", USER).split(":")[5])


def _authorize(home: Path, public_key: str, add: bool, user: str = USER) -> None:
    """Adds `public_key` to the user's authorized_keys, or removes it; owned by the user
    and private, as sshd's StrictModes wants."""
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    keys = ssh_dir / "authorized_keys"
    lines = keys.read_text().splitlines() if keys.exists() else []
    lines = [line for line in lines if line != public_key] + ([public_key] if add else [])
    keys.write_text("".join(f"{line}\n" for line in lines))
    for path in (ssh_dir, keys):
        shutil.chown(path, user, user)
    ssh_dir.chmod(0o700)
    keys.chmod(0o600)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _config(directory: Path, port: int, host_key: Path, user: str = USER,
            set_env: Optional[dict] = None) -> str:
    # SetEnv: variables every session gets (sshd_config(5); only its first line counts, so
    # all on one), a fake host's root for one.
    pairs = [f'"{name}={value}"' for name, value in (set_env or {}).items()]
    settings = [f"SetEnv {' '.join(pairs)}"] if pairs else []
    return "\n".join([*settings,
        "ListenAddress 127.0.0.1",
        f"Port {port}",
        f"HostKey {host_key}",
        f"PidFile {directory / 'sshd.pid'}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes",
        "UsePAM no",
        "StrictModes yes",
        "PermitRootLogin no",
        f"AllowUsers {user}",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        f"Subsystem sftp {SFTP_SERVER}",
    ]) + "\n"


def _wait_until_serving(sshd: subprocess.Popen, port: int, log: Path) -> None:
    """Until the port answers with an SSH banner; fails if sshd exits or time is up."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if sshd.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                if connection.recv(64).startswith(b"SSH-2.0-"):
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"sshd did not serve on 127.0.0.1:{port} within {START_SECONDS} s "
                       f"(exit code {sshd.poll()}):\n{log.read_text()}")


@contextlib.contextmanager
def loopback_host(directory: Path, *, sudo: bool = True,
                  set_env: Optional[dict] = None) -> Iterator[LoopbackHost]:
    """sshd on 127.0.0.1 at a free port, its keys, config and log in `directory`; skips
    the test (with the reason) where it cannot run. sudo=False: the login user has no
    sudo rule; `set_env`: variables its sessions get."""
    user = USER if sudo else USER_WITHOUT_SUDO
    problem = _problem()
    if problem:
        pytest.skip(problem)
    directory = directory.resolve()
    host_key, client_key = directory / "host_ed25519", directory / "client_ed25519"
    for key in (host_key, client_key):
        run_checked("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key))
    # Its comment tells what added the line (one a killed run could not remove).
    public_key = " ".join((client_key.with_suffix(".pub").read_text().split()[:2]
                           + [f"{USER}-{secrets.token_hex(4)}"]))
    host_public_key = " ".join(host_key.with_suffix(".pub").read_text().split()[:2])
    port = _free_port()
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_public_key}\n")
    config = directory / "sshd_config"
    config.write_text(_config(directory, port, host_key, user, set_env))
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)  # `sshd -t` wants it too
    run_checked(SSHD, "-t", "-f", str(config))

    with _locked():
        home = _ensure_user(user)
        _authorize(home, public_key, add=True, user=user)
    log = directory / "sshd.log"
    try:
        with open(log, "w") as log_file:
            # -D: stays in the foreground as this process's child; -e: logs to stderr.
            sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)],
                                    stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file)
        try:
            _wait_until_serving(sshd, port, log)
            yield LoopbackHost("127.0.0.1", port, user, client_key, known_hosts,
                               host_public_key)
        finally:
            sshd.terminate()
            try:
                sshd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sshd.kill()
                sshd.wait()
    finally:
        with _locked():
            _authorize(home, public_key, add=False, user=user)
