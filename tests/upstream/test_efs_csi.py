"""The EFS CSI driver against its pinned release, the chart the program installs
(vendor/aws-efs-csi-driver-v3.4.1): the chart through the official `helm template` with the
program's values, and what it renders with the cloud stack's StorageClass through
kubernetes-validate --strict; the StorageClass's parameters and mount options against what
the driver's source reads (aws-efs-csi-driver v3.4.1 pkg/driver/controller.go, node.go)."""

import functools
import subprocess
import tempfile
from pathlib import Path

import yaml

from components.addons.efs_csi import (NAMESPACE, PROVISIONER, EfsCsiSettings, EfsWebIdentity,
                                       chart_values)
from components.addons.shared_storage import storage_manifests
from config import load, versions
from config.storage import ACCESS_POINT_CLUSTER_TAG as CLUSTER_TAG
from tests.builders import PROJECT_DIR, as_cli_config, cloud_config, hybrid_config
from tests.k8s_tools import validate_strict
from tests.upstream.test_pinned_upstream import by_kind, fixture, helm

CHART = PROJECT_DIR / versions.EFS_CSI_DRIVER_CHART
CLUSTER = "dev"
FILE_SYSTEM = "fs-0123456789abcdef0"
# k0s's and RKE2's kubelet folder is the same today; a different one must reach the chart.
KUBELET = "/var/lib/k0s/kubelet"


@functools.cache
def rendered_chart(kubelet: str = KUBELET) -> tuple:
    with tempfile.TemporaryDirectory() as folder:
        values = Path(folder) / "values.yaml"
        values.write_text(yaml.safe_dump(chart_values(CLUSTER, kubelet)))
        out = subprocess.run([str(helm()), "template", "aws-efs-csi-driver", str(CHART),
                              "-n", NAMESPACE, "-f", str(values)], capture_output=True,
                             text=True, check=True).stdout
    return tuple(o for o in yaml.safe_load_all(out) if o)


def storage_class(**efs) -> dict:
    values = cloud_config()
    values["storage"] = {"efs": efs}
    cli = as_cli_config(values)
    settings = load(cli.config, cli.secret_keys, stack="test")
    [found] = storage_manifests(settings.storage, csi=EfsCsiSettings(FILE_SYSTEM, CLUSTER,
                                                                     KUBELET))
    return found


def pod_spec(kind: str) -> dict:
    [workload] = by_kind(rendered_chart(), kind)
    return workload["spec"]["template"]["spec"]


def test_the_chart_is_the_pinned_release_and_upstream_s_folder():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (
        versions.EFS_CSI_DRIVER_CHART_VERSION, versions.EFS_CSI_DRIVER.lstrip("v"))
    upstream = fixture("aws-efs-csi-driver-v3.4.1/charts/aws-efs-csi-driver")
    ours = sorted(p.relative_to(CHART) for p in CHART.rglob("*") if p.is_file())
    assert ours == sorted(p.relative_to(upstream) for p in upstream.rglob("*") if p.is_file())
    for path in ours:
        assert (CHART / path).read_bytes() == (upstream / path).read_bytes(), path


def test_what_it_renders_with_the_storage_class_is_valid(tmp_path):
    objects = [*rendered_chart(), storage_class()]
    assert {o["kind"] for o in objects} >= {"Deployment", "DaemonSet", "CSIDriver",
                                            "StorageClass", "ServiceAccount", "ClusterRole"}
    validate_strict(objects, tmp_path / "efs-csi.yaml")


def test_every_image_is_a_pinned_one():
    pinned = {versions.DEPLOYED_IMAGES["EFS_CSI_DRIVER_IMAGE"]} | {
        image for _, image in versions.EFS_CSI_SIDECAR_IMAGES.values()}
    images = {c["image"] for kind in ("Deployment", "DaemonSet")
              for c in pod_spec(kind)["containers"]}
    assert images == pinned


def test_the_controller_uses_its_node_s_role_unprivileged_and_off_controllers():
    spec = pod_spec("Deployment")
    # The instance's role through IMDS (hop limit 1: the host's network only).
    assert spec["hostNetwork"] is True
    [plugin] = [c for c in spec["containers"] if c["name"] == "efs-plugin"]
    assert plugin["securityContext"]["privileged"] is False
    assert "--delete-access-point-root-dir=false" in plugin["args"]
    assert f"--tags={CLUSTER_TAG}:{CLUSTER}" in plugin["args"]
    [term] = spec["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "node-role.kubernetes.io/control-plane",
                                         "operator": "DoesNotExist"}]


def test_the_node_plugin_mounts_on_the_host_in_the_kubelet_s_folder():
    spec = pod_spec("DaemonSet")
    assert spec["hostNetwork"] is True
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert KUBELET in paths and f"{KUBELET}/plugins/efs.csi.aws.com/" in paths
    assert "/var/lib/kubelet" not in paths


def test_the_node_pods_account_may_not_change_nodes():
    [role] = [o for o in by_kind(rendered_chart(), "ClusterRole")
              if o["metadata"]["name"] == "efs-csi-node-role"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"],
                              "verbs": ["get", "list", "watch"]}]


def test_the_policy_pack_admits_what_the_chart_runs():
    """The stack's policy pack sees the chart's objects in a real `pulumi preview`; only the
    node plugin is privileged, and it is named among the system components."""
    from policy.rules import Resource, check

    for obj in rendered_chart():
        group = obj["apiVersion"].rpartition("/")[0] or "core"
        kind = f"kubernetes:{group}/{obj['apiVersion'].rpartition('/')[2]}:{obj['kind']}"
        assert check(Resource(type=kind, name=obj["metadata"]["name"], props=obj)) == [], obj[
            "metadata"]["name"]


