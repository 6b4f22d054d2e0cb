"""The `gpu-cluster:storage` section: the backends a cluster's volumes live on (NFS, EFS,
node-local folders), one StorageClass each, the one rule for which is the default, and the
section's rules across keys."""

import hashlib
import ipaddress
from typing import Optional

from pydantic import Field

from config.host_paths import HostDataPath, host_path_problem
from config.model_base import Section
from config.partial import PartialConfig
from config.problems import Problem
from config.types import (AbsolutePath, DirectoryMode, DnsLabel, HostOrIp, IPv4, NfsMountOptions,
                          S3BucketName)

# The largest POSIX id EFS access points take (a 32-bit id; CreateAccessPoint's PosixUser).
MAX_ID = 2**32 - 2


class NfsBackend(Section):
    # An existing NFS server...
    server: Optional[HostOrIp] = None
    """An existing NFS server (address or name; an IP address with `access.teams`, whose pods are
    kept off it by address); or:."""
    # ...or a host of this cluster that the program turns into the NFS server.
    host: Optional[DnsLabel] = None
    """A cluster host the program turns into the NFS server."""
    path: AbsolutePath = "/srv/gpu-cluster"
    """Exported folder; volumes are sub-folders of it. With `host`: not `/`, a system folder
    (`/etc`, `/usr`, `/root`, `/tmp`, ...), `/home` or `/var` themselves, nor in or above the data
    of k0s, the kubelet or containerd (`/var/lib/k0s`, which `k0s reset` deletes); with `server`,
    the server's own export, any path."""
    # Hard: I/O waits for a server that is away and resumes, never failing half-done
    # writes ("soft" timeouts "can cause silent data corruption", nfs(5)); databases
    # (Katib's and Pipelines' MySQL) live here. AWS's recommended options for EFS
    # (https://docs.aws.amazon.com/efs/latest/ug/mounting-fs-nfs-mount-settings.html)
    # but noresvport: a Linux server's exports are `secure` by default (exports(5)) and
    # refuse non-reserved source ports.
    mount_options: NfsMountOptions = ["nfsvers=4.1", "rsize=1048576", "wsize=1048576", "hard",
                                      "timeo=600", "retrans=2"]
    """NFS mount options of every volume, one nfs(5) option per item; `hard` so I/O never fails
    half-done."""
    default: Optional[bool] = None
    """Make `nfs` the default StorageClass (required when two backends are set)."""


class EfsBackend(Section):
    # An existing file system's mount target address, reached over a VPN or Direct
    # Connect; by address so on-prem nodes need no AWS DNS. On the AWS layouts, leave it
    # out and the program creates the file system in the VPC.
    mount_target_address: Optional[IPv4] = None
    """Bare-metal: the address of an existing EFS mount target (required); hybrid: the fixed address
    of the created file system's first mount target (default `.20` of the first subnet; required
    with an adopted VPC)."""
    # On the AWS layouts: `pulumi destroy` refuses to delete the file system the program
    # created and, once unprotected, leaves it and its data in the account. Turn it off
    # only for clusters whose data may go with them (the README has the procedure).
    protect: bool = True
    """AWS layouts: the created file system is protected (`pulumi destroy` refuses) and retained on
    destroy; `false` lets `pulumi destroy` delete it and its data (see [Destroying a
    stack](layouts.md#destroying-a-stack))."""
    path: AbsolutePath = "/"
    """Folder on the file system; volumes are sub-folders of it."""
    # AWS's recommended NFS options for EFS, hard (see storage.nfs.mountOptions).
    mount_options: NfsMountOptions = ["nfsvers=4.1", "rsize=1048576", "wsize=1048576", "hard",
                                      "timeo=600", "retrans=2", "noresvport"]
    """AWS's recommended NFS options for EFS, one per item."""
    default: Optional[bool] = None
    """Make `efs` the default StorageClass."""
    # Hybrid layout: let NFS clients that present no IAM identity mount the file system the
    # program creates, as root, from the node addresses its security group admits. Its
    # on-prem hosts have no AWS identity and mount EFS with the kernel's NFS client, so a
    # hybrid stack with EFS must set it (the preview warns). On the cloud layout every node
    # mounts with IAM and TLS (the EFS CSI driver): off, unless volumes made before that
    # must keep mounting with the kernel's client (docs/layouts.md, "EFS access"; warned too).
    anonymous_nfs: bool = False
    """AWS layouts: let NFS clients without an IAM identity or TLS mount the created file system, as
    root, from the node addresses its security group admits; required on the hybrid layout without
    `issuerBucket` (its on-prem hosts then have no AWS identity); on cloud only while older claims
    must still mount; the preview warns (see [EFS access](layouts.md#efs-access))."""
    # The on-prem nodes' EFS CSI driver gets an AWS identity from its service account's
    # token (components/aws/service_account_issuer.py); the API server keeps accepting its
    # former issuer.
    issuer_bucket: Optional[S3BucketName] = None
    """Hybrid: a new, globally unique S3 bucket name that publishes the cluster's service-account
    issuer (its discovery document and key set only); the on-prem nodes then run the EFS CSI driver
    with a web identity, mounting access points with IAM and TLS, and each on-prem Node gets
    `spec.providerID`; the preview warns (see [EFS access](layouts.md#efs-access))."""
    # Cloud layout: each claim is an EFS access point (the CSI driver's efs-ap mode) whose
    # root folder gets this mode and whose user and group, one per claim, come from the
    # range below (aws-efs-csi-driver v3.4.1 pkg/driver/controller.go: directoryPerms at
    # :271, the allocation at :298-310, the range's own checks at :829-861).
    directory_perms: DirectoryMode = "700"
    """Cloud: the mode of each claim's access point folder (octal, 3 or 4 digits)."""
    gid_range_start: int = Field(default=50000, ge=1, le=MAX_ID)
    """Cloud: the first user and group id the claims' access points get (one per claim)."""
    gid_range_end: int = Field(default=60000, ge=1, le=MAX_ID)
    """Cloud: the end of that range (greater than `gidRangeStart`)."""


