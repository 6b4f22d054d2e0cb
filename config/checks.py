"""Rules across keys of the sections config/model.py defines (the network, the hosts, SSH,
NVIDIA, tuning). They run on whatever parsed, so one pass reports every problem: a host
with a bad address is left out of the uniqueness checks, not allowed to hide them."""

import ipaddress
from collections.abc import Sequence
from typing import Any, Optional

from contract.names import CAPACITY_LABEL, PROGRAM_NODE_LABELS

from config.partial import PartialConfig
from config.problems import Problem
from config.types import key_body, public_key_or_nothing

# Label prefixes the kubelet may set on its own node (NodeRestriction admission).
_KUBELET_ALLOWED_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")
# Layouts whose hosts the program prepares over SSH (cloud boots its machines itself, and
# the EC2 control plane's host key is the one the program makes and installs at boot).
SSH_LAYOUTS = ("bare-metal", "hybrid")
ACCEPT_ANY_KEY = "ssh.acceptAnyHostKey"


def network_checks(cfg: PartialConfig) -> list[Problem]:
    return _networks_disjoint(cfg)


def host_checks(cfg: PartialConfig) -> list[Problem]:
    return (_hosts_unique(cfg) + _hosts_on_lan(cfg) + _roles(cfg) + _host_fields(cfg)
            + host_key_problems(cfg.layout, cfg.ssh, cfg.hosts))


def nvidia_checks(cfg: PartialConfig) -> list[Problem]:
    return _nvidia(cfg)


def ssh_checks(cfg: PartialConfig) -> list[Problem]:
    return _ssh_keys(cfg)


def tuning_checks(cfg: PartialConfig) -> list[Problem]:
    return _tuning(cfg)


def _networks_disjoint(cfg: PartialConfig) -> list[Problem]:
    if cfg.network is None:
        return []
    named = {
        "network.lanCidr": cfg.network.lan_cidr,
        "network.podCidr": cfg.network.pod_cidr,
        "network.serviceCidr": cfg.network.service_cidr,
    }
    named = {key: cidr for key, cidr in named.items() if cidr}
    # An adopted VPC's network is unknown without aws.vpc.cidr (config/aws_checks.py asks
    # for it): the default is no network of the user's.
    if cfg.layout in ("hybrid", "cloud") and cfg.aws is not None and (
            cfg.aws.vpc.id is None or "cidr" in cfg.aws.vpc.model_fields_set):
        named["aws.vpc.cidr"] = cfg.aws.vpc.cidr
    if cfg.layout == "hybrid" and cfg.vpn is not None:
        named["vpn.tunnelCidr"] = cfg.vpn.tunnel_cidr
    problems = []
    keys = list(named)
    for i, first in enumerate(keys):
        for second in keys[i + 1 :]:
            a, b = ipaddress.ip_network(named[first]), ipaddress.ip_network(named[second])
            if a.overlaps(b):
                problems.append(
                    Problem(second, f"{b} overlaps gpu-cluster:{first} {a}; the networks must be disjoint")
                )
    return problems


def _hosts_unique(cfg: PartialConfig) -> list[Problem]:
    problems = []
    for attribute, key in (("name", "name"), ("address", "address")):
        first_seen: dict[str, int] = {}
        for index, host in cfg.hosts:
            value = getattr(host, attribute)
            if value in first_seen:
                problems.append(
                    Problem(
                        f"hosts[{index}].{key}",
                        f"'{value}' is already used by gpu-cluster:hosts[{first_seen[value]}]; "
                        f"host {'names' if key == 'name' else 'addresses'} must be unique",
                    )
                )
            else:
                first_seen[value] = index
    return problems


def _hosts_on_lan(cfg: PartialConfig) -> list[Problem]:
    if cfg.network is None or cfg.layout not in ("bare-metal", "hybrid"):
        return []
    if cfg.network.lan_cidr is None:
        return [Problem("network.lanCidr", f"is required by the {cfg.layout} layout: the "
                        "on-prem LAN the hosts are on")]
    lan = ipaddress.ip_network(cfg.network.lan_cidr)
    # A /31 or /32 has no network or broadcast address (RFC 3021).
    reserved = {lan.network_address: "network", lan.broadcast_address: "broadcast"} \
        if lan.prefixlen < 31 else {}
    problems = []
    for index, host in cfg.hosts:
        address = ipaddress.ip_address(host.address)
        if address not in lan:
            problems.append(Problem(f"hosts[{index}].address",
                                    f"{host.address} is outside gpu-cluster:network.lanCidr {lan}"))
        elif address in reserved:
            problems.append(Problem(f"hosts[{index}].address",
                                    f"{host.address} is the {reserved[address]} address of "
                                    f"gpu-cluster:network.lanCidr {lan}, which no host can "
                                    "have; give the host's own address"))
    return problems


