"""The hosts' side: read-only commands whose outputs the host checks read, from a folder of
recorded outputs (`<folder>/<host>/<file>`) or over SSH.

A recorded folder is what `--collect-hosts` writes, or what an admin gathers by hand on
each host (`ip -j addr > ip-addr.json`, ...), so the checks run where SSH does not reach."""

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from doctor import DoctorError

# The kubelet's resolv.conf: the program points it at systemd-resolved's upstream list
# (config/model.py HostTuning.kubelet_resolv_conf, default below), never at the stub.
KUBELET_RESOLV_CONF = "/run/systemd/resolve/resolv.conf"


@dataclass(frozen=True)
class Command:
    file: str
    argv: tuple[str, ...]


def commands(resolv_conf: str = KUBELET_RESOLV_CONF) -> list[Command]:
    return [
        Command("ip-addr.json", ("ip", "-j", "addr", "show")),
        Command("ip-route.json", ("ip", "-j", "route", "show", "table", "main")),
        Command("inotify.txt", ("sysctl", "-n", "fs.inotify.max_user_instances",
                                "fs.inotify.max_user_watches")),
        Command("resolv-target.txt", ("readlink", "-f", resolv_conf)),
        Command("resolv-conf.txt", ("cat", resolv_conf)),
        Command("nvidia-smi.csv", ("nvidia-smi", "--query-gpu=index,name,uuid,driver_version,"
                                   "pci.bus_id", "--format=csv")),
    ]


HostOutputs = dict[str, Optional[str]]  # file name -> output (None: not collected)
# The key holding why a host could not be reached (then it holds nothing else).
UNREACHABLE = "unreachable"


def read_recorded(folder: str, hosts: list[str]) -> dict[str, HostOutputs]:
    """Outputs of the hosts that have a folder under `folder`."""
    root = Path(folder)
    if not root.is_dir():
        raise DoctorError(f"--host-outputs '{folder}' is not a folder")
    found: dict[str, HostOutputs] = {}
    for host in hosts:
        if not (root / host).is_dir():
            continue
        found[host] = {}
        for command in commands():
            path = root / host / command.file
            try:
                found[host][command.file] = path.read_text()
            except FileNotFoundError:
                found[host][command.file] = None
            except (OSError, UnicodeDecodeError) as error:
                raise DoctorError(f"cannot read {path}: {type(error).__name__}") from None
    return found


SSH_TIMEOUT_SECONDS = 30


def collect_ssh(host: str, address: str, user: Optional[str], identity: Optional[str],
                resolv_conf: str, folder: Optional[str]) -> HostOutputs:
    """Runs each command on the host with a plain `ssh` (BatchMode: never a prompt); a
    command that fails is recorded as None. Writes them under `folder`/<host> when given."""
    target = f"{user}@{address}" if user else address
    base = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]
    if identity:
        base += ["-i", identity]
    outputs: HostOutputs = {}
    for command in commands(resolv_conf):
        # nvidia-smi writes its failure to stdout; the check reads that text.
        try:
            done = subprocess.run([*base, target, "--", shlex.join(command.argv)],
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  timeout=SSH_TIMEOUT_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            outputs[command.file] = None
            continue
        if done.returncode == 255:  # ssh's own failure: the host is not reached at all
            last = (done.stderr.strip().splitlines() or ["exit code 255"])[-1][:200]
            return {UNREACHABLE: f"ssh {target} failed: {last}"}
        ok = done.returncode == 0 or command.file == "nvidia-smi.csv"
        outputs[command.file] = done.stdout if ok else None
    if folder is not None:
        place = Path(folder) / host
        place.mkdir(parents=True, exist_ok=True)
        for name, text in outputs.items():
            if text is not None:
                (place / name).write_text(text)
    return outputs
