"""Rules that span several fields. They run on whatever parsed, so one pass reports
every problem: a host with a bad address is left out of the uniqueness checks, not
allowed to hide them."""

import ipaddress

from config.aws_checks import cloud_checks, hybrid_checks
from config.backup import backup_checks
from config.firewall import firewall_checks
from config.host_paths import host_path_problem
from config.host_security import host_key_problems
from config.image_checks import image_checks
from config.kubeflow_checks import kubeflow_checks
from config.monitoring import monitoring_checks
from config.partial import PartialConfig
from config.problems import Problem
from config.release_pins import release_pin_checks
from config.types import key_body

# Label prefixes the kubelet may set on its own node (NodeRestriction admission).
_KUBELET_ALLOWED_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


def cross_checks(cfg: PartialConfig) -> list[Problem]:
    problems: list[Problem] = []
    problems += _networks_disjoint(cfg)
    problems += _hosts_unique(cfg)
    problems += _hosts_on_lan(cfg)
    problems += _roles(cfg)
    problems += _host_fields(cfg)
    problems += _nvidia(cfg)
    problems += _ssh_keys(cfg)
    problems += host_key_problems(cfg.layout, cfg.ssh, cfg.hosts)
    problems += _tuning(cfg)
    problems += firewall_checks(cfg.layout, cfg.host_firewall)
    problems += _storage(cfg)
    problems += hybrid_checks(cfg)
    problems += cloud_checks(cfg)
    problems += kubeflow_checks(cfg)
    problems += image_checks(cfg)
    problems += backup_checks(cfg)
    problems += monitoring_checks(cfg)
    problems += release_pin_checks(cfg)
    return problems


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
    if not cfg.all_hosts_parsed:
        return []
    if cfg.layout == "hybrid":
        problems = [Problem(f"hosts[{index}].role", "the hybrid layout's control plane runs on "
                            "EC2 (gpu-cluster:aws.controlPlane); on-prem hosts are workers")
                    for index, host in cfg.hosts if host.runs_control_plane]
        if not cfg.hosts:
            problems.append(Problem("hosts", "the hybrid layout needs on-prem worker hosts"))
        return problems
    if cfg.layout != "bare-metal":
        return []
    controllers = [index for index, host in cfg.hosts if host.runs_control_plane]
    workers = [index for index, host in cfg.hosts if host.runs_workloads]
    problems = []
    if not controllers:
        problems.append(
            Problem("hosts", "a bare-metal cluster needs exactly one host with role 'controller' "
                    "or 'controller+worker'; there is none")
        )
    for index in controllers[1:]:
        problems.append(
            Problem(f"hosts[{index}].role",
                    f"a second control-plane host; gpu-cluster:hosts[{controllers[0]}] is already "
                    "the controller and only one is supported")
        )
    if not workers:
        problems.append(
            Problem("hosts", "no host runs workloads: add a host with role 'worker' "
                    "(or make the controller 'controller+worker')")
        )
    return problems


def _host_fields(cfg: PartialConfig) -> list[Problem]:
    problems = []
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
        if host.runs_control_plane and host.generation:
            problems.append(
                Problem(f"hosts[{index}].generation",
                        "the control-plane host cannot be replaced by rejoining it: the cluster's "
                        "state lives on it; only workers take a generation")
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
            and not cfg.has_ssh_private_key:
        use = {"cloud": "for the control-plane instance's EC2 key pair (made from it)",
               "hybrid": "to reach the hosts and the control-plane instance"}.get(
                   cfg.layout, "to reach the hosts")
        problems.append(
            Problem("sshPrivateKey",
                    f"is required {use}; set it with "
                    "`pulumi config set --secret gpu-cluster:sshPrivateKey < ~/.ssh/id_ed25519`")
        )
    if cfg.has_bastion_private_key and cfg.ssh is not None and cfg.ssh.bastion is None:
        problems.append(Problem("bastionPrivateKey", "is set but gpu-cluster:ssh.bastion is not"))
    if cfg.ssh is not None:
        problems += _revoked_keys(cfg.ssh.authorized_keys, cfg.ssh.revoked_keys,
                                  cfg.ssh_public_key)
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


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _storage(cfg: PartialConfig) -> list[Problem]:
    storage = cfg.storage
    if storage is None:
        return []
    backends = storage.backends
    if not backends:
        return [Problem("storage", "configure a backend: nfs or efs (shared, ReadWriteMany) or "
                        "localPath (node-local); it becomes the default StorageClass")]
    problems = []
    defaults = storage.default_backends
    if len(defaults) != 1 and len(backends) == 1:
        problems.append(Problem(f"storage.{next(iter(backends))}.default",
                                "the only backend must be the default StorageClass"))
    elif len(defaults) != 1:
        listed = " and ".join(defaults) if defaults else "none"
        problems.append(Problem("storage", "exactly one backend must set default: true "
                                f"(the default StorageClass); now: {listed}"))
    nfs = storage.nfs
    if nfs is not None:
        if (nfs.server is None) == (nfs.host is None):
            problems.append(Problem("storage.nfs", "set either server (an existing NFS server) "
                                    "or host (a cluster host to serve NFS), not both or neither"))
        if nfs.host is not None:
            # An external server's export is its admin's: there only the syntax is checked
            # (and "/" is NFSv4's pseudo-root, a usual export).
            path_problem = host_path_problem(nfs.path)
            if path_problem:
                problems.append(Problem("storage.nfs.path", f"{path_problem} (storage.nfs.host "
                                        "exports it read-write to the cluster's nodes)"))
        if nfs.server is not None and cfg.access is not None and cfg.access.teams \
                and not _is_ip(nfs.server):
            # components/access/storage_egress.py: an ipBlock takes addresses only.
            problems.append(Problem("storage.nfs.server", f"'{nfs.server}' is a DNS name; with "
                                    "access.teams give the server's IP address: team pods are "
                                    "kept off it by address (a NetworkPolicy)"))
        names = [host.name for _, host in cfg.hosts]
        if nfs.host is not None and cfg.all_hosts_parsed and nfs.host not in names:
            problems.append(Problem("storage.nfs.host", f"'{nfs.host}' is not one of the "
                                    f"configured hosts ({', '.join(names)})"))
    return problems