def _roles(cfg: PartialConfig) -> list[Problem]:
    if not cfg.complete("hosts"):
        return []
    if cfg.layout == "hybrid":
        problems = [Problem(f"hosts[{index}].role", "the hybrid layout's control plane runs on "
                            "EC2 (gpu-cluster:aws.controlPlane); on-prem hosts are workers")
                    for index, host in cfg.hosts if host.runs_control_plane]
        # The AWS cloud controller manager takes a node named i-... for that EC2 instance
        # (cloud-provider-aws v1.35.2 pkg/providers/v1/aws.go:3621-3630, resource-based
        # names) and would delete the node if EC2 had such an instance, terminated.
        problems += [Problem(f"hosts[{index}].name", f"{host.name!r}: an on-prem host's name "
                             "may not start with 'i-', which AWS's cloud controller manager "
                             "reads as an EC2 instance id")
                     for index, host in cfg.hosts if host.name.startswith("i-")]
        if not cfg.hosts:
            problems.append(Problem("hosts", "the hybrid layout needs on-prem worker hosts"))
        return problems
    if cfg.layout != "bare-metal":
        return []
    controllers = [index for index, host in cfg.hosts if host.runs_control_plane]
    workers = [index for index, host in cfg.hosts if host.runs_workloads]
    problems = []
    # How many more than one: config/control_plane_checks.py.
    if not controllers:
        problems.append(
            Problem("hosts", "a bare-metal cluster needs a host with role 'controller' "
                    "or 'controller+worker'; there is none")
        )
    if not workers:
        problems.append(
            Problem("hosts", "no host runs workloads: add a host with role 'worker' "
                    "(or make the controller 'controller+worker')")
        )
    return problems


def _host_fields(cfg: PartialConfig) -> list[Problem]:
    problems = []
    controllers = sum(1 for _, host in cfg.hosts if host.runs_control_plane)
    first_controller = next((host for _, host in cfg.hosts if host.runs_control_plane), None)
    for index, host in cfg.hosts:
        if host.gpu_model and host.gpus == 0:
            problems.append(
                Problem(f"hosts[{index}].gpuModel", "is set but gpus is 0; set gpus to the host's GPU count")
            )
        if host.nvswitch is True and host.gpus == 0:
            problems.append(
                Problem(f"hosts[{index}].nvswitch", "is true but gpus is 0; Fabric Manager comes with "
                        "the NVIDIA driver on GPU hosts: set gpus to the host's GPU count")
            )
        for key in host.labels:
            if _kubelet_may_not_set(key):
                problems.append(
                    Problem(f"hosts[{index}].labels.{key}",
                            "the kubelet may not set labels under kubernetes.io/ or k8s.io/ except "
                            "kubelet.kubernetes.io/ and node.kubernetes.io/ (NodeRestriction)")
                )
            elif key in PROGRAM_NODE_LABELS:
                # Kueue's flavors select nodes by them (components/access/queues.py).
                problems.append(Problem(f"hosts[{index}].labels.{key}", "the program sets it "
                                        f"({CAPACITY_LABEL}=on-prem on the hosts that run "
                                        "workloads; Kueue's flavors select nodes by it)"))
        if host.role == "controller" and (host.gpus or host.taints or host.labels):
            field_name = "gpus" if host.gpus else ("taints" if host.taints else "labels")
            problems.append(
                Problem(f"hosts[{index}].{field_name}",
                        "a 'controller' host runs no kubelet, so it has no node to carry GPUs, "
                        "labels or taints; use role 'controller+worker'")
            )
        if host.role == "controller" and host.maintenance is not None:
            problems.append(
                Problem(f"hosts[{index}].maintenance",
                        "a 'controller' host runs no kubelet, so it has no node to cordon or drain")
            )
        if host.runs_control_plane and host.generation and controllers < 3:
            problems.append(
                Problem(f"hosts[{index}].generation",
                        "a controller is replaced by rejoining it only beside at least two others "
                        "that keep etcd's majority; with one the cluster's state lives on it, so "
                        "only workers take a generation")
            )
        elif host.runs_control_plane and host.generation and host is first_controller:
            problems.append(
                Problem(f"hosts[{index}].generation",
                        "the first controller initialised the cluster, and replacing its machine "
                        "is not built yet: new hardware under it would start another cluster "
                        "(docs/distributions.md, High availability)")
            )
    return problems


def _nvidia(cfg: PartialConfig) -> list[Problem]:
    """install-nvidia installs the driver together with the toolkit: a host whose driver
    the program installs gets both."""
    if cfg.nvidia is None:
        return []
    problems = []
    for index, host in cfg.hosts:
        driver, toolkit = cfg.nvidia.for_host(host)
        if host.gpus and driver and not toolkit:
            key = (f"hosts[{index}].installToolkit" if host.install_toolkit is not None
                   else "nvidia.installToolkit")
            problems.append(Problem(key, f"is false but the program installs the NVIDIA driver "
                                    f"on {host.name} (installDriver: true), which comes with the "
                                    "container toolkit; set installDriver: false too when the "
                                    "host brings both"))
    return problems


