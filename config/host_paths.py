"""Folders of a cluster host that volumes may live in: not the system's, not the cluster
distribution's data. A cluster host exports storage.nfs.path read-write to the cluster's
nodes (components/hosts/bootstrap.py NFS_EXPORT_OPTIONS), and every node creates and deletes
volume folders under storage.localPath.path."""

from typing import Annotated, Optional

from pydantic import AfterValidator

from config.types import AbsolutePath

# The operating system's own trees (FHS), refused with everything under them.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                "/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/tmp", "/var/tmp",
                "/var/run", "/var/lock", "/var/log", "/var/cache")
# Data of what runs the cluster, refused with everything under them and every folder that
# holds one (/, /var, /var/lib): `k0s reset` deletes the whole k0s data dir, /var/lib/k0s
# ("Deletes the whole k0s data directory", https://docs.k0sproject.io/stable/reset/), and
# it holds the cluster's keys; the kubelet root (components/distributions/k0s.py
# KUBELET_ROOT_DIR) mounts every pod volume; containerd's and RKE2's (/var/lib/rancher) hold
# images and state; the program keeps its boot state in /var/lib/gpu-cluster; the NFS
# server's in /var/lib/nfs.
DATA_TREES = ("/var/lib/k0s", "/var/lib/kubelet", "/var/lib/containerd", "/var/lib/rancher",
              "/var/lib/docker", "/var/lib/gpu-cluster", "/var/lib/nfs")
# Folders that hold everyone's files: refused themselves, a folder below them is fine.
SHARED_ROOTS = ("/home",)


def _parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part not in ("", "."))


def _under(path: tuple[str, ...], tree: str) -> bool:
    top = _parts(tree)
    return path[:len(top)] == top


def host_path_problem(path: str) -> Optional[str]:
    """Why `path` may not hold volumes on a cluster host, or None."""
    parts = _parts(path)
    shown = "/" + "/".join(parts)
    if not parts:
        return "is the root folder; give a folder of its own, like /srv/gpu-cluster"
    for tree in SYSTEM_TREES:
        if _under(parts, tree):
            return f"'{shown}' is in {tree}, a system folder; use a folder of its own, " \
                "like /srv/gpu-cluster"
    for tree in DATA_TREES:
        if _under(parts, tree):
            return f"'{shown}' is in {tree}, which the cluster's own software owns (k0s " \
                "reset deletes its data dir); use a folder of its own, like /srv/gpu-cluster"
        if _under(_parts(tree), shown):
            return f"'{shown}' holds {tree}, which the cluster's own software owns; use a " \
                "folder of its own, like /srv/gpu-cluster"
    if shown in SHARED_ROOTS:
        return f"'{shown}' holds every user's files; use a folder below it or of its own"
    return None


def _host_data_path(value: str) -> str:
    problem = host_path_problem(value)
    if problem:
        raise ValueError(problem)
    return value


# A folder on every node (storage.localPath.path).
HostDataPath = Annotated[AbsolutePath, AfterValidator(_host_data_path)]
