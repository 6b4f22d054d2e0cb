"""Shared storage for the cluster's workloads: one StorageClass per configured backend,
exactly one the default. Data outlives claims and the stack: reclaim policy Retain, and
the program never deletes a volume's folder."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.addons import efs_csi
from components.addons.efs_csi import EfsCsiSettings
from components.common import kube, pod_security
from config import versions
from config.hosts import Host
from config.storage import EfsBackend, LocalPathBackend, NfsBackend, STORAGE_CLASS_NAMES, StorageSettings
from contract.names import DEFAULT_STORAGE_CLASS_OUTPUT

NFS_NAMESPACE = "nfs-provisioner"
NFS_PROVISIONER = "k8s-sigs.io/nfs-subdir-external-provisioner"
# EFS is served over NFS too: its own instance of the same provisioner.
EFS_NAMESPACE = "efs-provisioner"
EFS_PROVISIONER = "gpu-cluster/efs-subdir-provisioner"
LOCAL_PATH_NAMESPACE = "local-path-storage"
LOCAL_PATH_PROVISIONER = "rancher.io/local-path"
# What marks the default StorageClass (kubernetes pkg/apis/storage/util/helpers.go,
# IsDefaultStorageClassAnnotation); which class gets it is StorageSettings.default_backend.
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


@dataclass(frozen=True, kw_only=True)
class SharedStorageArgs:
    storage: StorageSettings
    provider: k8s.Provider
    # The NFS server step when a cluster host serves NFS (the add-ons' provider waits for
    # the nodes).
    depends_on: list
    # With storage.nfs: the server's address (nfs_server_address).
    nfs_server: Optional[str] = None
    # The address of the EFS file system the program created (AWS layouts); otherwise
    # storage.efs.mountTargetAddress.
    efs_address: Optional[pulumi.Input[str]] = None
    # Where the nodes mount EFS with IAM and TLS (cloud): the EFS CSI driver instead of the
    # subdir provisioner (config/storage.py efs_mounts_with_iam).
    efs_csi: Optional[EfsCsiSettings] = None


class SharedStorage(pulumi.ComponentResource):
    def __init__(self, name: str, args: SharedStorageArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:addons:SharedStorage", name, None, opts)
        self.default_class = args.storage.default_class
        opts = kube.k8s_provider_opts(args.provider, self, args.depends_on)
        self.resources = kube.apply_all(
            storage_manifests(args.storage, args.nfs_server, args.efs_address, args.efs_csi),
            opts)
        if args.efs_csi is not None and args.storage.efs is not None:
            # What claims on the efs class wait for, with the StorageClass.
            self.resources.append(k8s.helm.v4.Chart(
                f"{name}-efs-csi", chart=versions.EFS_CSI_DRIVER_CHART,
                namespace=efs_csi.NAMESPACE,
                values=_chart_values(args.efs_csi),
                opts=opts))
        self.register_outputs({DEFAULT_STORAGE_CLASS_OUTPUT: self.default_class})


def _chart_values(csi: EfsCsiSettings) -> pulumi.Input[dict]:
    identity = csi.web_identity
    if identity is None:
        return efs_csi.chart_values(csi.cluster_name, csi.kubelet_root_dir)
    return pulumi.Output.all(identity.node_role_arn, identity.controller_role_arn).apply(
        lambda arns: efs_csi.chart_values(
            csi.cluster_name, csi.kubelet_root_dir,
            efs_csi.web_identity_values(arns[0], arns[1], identity.region)))


def nfs_server_address(nfs: NfsBackend, hosts: Sequence[Host]) -> str:
    """storage.nfs.server, or the address of the cluster host storage.nfs.host names."""
    if nfs.server:
        return nfs.server
    return next(h.address for h in hosts if h.name == nfs.host)


def storage_manifests(storage: StorageSettings, nfs_server: Optional[str] = None,
                      efs_address: Optional[pulumi.Input[str]] = None,
                      csi: Optional[EfsCsiSettings] = None) -> list[dict]:
    manifests: list[dict] = []
    for backend_name, backend in storage.backends.items():
        is_default = backend_name == storage.default_backend
        if isinstance(backend, NfsBackend):
            if not nfs_server:
                raise ValueError("storage.nfs is configured but no NFS server address was given")
            manifests += _nfs_subdir(
                STORAGE_CLASS_NAMES["nfs"], NFS_NAMESPACE, NFS_PROVISIONER,
                "nfs-subdir-external-provisioner", nfs_server, backend,
                is_default)
        elif isinstance(backend, EfsBackend) and csi is not None:
            manifests.append(_storage_class(
                STORAGE_CLASS_NAMES["efs"], is_default=is_default,
                **efs_csi.storage_class_fields(
                    backend, csi.file_system_id,
                    csi.web_identity.mount_target_ip if csi.web_identity else None)))
        elif isinstance(backend, EfsBackend):
            # By mount-target address: on-prem nodes need no AWS DNS to reach it.
            manifests += _nfs_subdir(
                STORAGE_CLASS_NAMES["efs"], EFS_NAMESPACE, EFS_PROVISIONER,
                "efs-subdir-provisioner", efs_address or backend.mount_target_address, backend,
                is_default)
        elif isinstance(backend, LocalPathBackend):
            manifests += _local_path(backend, is_default)
    return manifests


def _storage_class(name: str, provisioner: str, is_default: bool, **fields) -> dict:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name,
                     "annotations": {DEFAULT_CLASS_ANNOTATION: "true" if is_default else "false"}},
        "provisioner": provisioner,
        # A deleted claim leaves its volume and data behind for an admin to reuse or remove.
        "reclaimPolicy": "Retain",
        **fields,
    }


def _service_account_rbac(namespace: str, account: str, cluster_rules: list[dict],
                          namespace_rules: list[dict]) -> list[dict]:
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    rbac = "rbac.authorization.k8s.io"
    return [
        # The subdir provisioner runs as root (it creates and chowns each claim's folder on
        # the export) with the runtime's default capabilities: baseline, not the cluster's
        # restricted default; no team user has a role here.
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": namespace, "labels": pod_security.namespace_labels("baseline", "latest")}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account, "namespace": namespace}},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRole", "metadata": {"name": account},
         "rules": cluster_rules},
        {"apiVersion": f"{rbac}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": account},
         "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": account},
         "subjects": subject},
        {"apiVersion": f"{rbac}/v1", "kind": "Role",
         "metadata": {"name": account, "namespace": namespace}, "rules": namespace_rules},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding",
         "metadata": {"name": account, "namespace": namespace},
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": account}, "subjects": subject},
    ]


def _provisioner_deployment(account: str, namespace: str, image: str, env: list[dict],
                            mount: tuple[str, dict], command: list[str] = None) -> dict:
    """A single-replica provisioner running as `account` with one volume mounted."""
    labels = {"app.kubernetes.io/name": account}
    mount_path, volume = mount
    container = {
        "name": "provisioner",
        "image": image,
        "env": env,
        "securityContext": {"allowPrivilegeEscalation": False},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": "data", "mountPath": mount_path}],
    }
    if command:
        container["command"] = command
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": account, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": account,
                "containers": [container],
                "volumes": [{"name": "data", **volume}],
            }},
        },
    }


def _rule(group: str, resources: list[str], verbs: list[str]) -> dict:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def _nfs_subdir(class_name: str, namespace: str, provisioner: str, account: str, server: str,
                nfs: "NfsBackend | EfsBackend", is_default: bool) -> list[dict]:
    rbac = _service_account_rbac(
        namespace, account,
        cluster_rules=[
            _rule("", ["persistentvolumes"], ["get", "list", "watch", "create", "delete"]),
            _rule("", ["persistentvolumeclaims"], ["get", "list", "watch", "update"]),
            _rule("storage.k8s.io", ["storageclasses"], ["get", "list", "watch"]),
            _rule("", ["events"], ["create", "update", "patch"]),
        ],
        namespace_rules=[_rule("", ["endpoints"],
                               ["get", "list", "watch", "create", "update", "patch"])],
    )
    deployment = _provisioner_deployment(
        account, namespace, versions.NFS_SUBDIR_PROVISIONER_IMAGE,
        env=[
            {"name": "PROVISIONER_NAME", "value": provisioner},
            {"name": "NFS_SERVER", "value": server},
            {"name": "NFS_PATH", "value": nfs.path},
        ],
        mount=("/persistentvolumes", {"persistentVolumeClaim": {"claimName": f"{account}-root"}}),
    )
    # One provisioner pod at a time on the export.
    deployment["spec"]["strategy"] = {"type": "Recreate"}
    # The provisioner's own mount of the export goes through a static volume so it gets
    # the same mount options as every volume (an inline `nfs:` volume takes none).
    root_labels = {"gpu-cluster/volume": f"{account}-root"}
    root_volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{account}-root", "labels": root_labels},
        "spec": {
            "capacity": {"storage": "10Mi"},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": list(nfs.mount_options),
            "nfs": {"server": server, "path": nfs.path},
        },
    }
    root_claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"{account}-root", "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "storageClassName": "",
            "selector": {"matchLabels": root_labels},
            "resources": {"requests": {"storage": "10Mi"}},
        },
    }
    storage_class = _storage_class(
        class_name, provisioner, is_default,
        parameters={
            # Folders named after the claim: a claim re-created with the same name finds
            # its data again, and a removed one is archived, never deleted.
            "pathPattern": "${.PVC.namespace}-${.PVC.name}",
            "archiveOnDelete": "true",
        },
        mountOptions=list(nfs.mount_options),
        volumeBindingMode="Immediate",
    )
    return rbac + [root_volume, root_claim, deployment, storage_class]


def _local_path(local: LocalPathBackend, is_default: bool) -> list[dict]:
    account = "local-path-provisioner"
    rbac = _service_account_rbac(
        LOCAL_PATH_NAMESPACE, account,
        cluster_rules=[
            _rule("", ["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"],
                  ["get", "list", "watch"]),
            _rule("", ["persistentvolumes"],
                  ["get", "list", "watch", "create", "patch", "update", "delete"]),
            _rule("", ["events"], ["create", "patch"]),
            _rule("storage.k8s.io", ["storageclasses"], ["get", "list", "watch"]),
        ],
        namespace_rules=[_rule("", ["pods"],
                               ["get", "list", "watch", "create", "patch", "update", "delete"])],
    )
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "local-path-config", "namespace": LOCAL_PATH_NAMESPACE},
        "data": {
            "config.json": json.dumps({"nodePathMap": [
                {"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": [local.path]}]}, indent=2),
            "setup": '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
            # Only runs for a Delete reclaim policy; data is moved aside, never removed.
            "teardown": '#!/bin/sh\nset -eu\nmv "$VOL_DIR" "$VOL_DIR.deleted-$(date +%s)"\n',
            "helperPod.yaml": _helper_pod(),
        },
    }
    deployment = _provisioner_deployment(
        account, LOCAL_PATH_NAMESPACE, versions.LOCAL_PATH_PROVISIONER_IMAGE,
        env=[
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "CONFIG_MOUNT_PATH", "value": "/etc/config/"},
        ],
        mount=("/etc/config/", {"configMap": {"name": "local-path-config"}}),
        command=["local-path-provisioner", "start", "--config", "/etc/config/config.json"],
    )
    storage_class = _storage_class(
        STORAGE_CLASS_NAMES["localPath"], LOCAL_PATH_PROVISIONER, is_default,
        volumeBindingMode="WaitForFirstConsumer",
    )
    return rbac + [config, deployment, storage_class]


def _helper_pod() -> str:
    import yaml

    return yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "node.kubernetes.io/disk-pressure", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "containers": [{"name": "helper-pod", "image": versions.BUSYBOX_IMAGE,
                            "imagePullPolicy": "IfNotPresent"}],
        },
    }, sort_keys=False)