class LocalPathBackend(Section):
    # Node-local folder for volumes (seed 000 pointed it at a mergerfs mount).
    path: HostDataPath = "/opt/local-path-provisioner"
    """Node-local folder for volumes; the same folders as `storage.nfs.path` with `host` are
    refused."""
    default: Optional[bool] = None
    """Make `local-path` the default StorageClass."""


# The tags of the access points the EFS CSI driver creates: its own on every one
# (aws-efs-csi-driver v3.4.1 pkg/driver/controller.go:49-50 DefaultTagKey,
# buildAccessPointTags at :879), and the cluster's, from the chart's `controller.tags`
# (components/addons/efs_csi.py); the nodes' identity policy names both
# (components/aws/efs.py provisioner_policy).
ACCESS_POINT_CSI_TAG = "efs.csi.aws.com/cluster"
ACCESS_POINT_CLUSTER_TAG = "gpu-cluster/cluster"


def service_account_issuer(efs: Optional[EfsBackend], layout: str,
                           region: Optional[str]) -> Optional[str]:
    """The public issuer of the service-account tokens on the hybrid layout with
    storage.efs.issuerBucket: the bucket's virtual-hosted HTTPS address
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/VirtualHosting.html); None
    otherwise (the API server keeps its distribution's issuer)."""
    if efs is None or efs.issuer_bucket is None or layout != "hybrid" or not region:
        return None
    return f"https://{efs.issuer_bucket}.s3.{region}.amazonaws.com"


def efs_mounts_with_iam(layout: str, efs: Optional[EfsBackend] = None) -> bool:
    """The one rule for how nodes mount EFS: with IAM and TLS through the EFS CSI driver
    where every node has an AWS identity: an instance role (cloud), or, on the hybrid
    layout with storage.efs.issuerBucket, the web identity of the driver's service accounts
    (components/aws/service_account_issuer.py); otherwise with the kernel's NFS client
    (hybrid without it, bare-metal), which presents neither."""
    return layout == "cloud" or (layout == "hybrid" and efs is not None
                                 and efs.issuer_bucket is not None)


def efs_on_prem_identity(layout: str, efs: Optional[EfsBackend]) -> bool:
    """The on-prem nodes run the EFS CSI driver without EC2 metadata: their Nodes carry the
    providerID and region the driver reads instead (efs_provider_id)."""
    return layout == "hybrid" and efs_mounts_with_iam(layout, efs)


# The scheme of the on-prem nodes' providerID: the program's own, so neither the driver
# nor the AWS cloud controller manager reads it as an EC2 instance
# (docs/layouts.md, "EFS access").
PROVIDER_ID_SCHEME = "gpu-cluster"


def efs_provider_id(cluster_name: str, host_name: str) -> str:
    """An on-prem node's spec.providerID: 32 hex digits of sha256 over the cluster and host
    names, stable across runs. Off EC2 the EFS CSI driver takes its instance id from the
    Node's providerID, the first match of `i-[a-z0-9]+$|[a-z0-9]{32}`, and exits when there
    is none (aws-efs-csi-driver v3.4.1 pkg/cloud/k8s_metadata.go:44-53, reached from
    pkg/cloud/metadata.go:74-82 when IMDS does not answer; pkg/driver/driver.go:62-66 exits
    on the error). The scheme holds no `i-` and no 32 letters or digits in a row, so the
    match is the digest."""
    digest = hashlib.sha256(f"{cluster_name}/{host_name}".encode()).hexdigest()[:32]
    return f"{PROVIDER_ID_SCHEME}://{digest}"


# StorageClass name of each backend.
STORAGE_CLASS_NAMES = {"nfs": "nfs", "efs": "efs", "localPath": "local-path"}


class StorageSettings(Section):
    """One StorageClass per configured backend; exactly one is the default."""

    nfs: Optional[NfsBackend] = None
    """NFS volumes: an existing server (`server`) or a cluster host the program makes one
    (`host`)."""
    efs: Optional[EfsBackend] = None
    """Amazon EFS volumes (created on the AWS layouts, an existing mount target on bare metal)."""
    local_path: Optional[LocalPathBackend] = None
    """Node-local volumes (the local-path provisioner)."""

    @property
    def backends(self) -> dict[str, "NfsBackend | EfsBackend | LocalPathBackend"]:
        found = {"nfs": self.nfs, "efs": self.efs, "localPath": self.local_path}
        return {name: backend for name, backend in found.items() if backend is not None}

    @property
    def default_backends(self) -> list[str]:
        """The one rule for which backend is the default StorageClass: the only backend
        unless it sets default: false; of several, those that set default: true. A valid
        config has exactly one (storage_checks below); everything else asks default_backend."""
        backends = self.backends
        if len(backends) == 1:
            return [name for name, backend in backends.items() if backend.default is not False]
        return [name for name, backend in backends.items() if backend.default]

    @property
    def default_backend(self) -> str:
        [backend] = self.default_backends
        return backend

    @property
    def default_class(self) -> str:
        return STORAGE_CLASS_NAMES[self.default_backend]


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def storage_checks(cfg: PartialConfig) -> list[Problem]:
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
        if nfs.host is not None and cfg.complete("hosts") and nfs.host not in names:
            problems.append(Problem("storage.nfs.host", f"'{nfs.host}' is not one of the "
                                    f"configured hosts ({', '.join(names)})"))
    return problems
