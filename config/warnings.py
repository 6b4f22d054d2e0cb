"""The preview's warnings that follow from the config alone: each says what the program will
not do (or does with a risk) that a user might expect, and names the key that changes it.
One list, printed by `pulumi preview` (pulumi.log.warn) and the offline preview's
"Warnings:" block; a new warning of this kind joins `preview_warnings`."""

from typing import Optional

from config.backup import backup_store
from config.cloud import control_plane_address
from config.download_warnings import download_warnings
from config.firewall import firewall_warnings
from config.gpu_hosts import runtime_warnings, untolerated_taint_warnings
from config.host_security import host_warnings
from config.image_checks import KUBEFLOW_ALIAS_WARNING, LOGIN_WARNING
from config.image_pins import tag_only_warning
from config.model import StackConfig
from config.pool_checks import pool_warnings
from config.queues import unsplit_teams_warning
from config.timesync import time_warning

# nfs(5), "soft / hard": "A so-called "soft" timeout can cause silent data corruption in
# certain cases" (the README's "Shared storage").
SOFT_OPTIONS = ("soft",)


def preview_warnings(settings: StackConfig) -> list[str]:
    """Every warning, in a fixed order: the images, the hosts, then the config's gaps."""
    warnings = [tag_only_warning(settings.kubeflow is not None, settings.mpi.operator)]
    warnings += host_warnings(settings.layout, settings.ssh, settings.hosts, settings.tuning,
                              settings.access)
    warnings += runtime_warnings(settings.hosts, settings.nvidia)
    warnings += untolerated_taint_warnings(settings.hosts, settings.pools)
    warnings += pool_warnings(settings.pools)
    warnings.append(settings.kubernetes.drain_warning())
    if settings.kubeflow is not None and settings.kubeflow.image_mirror is not None:
        warnings.append(KUBEFLOW_ALIAS_WARNING)
    if settings.image_mirror is not None and settings.image_mirror.username:
        warnings.append(LOGIN_WARNING)
    warnings += firewall_warnings(settings.layout, settings.host_firewall,
                                  settings.vpn.mode if settings.vpn else None,
                                  settings.aws and control_plane_address(settings.aws))
    warnings += [backups_off_warning(settings), kubeflow_repository_warning(settings),
                 ec2_controllers_warning(settings), elastic_ips_warning(settings),
                 adopted_vpc_pools_warning(settings)]
    warnings += soft_mount_warnings(settings)
    warnings += download_warnings(settings)
    warnings.append(time_warning(settings.time, settings.packages.apt_mirror))
    warnings.append(unsplit_teams_warning(settings.access))
    return [warning for warning in warnings if warning]


def adopted_vpc_pools_warning(settings: StackConfig) -> Optional[str]:
    """Pools on hybrid in an adopted VPC without aws.vpc.poolSubnetCidrs: the on-prem side
    admits the whole VPC where it would admit the pools' subnets (config/cloud.py
    pool_subnet_cidrs)."""
    vpc = settings.aws.vpc if settings.aws else None
    if settings.layout != "hybrid" or not settings.pools or not vpc or not vpc.id \
            or vpc.pool_subnet_cidrs:
        return None
    return (f"gpu-cluster:pools on hybrid in the adopted VPC {vpc.id}: the on-prem "
            "hosts' node ports (the kubelet, the CNI's overlay) and the control plane's admit "
            f"the whole VPC {vpc.cidr}, since the config does not give the pools' "
            "subnets' CIDRs: every machine in it, not only the pools' instances, reaches them; "
            "set gpu-cluster:aws.vpc.poolSubnetCidrs to the pools' subnets' CIDRs to admit "
            "only those (docs/layouts.md, \"Pools on hybrid\")")


def ec2_controllers_warning(settings: StackConfig) -> Optional[str]:
    """What several EC2 controllers do not make highly available: what runs on the first
    controller's instance only (hybrid: the VPN; with pools: their join-token rotation; the
    cloud controller manager, which removes gone instances' nodes, runs on every controller)."""
    replicas = settings.control_plane_endpoint.replicas
    if settings.layout not in ("hybrid", "cloud") or replicas == 1:
        return None
    pools = ("the pools' join-token rotation runs on the first controller's instance only, so "
             "while it is down for more than a day new pool instances cannot join")
    alone = pools
    if settings.layout == "hybrid":
        alone = ("the VPN runs on the first controller's instance only, so losing it cuts the "
                 "on-prem nodes and the VPN's users off until it is back"
                 + (f"; {pools}" if settings.pools else ""))
    return (f"gpu-cluster:kubernetes.controlPlane.replicas is {replicas}: etcd and the API "
            f"survive losing a controller, but {alone}")


