"""The starter stack `gpu-cluster init` writes from what it found on the hosts.

Every value is decided from the hosts' own facts or the command line, or named as
undecided with the facts to decide it from; nothing is guessed. Values are written as JSON
strings, which YAML reads as they are (a hostname or a GPU name is the host's to choose)."""

import json
import re
from dataclasses import dataclass, field
from ipaddress import IPv4Network, ip_address
from typing import Optional

from cli.discover import HostFacts
from cli.init_hybrid import HybridChoices, hybrid_lines
from contract.host_os import supported_os_names
from contract.ports import SSH

# GPU Feature Discovery's nvidia.com/gpu.product value, as the config's hosts[].gpuModel
# takes it: the name nvidia-smi reports without characters outside [A-Za-z0-9-_. ] and its
# words joined by dashes (NVIDIA/k8s-device-plugin internal/lm/resource.go:318-326,
# `sanitise`, at 1b826acc).
_NOT_IN_PRODUCT = re.compile(r"[^A-Za-z0-9\-_. ]")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass
class Written:
    text: str
    notes: list = field(default_factory=list)  # what the user must decide or know


@dataclass(frozen=True)
class InitChoices:
    stack: str
    user: str
    port: int = SSH
    bastion: Optional[str] = None
    controller: Optional[str] = None  # an SSH address or a hostname
    lan: Optional[IPv4Network] = None
    layout: str = "bare-metal"
    hybrid: HybridChoices = HybridChoices()


def _q(value) -> str:
    return json.dumps(value)


def _ssh_host(address: str) -> str:
    return address.rpartition(":")[0] if address.count(":") == 1 else address


def cluster_address(facts: HostFacts, lan: Optional[IPv4Network]):
    """(nic, interface) facing the cluster, or (None, why)."""
    candidates = facts.addresses()
    try:
        reached = ip_address(_ssh_host(facts.ssh_address))
    except ValueError:
        reached = None
    for nic, address in candidates:
        if address.ip == reached:
            return nic, address
    if lan is not None:
        candidates = [(n, a) for n, a in candidates if a.ip in lan]
    if len(candidates) == 1:
        return candidates[0]
    listed = ", ".join(f"{nic} {address}" for nic, address in candidates) or "none"
    hint = "" if lan else "; run init again with --lan CIDR"
    return None, f"which NIC faces the cluster is not clear (IPv4 on: {listed}){hint}"


def unsuitable(facts: HostFacts) -> list:
    problems = []
    if not facts.supported_os:
        problems.append(f"OS is {facts.os_found}; supported: {supported_os_names()}")
    if not facts.sudo:
        problems.append("no passwordless sudo (`sudo -n true` failed); every step runs under it")
    if not _DNS_LABEL.fullmatch(facts.hostname):
        problems.append(f"hostname {facts.hostname!r} is not a lowercase DNS label; the "
                        "kubelet registers the node by it")
    return problems


def gpu_model(facts: HostFacts) -> Optional[str]:
    names = set(facts.gpu_names)
    if len(names) != 1:
        return None
    value = "-".join(_NOT_IN_PRODUCT.sub("", names.pop()).split())
    return value if _LABEL_VALUE.fullmatch(value) else None


def _controller(hosts: list, choices: InitChoices):
    if choices.controller:
        chosen = [h for h in hosts if choices.controller in (h.hostname, h.ssh_address,
                                                             _ssh_host(h.ssh_address))]
        return (chosen[0], f"--controller {choices.controller}") if chosen else (None, None)
    without_gpus = [h for h in hosts if h.gpus == 0]
    if len(without_gpus) == 1:
        return without_gpus[0], "the one host without GPUs"
    return None, None


