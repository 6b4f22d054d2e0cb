"""Fake host roots for `gpu-cluster init`'s discovery: the files a real Ubuntu GPU server
has under /proc, /sys and /etc that discover-host.sh reads, and `ip` and `nvidia-smi`
stand-ins on the session's PATH. Made world-readable under /tmp, since the discovery runs
as the loopback sshd's unprivileged login user."""

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

UBUNTU_2404 = 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\n'
ROCKY_9 = 'NAME="Rocky Linux"\nVERSION_ID="9.6"\nID="rocky"\nPRETTY_NAME="Rocky Linux 9.6"\n'
RHEL_8 = ('NAME="Red Hat Enterprise Linux"\nVERSION_ID="8.10"\nID="rhel"\n'
          'PRETTY_NAME="Red Hat Enterprise Linux 8.10 (Ootpa)"\n')


@dataclass(frozen=True)
class FakeHost:
    hostname: str
    nics: dict  # name -> "address/prefix" or ""
    gpus: int = 0
    nvswitches: int = 0
    gpu_name: str = ""  # with a driver loaded: nvidia-smi answers, /proc/driver/nvidia exists
    driver: str = ""
    os_release: str = UBUNTU_2404
    disks: dict = field(default_factory=lambda: {"nvme0n1": 1_920_383_410_176})


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def build(root: Path, host: FakeHost) -> dict:
    """Writes the host under `root`; returns the session environment that points at it."""
    _write(root / "proc/sys/kernel/hostname", host.hostname + "\n")
    _write(root / "etc/os-release", host.os_release)
    _write(root / "proc/meminfo", "MemTotal:       2113459200 kB\nMemFree:  1 kB\n")
    addresses = []
    for index, (nic, address) in enumerate(host.nics.items()):
        (root / "sys/class/net" / nic / "device").mkdir(parents=True)
        _write(root / "sys/class/net" / nic / "address", f"3c:ec:ef:00:00:0{index}\n")
        if address:
            addresses.append(f"{index + 2}: {nic}    inet {address} brd 0.0.0.0 scope global "
                             f"{nic}\\       valid_lft forever preferred_lft forever")
    (root / "sys/class/net/lo").mkdir(parents=True)  # no device: not a NIC
    # The PCI bus: a host bridge, the GPUs (3D controller class), the NVSwitches.
    devices = [("0x8086", "0x060000")] + [("0x10de", "0x030200")] * host.gpus \
        + [("0x10de", "0x068000")] * host.nvswitches
    for slot, (vendor, klass) in enumerate(devices):
        device = root / f"sys/bus/pci/devices/0000:{slot + 16:02x}:00.0"
        _write(device / "vendor", vendor + "\n")
        _write(device / "class", klass + "\n")
    for disk, size in host.disks.items():
        (root / "sys/block" / disk / "device").mkdir(parents=True)
        _write(root / "sys/block" / disk / "size", f"{size // 512}\n")
    (root / "sys/block/loop0").mkdir(parents=True)
    _write(root / "sys/block/loop0/size", "0\n")
    # `ip -o -4 addr show dev NIC` prints that NIC's lines.
    _write(root / "ip-addr", "".join(f"{line}\n" for line in addresses))
    _write(root / "usr/bin/ip", '#!/bin/sh\ngrep " $6 " "$GPU_CLUSTER_ROOT/ip-addr" || true\n',
           0o755)
    if host.driver:
        _write(root / "proc/driver/nvidia/version",
               f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {host.driver}  "
               "Thu Sep 18 21:35:56 UTC 2025\nGCC version:  gcc version 13.3.0\n")
        names = "".join(f"{host.gpu_name}\n" for _ in range(host.gpus))
        _write(root / "usr/bin/nvidia-smi", f"#!/bin/sh\nprintf '%s' '{names}'\n", 0o755)
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    return {"GPU_CLUSTER_ROOT": str(root), "PATH": f"{root}/usr/bin:/usr/bin:/bin"}


@contextmanager
def readable_root():
    root = Path(tempfile.mkdtemp(prefix="gpu-cluster-fake-host-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root)