# Elastic IP addresses per Region, AWS's default quota
# (docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html, "Elastic IP addresses").
ELASTIC_IP_QUOTA = 5


def elastic_ips_warning(settings: StackConfig) -> Optional[str]:
    """A stack that would take the region's default quota of Elastic IPs whole, or more: one
    per EC2 controller (aws.controlPlane.elasticIp) and the NAT gateway's."""
    if settings.aws is None:
        return None
    controllers = (settings.control_plane_endpoint.replicas
                   if settings.aws.control_plane.elastic_ip else 0)
    nat = int(settings.aws.vpc.egress == "nat" and settings.aws.vpc.id is None)
    count = controllers + nat
    if count < ELASTIC_IP_QUOTA:
        return None
    return (f"gpu-cluster:aws.controlPlane.elasticIp: the stack takes {count} Elastic IPs "
            f"({controllers} for the controllers{', 1 for the NAT gateway' if nat else ''}), "
            f"and AWS's default quota is {ELASTIC_IP_QUOTA} per region for the whole account: "
            "raise it (Service Quotas, \"EC2-VPC Elastic IPs\") before `pulumi up`, or set "
            "elasticIp to false and reach the controllers' SSH from inside the VPC")


def backups_off_warning(settings: StackConfig) -> Optional[str]:
    """Backups left unset on a bare-metal stack with no place outside the controller: no
    snapshot is taken, and nothing else would say so (seed 000: the controller serves NFS)."""
    backup = settings.backup
    if backup.enabled is not None or settings.layout != "bare-metal":
        return None
    controller = settings.controller.name
    if backup_store(settings.layout, backup, settings.storage, controller) is not None:
        return None
    nfs = settings.storage.nfs
    why = (f"the NFS export is served by the controller {controller} itself "
           "(gpu-cluster:storage.nfs.host)" if nfs is not None
           else "there is no NFS export (gpu-cluster:storage.nfs) and no gpu-cluster:backup.path")
    return (f"no backups of the control plane: {why}, and a snapshot kept on the machine it "
            "restores is lost with it. Set gpu-cluster:backup.path to a folder on the "
            "controller where other storage is mounted, or gpu-cluster:storage.nfs.server to "
            "an NFS server on another machine (and gpu-cluster:backup.recipients); "
            "gpu-cluster:backup.enabled: false says you mean it")


def kubeflow_repository_warning(settings: StackConfig) -> Optional[str]:
    kubeflow = settings.kubeflow
    if kubeflow is None or "repository" not in kubeflow.source.model_fields_set:
        return None
    source = kubeflow.source
    if source.path is not None:
        return (f"gpu-cluster:kubeflow.source.repository ({source.repository}) is not read: "
                f"gpu-cluster:kubeflow.source.path ({source.path}) replaces it; remove one")
    if not source.vendored:
        return None
    return (f"gpu-cluster:kubeflow.source.repository ({source.repository}) is not read: "
            f"gpu-cluster:kubeflow.source.ref is the pinned release ({source.ref}), which is "
            "read from vendor/ (checked against vendor/SHA256SUMS); set "
            "gpu-cluster:kubeflow.source.ref to another tag or commit to read the repository, "
            "or remove the key")


def soft_mount_warnings(settings: StackConfig) -> list[str]:
    warnings = []
    for name in ("nfs", "efs"):
        backend = getattr(settings.storage, name)
        soft = [option for option in (backend.mount_options if backend else [])
                if option in SOFT_OPTIONS]
        if soft:
            warnings.append(
                f"gpu-cluster:storage.{name}.mountOptions has {', '.join(soft)}: when the "
                "server does not answer in time, reads and writes fail half done, which "
                "\"can cause silent data corruption\" (nfs(5)), e.g. in Katib's and "
                "Pipelines' MySQL on this storage; use hard (the default options)")
    return warnings