def write_stack(results: dict, choices: InitChoices) -> Written:
    """`results`: SSH address -> HostFacts or the reason it could not be read."""
    notes, hosts, skipped = [], [], []
    for address, result in results.items():
        if isinstance(result, str):
            skipped.append(f"{address}: not reached: {result}")
        elif unsuitable(result):
            skipped.append(f"{result.hostname} ({address}): " + "; ".join(unsuitable(result)))
        else:
            hosts.append(result)
    notes += [f"left out: {line}" for line in skipped]
    if choices.layout == "hybrid":
        controller, why = None, None  # the control plane is on EC2: every host is a worker
    else:
        controller, why = _controller(hosts, choices)
        if controller is None:
            notes.append("the controller is not decided: name it with --controller ADDRESS "
                         "(one host, or several with no GPUs, could be it)")
    placed = {h.hostname: cluster_address(h, choices.lan) for h in hosts}
    for name, (nic, address) in placed.items():
        if nic is None:
            notes.append(f"{name}: {address}")
    networks = {a.network for nic, a in placed.values() if nic is not None}
    lan = choices.lan or (networks.pop() if len(networks) == 1 else None)
    if lan is None:
        notes.append("network.lanCidr is not decided: the hosts' cluster addresses are in "
                     f"{len(networks)} networks; run init again with --lan CIDR")

    lines = ["# Written by `gpu-cluster init` from what the hosts reported over SSH.",
             f"# Preview it: make preview STACK={choices.stack}",
             "config:",
             f"  gpu-cluster:layout: {choices.layout}",
             f"  gpu-cluster:clusterName: {_q(choices.stack)}"]
    if lan is not None:
        lines += ["  gpu-cluster:network:", f"    lanCidr: {_q(str(lan))}"]
    lines += ["  gpu-cluster:ssh:", f"    user: {_q(choices.user)}"]
    if choices.port != SSH:
        lines.append(f"    port: {choices.port}")
    if choices.bastion:
        bastion_key = next((h.bastion_key for h in hosts if h.bastion_key), "")
        host, _, port = choices.bastion.partition(":")
        lines += ["    bastion:", f"      host: {_q(host)}"]
        lines += [f"      port: {int(port)}"] if port else []
        lines += [f"      hostKey: {_q(bastion_key)}"] if bastion_key else []
    lines += ["  # Each host key is the one the host proved it holds when init connected; check",
              "  # its fingerprint on the host's console (ssh-keygen -lf /etc/ssh/ssh_host_*.pub).",
              "  gpu-cluster:hosts:"]
    lines += [line for facts in hosts
              for line in _host_lines(facts, placed[facts.hostname], facts is controller, why)]
    lines += [f"  # {line}" for line in skipped]
    if choices.layout == "hybrid":
        lines += hybrid_lines(hosts, choices.hybrid, notes)
    elif controller is not None:
        lines += ["  # The controller exports a folder for the cluster's volumes (the simplest",
                  "  # start; see the storage docs for EFS, another NFS server or local paths).",
                  "  gpu-cluster:storage:", "    nfs:", f"      host: {_q(controller.hostname)}",
                  '      path: "/srv/nfs/gpu-cluster"']
    lines += _driver_lines(hosts, notes)
    return Written("\n".join(lines) + "\n", notes)


def _host_lines(facts: HostFacts, placed, is_controller: bool, why: Optional[str]) -> list:
    nic, address = placed
    memory_gib = facts.memory_kib // (1024 * 1024)
    disks = ", ".join(f"{name} {size // 10**9} GB" for name, size in sorted(facts.disks.items()))
    lines = [f"    # {facts.os_found}, {memory_gib} GiB memory, disks: {disks or 'none'}",
             f"    - name: {_q(facts.hostname)}"]
    if nic is None:
        lines.append(f"      # address: not decided: {address}")
    else:
        lines.append(f"      address: {_q(str(address.ip))}")
        if _ssh_host(facts.ssh_address) != str(address.ip):
            lines.append(f"      sshAddress: {_q(_ssh_host(facts.ssh_address))}")
        lines.append(f"      interface: {_q(nic)}")
    if facts.ssh_user:
        lines.append(f"      sshUser: {_q(facts.ssh_user)}")
    lines.append(f"      sshHostKey: {_q(facts.host_key)}")
    if is_controller:
        lines += [f"      role: controller  # {why}"]
    if facts.gpus:
        lines.append(f"      gpus: {facts.gpus}")
        model = gpu_model(facts)
        if model:
            lines.append(f"      gpuModel: {_q(model)}")
        else:
            lines.append("      # gpuModel: not set: no driver here to name the GPUs"
                         if not facts.gpu_names else
                         f"      # gpuModel: not set: {len(set(facts.gpu_names))} GPU names")
    if facts.nvswitches:
        lines.append(f"      # {facts.nvswitches} NVSwitches: install-nvidia installs Fabric "
                     "Manager at the driver's version (nvswitch: auto)")
    return lines


def _driver_lines(hosts: list, notes: list) -> list:
    found = {h.hostname: h.driver for h in hosts if h.driver}
    if not found:
        return []
    branches = {version.split(".")[0] for version in found.values()}
    listed = ", ".join(f"{name} {version}" for name, version in sorted(found.items()))
    if len(branches) != 1:
        notes.append(f"NVIDIA drivers of several branches are installed ({listed}): choose "
                     "nvidia.driverBranch, or hosts[].installDriver: false where one stays")
        return []
    return [f"  # A driver is installed already ({listed}): preflight refuses a host whose",
            "  # driver is of another branch than nvidia.driverBranch.",
            "  gpu-cluster:nvidia:", f"    driverBranch: {_q(branches.pop())}"]
