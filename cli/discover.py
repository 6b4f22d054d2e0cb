"""Reading a host over SSH for `gpu-cluster init`: cli/discover-host.sh (with the
step library it sources) runs through the real `ssh` client, read-only and without
root, and its tab-separated facts become a HostFacts. The host key is the one the server
proved it holds in this very connection: ssh records it in a known_hosts file of the run's
own (StrictHostKeyChecking=accept-new), and that line is read back."""

import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from ipaddress import IPv4Interface
from pathlib import Path
from typing import Optional

from contract.host_os import os_supported
from contract.ports import SSH

DISCOVER_SCRIPT = Path(__file__).resolve().parent / "discover-host.sh"
# The step libraries it sources, in order (the script's own source lines, which run only
# standalone: over ssh they come ahead of it).
LIBRARIES = tuple(Path(__file__).resolve().parent.parent / "components" / "scripts" / name
                  for name in ("lib.sh", "os/lib.sh"))
CONNECT_TIMEOUT_SECONDS = 10
RUN_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class SshOptions:
    user: str
    port: int = SSH
    private_key: Optional[Path] = None
    bastion: Optional[str] = None  # host or host:port, reached as the same user


@dataclass(frozen=True)
class HostFacts:
    ssh_address: str
    host_key: str  # "ssh-ed25519 AAAA...": the key this connection verified
    hostname: str
    os_id: str = ""
    os_version: str = ""
    os_name: str = ""
    nics: dict = field(default_factory=dict)  # name -> list of IPv4Interface
    gpus: int = 0
    gpu_names: tuple = ()
    nvswitches: int = 0
    driver: str = ""
    memory_kib: int = 0
    disks: dict = field(default_factory=dict)  # name -> bytes
    sudo: bool = False
    bastion_key: str = ""
    ssh_user: str = ""  # when not the stack's ssh.user

    @property
    def supported_os(self) -> bool:
        """What preflight.sh's check_os accepts (contract/host_os.py)."""
        return os_supported(self.os_id, self.os_version)

    @property
    def os_found(self) -> str:
        """What the host's os-release says it is, as preflight names it."""
        return f"{self.os_name or 'unknown'} ({self.os_id or '?'} {self.os_version or '?'})"

    def addresses(self) -> list:
        return [(nic, address) for nic, addresses in sorted(self.nics.items())
                for address in addresses if address.ip.is_global or address.ip.is_private]


class Unreachable(Exception):
    """The host could not be read; the message says why."""


def parse_facts(text: str, ssh_address: str, host_key: str, bastion_key: str = "",
                ssh_user: str = "") -> HostFacts:
    values: dict = {"nics": {}, "disks": {}, "gpu_names": []}
    for line in text.splitlines():
        key, _, rest = line.partition("\t")
        fields = rest.split("\t")
        if key in ("hostname", "os_id", "os_version", "os_name", "driver"):
            values[key] = rest
        elif key in ("gpus", "nvswitches", "memory_kib"):
            values[key] = int(rest)
        elif key == "nic":
            values["nics"].setdefault(fields[0], [])
        elif key == "nic_address":
            values["nics"].setdefault(fields[0], []).append(IPv4Interface(fields[1]))
        elif key == "gpu_name":
            values["gpu_names"].append(rest)
        elif key == "disk":
            values["disks"][fields[0]] = int(fields[1])
        elif key == "sudo":
            values["sudo"] = rest == "yes"
    if "hostname" not in values:
        raise Unreachable("the discovery printed no hostname")
    values["gpu_names"] = tuple(values["gpu_names"])
    return HostFacts(ssh_address=ssh_address, host_key=host_key, bastion_key=bastion_key,
                     ssh_user=ssh_user, **values)


def _ssh_options(options: SshOptions, known_hosts: Path, port: int) -> list:
    identity = (["-i", str(options.private_key), "-o", "IdentitiesOnly=yes"]
                if options.private_key else [])
    # -F /dev/null: no user config; accept-new: a host seen for the first time is recorded
    # in this run's known_hosts (and a changed one, impossible in a fresh file, refused).
    return ["-F", "/dev/null", "-p", str(port), *identity, "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "HostKeyAlgorithms=ssh-ed25519,ecdsa-sha2-nistp256,rsa-sha2-512",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_SECONDS}"]


def _recorded_key(known_hosts: Path) -> str:
    lines = known_hosts.read_text().splitlines() if known_hosts.exists() else []
    return " ".join(lines[0].split()[1:3]) if lines else ""


def _split_port(address: str, default: int) -> tuple:
    host, _, port = address.rpartition(":") if address.count(":") == 1 else (address, "", "")
    return (host, int(port)) if port else (address, default)


def discover(spec: str, options: SshOptions) -> HostFacts:
    """Runs the discovery on `spec` ([user@]address[:port]); raises Unreachable."""
    user, _, ssh_address = spec.rpartition("@")
    user = user or options.user
    host, port = _split_port(ssh_address, options.port)
    script = "\n".join(path.read_text() for path in (*LIBRARIES, DISCOVER_SCRIPT))
    with tempfile.TemporaryDirectory(prefix="gpu-cluster-init-") as scratch:
        known_hosts, bastion_known = Path(scratch, "known_hosts"), Path(scratch, "bastion")
        command = ["ssh", *_ssh_options(options, known_hosts, port)]
        if options.bastion:
            jump, jump_port = _split_port(options.bastion, SSH)
            hop = ["ssh", *_ssh_options(options, bastion_known, jump_port), "-W", "%h:%p",
                   f"{options.user}@{jump}"]
            command += ["-o", "ProxyCommand=" + shlex.join(hop)]
        command += [f"{user}@{host}", "bash", "-s"]
        try:
            result = subprocess.run(command, input=script, capture_output=True, text=True,
                                    timeout=RUN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise Unreachable(f"no answer within {RUN_TIMEOUT_SECONDS} s") from None
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines()
            raise Unreachable(lines[-1] if lines else f"ssh exited {result.returncode}")
        return parse_facts(result.stdout, ssh_address, _recorded_key(known_hosts),
                           _recorded_key(bastion_known), "" if user == options.user else user)
