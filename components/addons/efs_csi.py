"""EFS through the EFS CSI driver (kubernetes-sigs/aws-efs-csi-driver, its chart vendored at
the release tag, vendor/README.md), where every node has an AWS identity (the cloud layout,
config/storage.py efs_mounts_with_iam): each claim is an access point of the file system
with a user and group of its own, mounted by efs-utils with `tls` and `iam`, so the file
system policy (components/aws/efs.py efs_policy) can require both."""

from dataclasses import dataclass
from typing import Optional

import pulumi

from config import versions
from config.image_pins import chart_tag
from config.storage import ACCESS_POINT_CLUSTER_TAG, EfsBackend

# Upstream installs it in kube-system (docs/install.md:57 at v3.4.1), which the cluster's
# Pod Security default exempts (components/common/pod_security.py): its node pods are
# privileged, with the host's network and the kubelet's folder.
NAMESPACE = "kube-system"
PROVISIONER = "efs.csi.aws.com"
# The node pods' service account (charts/aws-efs-csi-driver/values.yaml:245 at v3.4.1): the
# one whose tokens the on-prem EFS role trusts (components/aws/service_account_issuer.py).
NODE_SERVICE_ACCOUNT = "efs-csi-node-sa"
# The controller pods' (values.yaml:115): the on-prem provisioner role's.
CONTROLLER_SERVICE_ACCOUNT = "efs-csi-controller-sa"
# What k0s and RKE2 label a controller that runs a kubelet with (k0s docs/
# worker-node-config.md, "Controller worker nodes are assigned ... labels").
_CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


@dataclass(frozen=True, kw_only=True)
class EfsWebIdentity:
    """Hybrid with storage.efs.issuerBucket: how the on-prem nodes' EFS CSI driver gets an
    AWS identity and reaches the file system."""

    # The roles its node and controller pods assume with their service accounts' tokens.
    node_role_arn: pulumi.Input[str]
    controller_role_arn: pulumi.Input[str]
    region: str
    # The mount target on-prem nodes mount by address (no AWS DNS off the VPC).
    mount_target_ip: pulumi.Input[str]


@dataclass(frozen=True)
class EfsCsiSettings:
    """What the composition knows that the chart needs."""
    # The file system the program created (the StorageClass's fileSystemId).
    file_system_id: pulumi.Input[str]
    cluster_name: str
    # The distribution's kubelet folder, where the node plugin publishes volumes.
    kubelet_root_dir: str
    # Hybrid with storage.efs.issuerBucket: the on-prem nodes' web identity.
    web_identity: Optional[EfsWebIdentity] = None


def chart_values(cluster_name: str, kubelet_root_dir: str,
                 web_identity: Optional[dict] = None) -> dict:
    """The chart's values (charts/aws-efs-csi-driver/values.yaml at v3.4.1) the program
    sets; everything else is upstream's default. `web_identity`: the on-prem nodes'
    (web_identity_values), with its roles' ARNs resolved."""
    sidecars = {name: {"image": {"repository": repository,
                                 "tag": chart_tag(image, repository),
                                 "pullPolicy": "IfNotPresent"}}
                for name, (repository, image) in versions.EFS_CSI_SIDECAR_IMAGES.items()}
    values = {
        "image": {"repository": versions.EFS_CSI_DRIVER_IMAGE_REPOSITORY,
                  "tag": chart_tag(versions.EFS_CSI_DRIVER_IMAGE,
                                   versions.EFS_CSI_DRIVER_IMAGE_REPOSITORY),
                  "pullPolicy": "IfNotPresent"},
        "sidecars": sidecars,
        # The CSIDriver as an ordinary object, not a Helm hook (templates/csidriver.yaml):
        # the provider applies it like the rest and deletes it with the release.
        "useHelmHooksForCSIDriver": False,
        "controller": {
            # The host's network, as the node pods have it (templates/node-daemonset.yaml
            # `hostNetwork: true`): the instance's role through IMDS, whose hop limit of 1
            # (components/aws/gpu_worker_pool.py) keeps it from pods on the pod network.
            "hostNetwork": True,
            # Access points only: the controller never mounts the file system's root, so
            # it needs no privilege (values.yaml: privileged is only for
            # deleteAccessPointRootDir, which stays off: data outlives its claim).
            "deleteAccessPointRootDir": False,
            "containerSecurityContext": {"privileged": False,
                                         "allowPrivilegeEscalation": False},
            # On the access points it creates, next to the driver's own tag: what the
            # nodes' identity policy lets them tag and delete (components/aws/efs.py
            # provisioner_policy; `--tags key:value`, pkg/driver/driver.go:196-220).
            "tags": {ACCESS_POINT_CLUSTER_TAG: cluster_name},
            # Not on a controller that runs a kubelet (RKE2's server): the pools' roles are
            # the ones allowed to make access points.
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": _CONTROL_PLANE_LABEL, "operator": "DoesNotExist"}]}]}}},
        },
        "node": {
            "kubeletPath": kubelet_root_dir,
            # No `patch` on every Node for the node pods' account (its only use is taking
            # off the driver's startup taint, which no node here carries: values.yaml
            # `disableMutation`, templates/node-serviceaccount.yaml): a pool node holds
            # that account's token, and must not be able to change other nodes.
            "serviceAccount": {"disableMutation": True},
        },
    }
    for part in ("node", "controller"):
        values[part].update((web_identity or {}).get(part, {}))
    return values


