"""EFS as the previews render it: the cloud stack mounts through the EFS CSI driver (access
points, `iam`, TLS) under a file system policy that requires both, with no warning; the
hybrid stack keeps the kernel's NFS client, says so with storage.efs.anonymousNfs, and the
preview warns. The policies' meaning is evaluated in tests/components/test_iam_evaluation.py."""

import json

from preview import aws_mocks
from tests.builders import cloud_config, example_plan, preview

CSI = "efs.csi.aws.com"


def efs_class(plan) -> dict:
    [found] = [r.inputs for r in plan.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
               if r.inputs["metadata"]["name"] == "efs"]
    return found


def anonymous_warnings(plan) -> list:
    return [w for w in plan.warnings if "storage.efs.anonymousNfs" in str(w)]


def subdir_objects(plan) -> list:
    return [r.name for r in plan.resources if r.type.startswith("kubernetes:")
            and ("efs-subdir-provisioner" in r.name or "efs-provisioner" in r.name)]


def test_the_cloud_stack_mounts_through_the_csi_driver_with_iam():
    dev = example_plan("dev")
    found = efs_class(dev)
    [file_system] = dev.of_type("aws:efs/fileSystem:FileSystem")
    assert found["provisioner"] == CSI
    assert found["parameters"]["provisioningMode"] == "efs-ap"
    assert found["parameters"]["fileSystemId"] == aws_mocks.resource(
        file_system.type, file_system.name, file_system.inputs)[0]
    assert "iam" in found["mountOptions"]
    [chart] = [c for c in dev.of_type("kubernetes:helm.sh/v4:Chart")
               if c.name == "dev-storage-efs-csi"]
    assert chart.inputs["chart"] == "vendor/aws-efs-csi-driver-v3.4.1/charts/aws-efs-csi-driver"
    assert chart.inputs["namespace"] == "kube-system"
    assert not subdir_objects(dev)
    # IAM and TLS: nothing to warn about.
    assert not anonymous_warnings(dev)
    [policy] = dev.of_type("aws:efs/fileSystemPolicy:FileSystemPolicy")
    sids = [s["Sid"] for s in json.loads(policy.inputs["policy"])["Statement"]]
    assert sids == ["NodesMountWriteAndAreRoot", "TlsOnly", "NodeRolesOnly"]


def test_the_pools_roles_may_make_the_access_points():
    dev = example_plan("dev")
    attached = [r for r in dev.of_type("aws:iam/rolePolicy:RolePolicy")
                if r.name.startswith("dev-efs-csi-controller-")]
    assert len(attached) == len(dev.of_type("aws:autoscaling/group:Group")) == 3


def test_a_cloud_stack_that_keeps_old_nfs_volumes_is_warned_about():
    values = cloud_config()
    values["storage"] = {"efs": {"anonymousNfs": True}}
    plan = preview(values)
    # New claims still go through the driver; the policy lets clients without IAM in.
    assert efs_class(plan)["provisioner"] == CSI
    [warning] = anonymous_warnings(plan)
    assert "without an IAM identity or TLS" in str(warning)
    [policy] = plan.of_type("aws:efs/fileSystemPolicy:FileSystemPolicy")
    assert json.loads(policy.inputs["policy"])["Statement"][0]["Principal"] == {"AWS": "*"}


def test_the_hybrid_stack_keeps_the_kernel_client_and_is_warned_about():
    prod = example_plan("prod")
    assert efs_class(prod)["provisioner"] == "gpu-cluster/efs-subdir-provisioner"
    assert not [c for c in prod.of_type("kubernetes:helm.sh/v4:Chart") if "efs-csi" in c.name]
    assert anonymous_warnings(prod)
