"""Scheduled snapshots of the control plane through the offline preview, on each layout:
where they go (the stack output backupLocation), the step that installs them on the
controller and when it runs, the S3 bucket private and encrypted with its retention, the
controller's role allowed to put its own snapshots only, and every store's snapshots
encrypted on the controller to backup.recipients, with no key that decrypts in the plan."""

import copy
import json

import pytest

from preview import aws_mocks
from preview.engine import unwrap_secrets
from components.common.bundle import step_bundle
from components.common.step_text import step_inputs
from tests.stacks.steps import boot_steps
from tests.builders import TEST_AGE_RECIPIENT, example_plan, bare_metal_config, preview

COMMAND = "command:remote:Command"
BUCKET = "aws:s3/bucket:Bucket"


@pytest.fixture(scope="module")
def stacks():
    return {stack: example_plan(stack)
            for stack in ("lab", "prod", "dev", "rke2")}


def bare_metal(**changes) -> dict:
    values = copy.deepcopy(bare_metal_config())
    values["backup"] = {"recipients": [TEST_AGE_RECIPIENT]}
    values.update(changes)
    return values


def install_step(plan):
    [step] = [r for r in plan.of_type(COMMAND) if r.name.endswith("-install-backup")]
    return step, step_inputs(unwrap_secrets(step.inputs["stdin"]))


def installed(inputs) -> dict[str, str]:
    """The bundle files install-backup installs (BACKUP_FILES), by path: their texts,
    once each digest is checked against the bundle's."""
    files = dict(word.split("=") for word in inputs["BACKUP_FILES"].split())
    assert len(files) == len(inputs["BACKUP_FILES"].split())
    bundle = step_bundle()
    assert all(bundle.sha256(path) == sha256 for path, sha256 in files.items())
    return {path: bundle.text(path) for path in files}


def test_bare_metal_keeps_them_encrypted_in_the_nfs_export_of_another_machine():
    plan = preview(bare_metal(storage={"nfs": {"server": "192.168.2.50", "path": "/export"}}))
    step, inputs = install_step(plan)
    assert step.name == "controller-install-backup"
    assert inputs["BACKUP_STORE"] == "nfs"
    assert inputs["BACKUP_NFS_SOURCE"] == "192.168.2.50:/export"
    assert inputs["BACKUP_DIR"] == "gpu-cluster-backups/test"
    assert inputs["BACKUP_NFS_OPTIONS"] == "nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2"
    assert inputs["BACKUP_SCHEDULE"] == "*-*-* 03:30:00" and inputs["BACKUP_RETENTION"] == "7"
    assert plan.outputs["backupLocation"][0] == "nfs://192.168.2.50/export/gpu-cluster-backups/test"
    # Encrypted on the controller to the configured public key: the program makes no key
    # of its own, and the controller gets none that decrypts.
    assert inputs["BACKUP_RECIPIENTS"] == TEST_AGE_RECIPIENT
    assert "BACKUP_ENCRYPTION_KEY" not in inputs
    assert not [r for r in plan.resources if r.name == "test-backup-key"]
    assert "AGE-SECRET-KEY" not in unwrap_secrets(step.inputs["stdin"])
    # After the controller is installed; the k0s backup and restore commands.
    assert "controller-install-controller" in plan.all_dependencies(step)
    files = installed(inputs)
    assert list(files) == ["lib.sh", "backup/lib.sh", "k0s/cluster-state.sh", "backup/backup.sh",
                           "backup/restore.sh"]
    assert "k0s backup --save-path" in files["k0s/cluster-state.sh"]
    assert "k0s restore --config-out" in files["k0s/cluster-state.sh"]


def test_bare_metal_keeps_them_in_backup_path_when_set():
    plan = preview(bare_metal(backup={"path": "/mnt/backups", "schedule": "daily",
                                      "retention": 14, "recipients": [TEST_AGE_RECIPIENT]}))
    _, inputs = install_step(plan)
    assert (inputs["BACKUP_STORE"], inputs["BACKUP_DIR"]) == ("path", "/mnt/backups")
    assert (inputs["BACKUP_SCHEDULE"], inputs["BACKUP_RETENTION"]) == ("daily", "14")
    assert plan.outputs["backupLocation"][0] == "/mnt/backups"


@pytest.mark.parametrize("values", [
    bare_metal(),  # the NFS export is the controller's own disk
    bare_metal(storage={"nfs": {"server": "192.168.2.50"}}, backup={"enabled": False}),
], ids=["nowhere-else", "off"])
def test_without_a_place_outside_the_controller_or_turned_off_there_are_none(values):
    plan = preview(values)
    assert not [r for r in plan.resources if "backup" in r.name]
    assert "backupLocation" not in plan.outputs


def test_the_lab_stack_serves_nfs_from_its_controller_and_has_none(stacks):
    assert "backupLocation" not in stacks["lab"].outputs
    assert not [r for r in stacks["lab"].resources if "backup" in r.name]


@pytest.mark.parametrize("stack, distribution_command", [
    ("prod", "k0s backup --save-path"), ("rke2", "rke2 etcd-snapshot save")])
def test_hybrid_puts_them_to_its_bucket_over_ssh(stacks, stack, distribution_command):
    plan = stacks[stack]
    step, inputs = install_step(plan)
    [bucket] = backup_buckets(plan)
    cluster = inputs["BACKUP_NAME"]
    assert inputs["BACKUP_STORE"] == "s3"
    assert inputs["BACKUP_BUCKET"].startswith(f"{cluster}-backups-")
    assert inputs["BACKUP_OBJECT"] == f"{cluster}/control-plane/snapshot"
    # Encrypted before the upload too, to the stack's recipient (Pulumi.<stack>.yaml).
    assert inputs["BACKUP_RECIPIENTS"].startswith("age1")
    files = installed(inputs)
    assert files["aws/s3-object.py"].startswith('"""usage: s3-object.py put')
    [cluster_state] = [text for path, text in files.items() if path.endswith("/cluster-state.sh")]
    assert distribution_command in cluster_state
    assert "control-plane-install-controller" in plan.all_dependencies(step)
    assert plan.outputs["backupLocation"][0] == (
        f"s3://{inputs['BACKUP_BUCKET']}/{cluster}/control-plane/snapshot")
    assert bucket.retain_on_delete