def test_the_csi_driver_is_an_ordinary_object_not_a_hook():
    [driver] = by_kind(rendered_chart(), "CSIDriver")
    assert driver["metadata"]["name"] == PROVISIONER
    assert "helm.sh/hook" not in driver["metadata"].get("annotations", {})


def test_claims_are_access_points_with_their_own_ids_mounted_with_iam():
    found = storage_class()
    assert found["provisioner"] == PROVISIONER
    parameters = found["parameters"]
    # controller.go:41-70 names the parameters CreateVolume reads; nothing else is set.
    assert parameters == {
        "provisioningMode": "efs-ap", "fileSystemId": FILE_SYSTEM, "directoryPerms": "700",
        "gidRangeStart": "50000", "gidRangeEnd": "60000", "basePath": "/volumes",
        "subPathPattern": "${.PVC.namespace}/${.PVC.name}", "ensureUniqueDirectory": "true"}
    # efs-utils's `iam`; TLS is the driver's default for every access point (node.go:167-176),
    # and no volume attribute turns it off.
    assert found["mountOptions"][0] == "iam"
    assert "encryptInTransit" not in parameters and "tls" not in found["mountOptions"]
    assert found["reclaimPolicy"] == "Retain"
    changed = storage_class(directoryPerms="0750", gidRangeStart=70000, gidRangeEnd=70100)
    assert [changed["parameters"][k] for k in ("directoryPerms", "gidRangeStart",
                                               "gidRangeEnd")] == ["0750", "70000", "70100"]


def test_the_driver_takes_a_web_identity_where_its_node_has_none(tmp_path):
    """On-prem nodes (hybrid, storage.efs.issuerBucket): the node plugin's and the
    controller's tokens for STS and the roles they assume, through the chart's own env,
    volumes and volumeMounts (chart_values, as the program renders them), as the official
    `helm template` renders them; kubernetes-validate --strict accepts every object, and
    the StorageClass that mounts by address."""
    from components.addons.efs_csi import web_identity_values
    from components.aws.service_account_issuer import AUDIENCE, TOKEN_FILE

    roles = {"efs-csi-node-sa": "arn:aws:iam::123456789012:role/prod-sa-issuer-efs-node",
             "efs-csi-controller-sa":
                 "arn:aws:iam::123456789012:role/prod-sa-issuer-efs-controller"}
    values = chart_values(CLUSTER, KUBELET, web_identity_values(
        roles["efs-csi-node-sa"], roles["efs-csi-controller-sa"], "us-west-2"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        out = subprocess.run([str(helm()), "template", "aws-efs-csi-driver", str(CHART),
                              "-n", NAMESPACE, "-f", str(path)], capture_output=True,
                             text=True, check=True).stdout
    objects = [o for o in yaml.safe_load_all(out) if o]
    for kind, container in (("DaemonSet", "efs-plugin"), ("Deployment", "efs-plugin")):
        [workload] = by_kind(objects, kind)
        spec = workload["spec"]["template"]["spec"]
        [plugin] = [c for c in spec["containers"] if c["name"] == container]
        env = {e["name"]: e.get("value") for e in plugin["env"]}
        assert env["AWS_ROLE_ARN"] == roles[spec["serviceAccountName"]], kind
        assert env["AWS_WEB_IDENTITY_TOKEN_FILE"] == TOKEN_FILE
        assert env["AWS_REGION"] == "us-west-2"
        # The driver reads its node's providerID and region through CSI_NODE_NAME
        # (pkg/cloud/k8s_metadata.go:34-39): the chart sets it to the pod's node.
        [node_name] = [e for e in plugin["env"] if e["name"] == "CSI_NODE_NAME"]
        assert node_name["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
        [mount] = [m for m in plugin["volumeMounts"] if m["name"] == "aws-web-identity-token"]
        assert f"{mount['mountPath']}/token" == TOKEN_FILE and mount["readOnly"] is True
        [volume] = [v for v in spec["volumes"] if v["name"] == "aws-web-identity-token"]
        [source] = volume["projected"]["sources"]
        assert source["serviceAccountToken"]["audience"] == AUDIENCE
    # The node pods read their Node (get), never change it.
    [role] = [o for o in by_kind(objects, "ClusterRole")
              if o["metadata"]["name"] == "efs-csi-node-role"]
    [nodes] = [r for r in role["rules"] if "nodes" in r["resources"]]
    assert "get" in nodes["verbs"] and not {"patch", "update"} & set(nodes["verbs"])
    values = hybrid_config()
    values["storage"] = {"efs": {"issuerBucket": "gpu-test-issuer"}}
    cli = as_cli_config(values)
    settings = load(cli.config, cli.secret_keys, stack="test")
    [found] = storage_manifests(settings.storage, csi=EfsCsiSettings(
        FILE_SYSTEM, CLUSTER, KUBELET, EfsWebIdentity(
            node_role_arn=roles["efs-csi-node-sa"],
            controller_role_arn=roles["efs-csi-controller-sa"], region="us-west-2",
            mount_target_ip="10.0.1.10")))
    assert found["mountOptions"][0] == "iam" and found["mountOptions"][-1] == \
        "mounttargetip=10.0.1.10"
    validate_strict([*objects, found], tmp_path / "efs-csi.yaml")