# How long a node pod's projected token lives: kubelet renews it at 80% of its life
# (kubernetes docs, "Launch a Pod using service account token projection"); STS takes
# tokens of any remaining life.
_TOKEN_SECONDS = 3600


def web_identity_node_values(role_arn: str, region: str) -> dict:
    """A pod's AWS identity where its node has none (on-prem): the projected token of its
    service account, for STS (components/aws/service_account_issuer.py AUDIENCE), and the
    role it assumes with it. efs-utils reads AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE
    (aws/efs-utils v3.2.0 src/efs_utils_common/aws_credentials.py:116-126,
    constants.py:180-181) and the region from AWS_REGION (metadata.py:145-148) for STS and
    the file system's name; the driver's own AWS SDK reads the same three (the SDK's
    default chain: https://docs.aws.amazon.com/sdkref/latest/guide/feature-assume-role-credentials.html);
    the chart passes node.env, node.volumes and node.volumeMounts through
    (templates/node-daemonset.yaml), and the controller's likewise
    (templates/controller-deployment.yaml:115-123, :217)."""
    # Here, not at the top: a bare-metal stack loads this module but never the AWS SDK.
    from components.aws.service_account_issuer import AUDIENCE, TOKEN_DIRECTORY, TOKEN_FILE

    return {
        "env": [{"name": "AWS_ROLE_ARN", "value": role_arn},
                {"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": TOKEN_FILE},
                {"name": "AWS_REGION", "value": region}],
        "volumes": [{"name": "aws-web-identity-token", "projected": {"sources": [
            {"serviceAccountToken": {"audience": AUDIENCE, "path": "token",
                                     "expirationSeconds": _TOKEN_SECONDS}}]}}],
        "volumeMounts": [{"name": "aws-web-identity-token", "mountPath": TOKEN_DIRECTORY,
                          "readOnly": True}],
    }


def web_identity_values(node_role_arn: str, controller_role_arn: str, region: str) -> dict:
    """The node plugin's and the controller's web identities (chart_values' argument)."""
    return {"node": web_identity_node_values(node_role_arn, region),
            "controller": web_identity_node_values(controller_role_arn, region)}


def storage_class_fields(efs: EfsBackend, file_system_id: str,
                         mount_target_ip: Optional[str] = None) -> dict:
    """The StorageClass's provisioner, parameters and mount options (docs/parameters.md at
    v3.4.1). Each claim gets an access point (efs-ap) under /volumes, named after the claim
    with a unique suffix, with a user and group of its own from the configured range, which
    EFS enforces for every operation through it (user identity enforcement, same page)."""
    return {
        "provisioner": PROVISIONER,
        "parameters": {
            "provisioningMode": "efs-ap",
            "fileSystemId": file_system_id,
            "directoryPerms": efs.directory_perms,
            "gidRangeStart": str(efs.gid_range_start),
            "gidRangeEnd": str(efs.gid_range_end),
            "basePath": "/volumes",
            "subPathPattern": "${.PVC.namespace}/${.PVC.name}",
            "ensureUniqueDirectory": "true",
        },
        # `iam`: efs-utils signs the mount with the node's role (the instance's, through
        # IMDS). TLS needs no option: the driver adds `tls` to every mount unless a volume
        # says encryptInTransit "false", and to every access point mount regardless
        # (pkg/driver/node.go:102 and :167-176 at v3.4.1); a `tls` here only logs that it
        # is deprecated (:222-230). The rest: storage.efs.mountOptions.
        # On-prem nodes: the mount target by address (`mounttargetip`, efs-utils v3.2.0
        # src/mount_efs/dns_resolver.py:104-120: no DNS lookup of the file system's name,
        # which only the VPC resolves); the driver passes mount options through
        # (pkg/driver/node.go:200-243).
        "mountOptions": ["iam", *efs.mount_options,
                         *([f"mounttargetip={mount_target_ip}"] if mount_target_ip else [])],
        "volumeBindingMode": "Immediate",
    }