def _kubelet_may_not_set(key: str) -> bool:
    prefix, _, _ = key.rpartition("/")
    if not prefix:
        return False
    restricted = prefix.endswith("kubernetes.io") or prefix.endswith("k8s.io")
    return restricted and not key.startswith(_KUBELET_ALLOWED_PREFIXES)


def _ssh_keys(cfg: PartialConfig) -> list[Problem]:
    problems = []
    # Every layout uses it: SSH to the hosts, and on the AWS layouts the control-plane
    # instance's EC2 key pair is made from it.
    if (cfg.hosts or cfg.layout in ("bare-metal", "hybrid", "cloud")) \
            and not cfg.ssh_private_key:
        use = {"cloud": "for the control-plane instance's EC2 key pair (made from it)",
               "hybrid": "to reach the hosts and the control-plane instance"}.get(
                   cfg.layout, "to reach the hosts")
        problems.append(
            Problem("sshPrivateKey",
                    f"is required {use}; set it with "
                    "`pulumi config set --secret gpu-cluster:sshPrivateKey < ~/.ssh/id_ed25519`")
        )
    if cfg.bastion_private_key and cfg.ssh is not None and cfg.ssh.bastion is None:
        problems.append(Problem("bastionPrivateKey", "is set but gpu-cluster:ssh.bastion is not"))
    if cfg.ssh is not None:
        problems += _revoked_keys(cfg.ssh.authorized_keys, cfg.ssh.revoked_keys,
                                  public_key_or_nothing(cfg.ssh_private_key))
    return problems


def _revoked_keys(authorized: list[str], revoked: list[str], login_key: str) -> list[Problem]:
    """A revoked key must be neither kept nor the one the program logs in with: either
    would take it out and put it back, or lock the program out of every host."""
    kept = {key_body(key) for key in authorized}
    problems = []
    for index, key in enumerate(revoked):
        body = key_body(key)
        if body in kept:
            problems.append(Problem(f"ssh.revokedKeys[{index}]",
                                    "is also in ssh.authorizedKeys; keep it in one list"))
        elif login_key and body == key_body(login_key):
            problems.append(Problem(
                f"ssh.revokedKeys[{index}]",
                "is the public half of sshPrivateKey, the key the program logs in with; "
                "switch sshPrivateKey to the new key first (README, \"Rotating credentials\")"))
    return problems


def _tuning(cfg: PartialConfig) -> list[Problem]:
    if cfg.tuning is None:
        return []
    if cfg.tuning.cpu_manager_policy == "static" and not cfg.tuning.reserved_cpus:
        return [
            Problem("tuning.reservedCpus",
                    "is required when tuning.cpuManagerPolicy is 'static' (CPUs kept for the "
                    "system and kubelet, e.g. '0-1')")
        ]
    return []


def unchecked_ssh(layout: Optional[str], ssh: Any,
                  hosts: Sequence[tuple[int, Any]]) -> tuple[list[str], bool]:
    """(names of hosts reached over SSH without a host key, whether the bastion has
    none). pulumi-command checks a host key only when one is given: without it every
    key is accepted, every time (provider/pkg/provider/remote/connection.go:88-97 at
    v1.2.1, ssh.InsecureIgnoreHostKey; the proxy's connection alike, :204)."""
    if layout not in SSH_LAYOUTS or not hosts:
        return [], False
    names = [host.name for _, host in hosts if host.ssh_host_key is None]
    bastion = ssh is not None and ssh.bastion is not None and ssh.bastion.host_key is None
    return names, bastion


def unchecked_what(names: list[str], bastion: bool) -> str:
    parts = [f"hosts {', '.join(names)} (hosts[].sshHostKey)"] if names else []
    if bastion:
        parts.append("the bastion (ssh.bastion.hostKey)")
    return " and ".join(parts)


def host_key_problems(layout: Optional[str], ssh: Any,
                      hosts: Sequence[tuple[int, Any]]) -> list[Problem]:
    names, bastion = unchecked_ssh(layout, ssh, hosts)
    if not (names or bastion) or (ssh is not None and ssh.accept_any_host_key):
        return []
    return [Problem(
        "hosts" if names else "ssh.bastion.hostKey",
        f"no SSH host key for {unchecked_what(names, bastion)}: their steps would send the "
        "cluster's keys and join tokens to whatever answers. Set each to the host's key from "
        "`ssh-keyscan -t ed25519 ADDRESS`, its fingerprint checked on the host (README, "
        f"\"SSH host keys\"), or set {ACCEPT_ANY_KEY}: true")]