def test_cloud_installs_them_at_boot_from_the_bundle(stacks):
    dev = stacks["dev"]
    # Over SSH the cloud controller only gets its upgrades (check-version, install).
    assert not [step for step in dev.of_type(COMMAND) if "backup" in step.name]
    [instance] = dev.of_type("aws:ec2/instance:Instance")
    steps = boot_steps(dev, instance)
    inputs = step_inputs(steps[-1])
    assert (inputs["GPU_CLUSTER_HOST"], inputs["GPU_CLUSTER_STEP"]) == (
        "control-plane", "install-backup")
    assert step_inputs(steps[-2])["GPU_CLUSTER_STEP"] == "install-controller"
    assert inputs["BACKUP_STORE"] == "s3" and inputs["BACKUP_BUCKET"].startswith("dev-backups-")
    assert inputs["BACKUP_RECIPIENTS"].startswith("age1")
    assert "aws/s3-object.py" in installed(inputs)
    # The boot plan runs it from the bundle, as over SSH: no script's text in its stdin,
    # and no SSM parameter holds it.
    [(_, stdin)] = [step for step in dev.boot_steps(instance.inputs["userDataBase64"])
                    if step[0] == "install-backup"]
    assert "gpu_cluster_run_step" in stdin and "\nmain " not in stdin
    assert len(stdin) < 4096, len(stdin)
    assert not [r for r in dev.of_type("aws:ssm/parameter:Parameter") if "backup" in r.name]


@pytest.mark.parametrize("stack", ["prod", "dev", "rke2"])
def test_the_bucket_is_private_encrypted_versioned_and_tls_only(stacks, stack):
    plan = stacks[stack]
    # The backups' bucket and its settings (the stack's other bucket holds its boot).
    inputs = {r.type.split(":")[-1]: r.inputs for r in plan.resources
              if r.type.startswith("aws:s3/") and "-backups-" in r.name}
    assert inputs["BucketPublicAccessBlock"] | {"bucket": None} == {
        "bucket": None, "blockPublicAcls": True, "blockPublicPolicy": True,
        "ignorePublicAcls": True, "restrictPublicBuckets": True}
    assert inputs["BucketOwnershipControls"]["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
    [rule] = inputs["BucketServerSideEncryptionConfiguration"]["rules"]
    # Under the stack's own key (its policy: tests/components/test_iam_evaluation.py).
    [key] = [r for r in plan.of_type("aws:kms/key:Key") if r.name.endswith("-backups-key")]
    assert rule["applyServerSideEncryptionByDefault"] == {
        "sseAlgorithm": "aws:kms", "kmsMasterKeyId": aws_mocks.resource(key.type, key.name, key.inputs)[1]["arn"]}
    assert key.retain_on_delete and key.inputs["enableKeyRotation"] is True
    assert inputs["BucketVersioning"]["versioningConfiguration"] == {"status": "Enabled"}
    tls, reads = json.loads(inputs["BucketPolicy"]["policy"])["Statement"]
    assert tls["Effect"] == "Deny" and tls["Principal"] == "*"
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert reads["Sid"] == "OnlyTheRestoreRoleReads" and reads["Effect"] == "Deny"
    # Each snapshot locked for backup.lockDays (7), in governance mode, after versioning.
    lock = inputs["BucketObjectLockConfiguration"]
    assert lock["objectLockEnabled"] == "Enabled"
    assert lock["rule"] == {"defaultRetention": {"mode": "GOVERNANCE", "days": 7}}
    [lifecycle] = inputs["BucketLifecycleConfiguration"]["rules"]
    # The current version and 6 older ones: backup.retention's default of 7.
    assert lifecycle["noncurrentVersionExpiration"] == {"noncurrentDays": 1,
                                                        "newerNoncurrentVersions": 6}
    assert lifecycle["status"] == "Enabled"
    for resource in plan.resources:
        if resource.type.startswith("aws:s3/") and "-backups-" in resource.name:
            assert resource.retain_on_delete, resource.name


def backup_buckets(plan) -> list:
    return [r for r in plan.of_type(BUCKET) if r.name.endswith("-backups-bucket")]


@pytest.mark.parametrize("stack", ["prod", "dev", "rke2"])
def test_the_controllers_role_may_only_put_its_own_snapshots(stacks, stack):
    plan = stacks[stack]
    [writer] = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy")
                if r.name.endswith("-backup-writer")]
    [bucket] = backup_buckets(plan)
    cluster = bucket.inputs["bucketPrefix"].split("-backups-")[0]
    statement, encrypt = json.loads(writer.inputs["policy"])["Statement"]
    assert statement["Action"] == ["s3:PutObject"]
    assert encrypt["Action"] == ["kms:GenerateDataKey"]
    assert encrypt["Resource"].startswith("arn:aws:kms:")
    assert statement["Resource"].startswith(f"arn:aws:s3:::{cluster}-backups-")
    assert statement["Resource"].endswith(f"/{cluster}/control-plane/*")
    # On the controller's instance role.
    [role] = [r for r in plan.of_type("aws:iam/role:Role") if r.name.endswith(
        "control-plane-host-role")]
    assert role.name in plan.all_dependencies(writer)
