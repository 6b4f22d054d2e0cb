"""The cloud layout through the offline preview: no SSH to workers, pools as configured,
no secret in user data, IMDSv2 everywhere, IAM limited to reading one parameter."""

import base64
import hashlib
import json

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID
from pulumi.runtime import rpc

from components.aws.boot import boot_scripts as boot_scripts_of
from components.common.step_text import step_inputs
from preview import aws_mocks
from preview.engine import unwrap_secrets as unwrap
from preview.stack_file import read_stack
from components.aws.pool_node_cleanup import TOKEN_PLACEHOLDER
from tests.stacks.steps import boot_step, boot_steps
from tests.builders import PROJECT_DIR, example_plan

TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
GROUP = "aws:autoscaling/group:Group"


def _dev():
    return example_plan("dev")


@pytest.fixture(scope="module")
def dev():
    return _dev()


def of_pool(plan, type_: str, pool: str):
    [resource] = [r for r in plan.of_type(type_) if r.name.startswith(f"dev-{pool}-")]
    return resource


def boot_scripts(template) -> list[str]:
    """The steps the template's user data runs, each rendered whole."""
    return boot_steps(_dev(), template)


def ca_cert(plan) -> str:
    """The cluster CA, as the admin kubeconfig carries it."""
    [cluster] = yaml.safe_load(plan.outputs["kubeconfig"][0])["clusters"]
    return base64.b64decode(cluster["cluster"]["certificate-authority-data"]).decode()


def test_the_program_runs_remote_commands_only_to_upgrade_the_controller(dev):
    # The controller installs itself at boot; over SSH, once its API answers, only the
    # version check and the install step run (again), which a raised kubernetes.version
    # re-runs (tests/stacks/test_upgrade.py), and the SSH keys (ssh.authorizedKeys); the
    # program's step bundle before them (the one fetched at boot may be older).
    assert {c.name for c in dev.of_type("command:remote:Command")} == {
        "control-plane-check-version", "control-plane-install-controller",
        "control-plane-authorized-keys", "control-plane-install-bundle",
        "control-plane-watch-pools"}
    # A wait, where `pulumi up` runs, for the API the controller installs at boot.
    assert {c.name for c in dev.of_type("command:local:Command")} == {
        "control-plane-wait-for-api", "dev-nodes-ready"}
    # The API is used once the controller is up and at the wanted version; the add-ons
    # once the pools' nodes are too.
    assert "control-plane-install-controller" in {
        dev.by_urn[d].name for d in dev.named("dev-kubernetes-nodes").dependencies}
    assert "dev-nodes-ready" in {
        dev.by_urn[d].name for d in dev.named("dev-kubernetes").dependencies}
    assert "control-plane-wait-for-api" in {
        dev.by_urn[d].name for d in dev.named("control-plane-install-controller").dependencies}
    assert not dev.of_type("kubernetes:core/v1:NodePatch")


def test_the_controller_installs_itself_at_boot_with_the_programs_ca(dev):
    [instance] = dev.of_type("aws:ec2/instance:Instance")
    scripts = boot_steps(dev, instance)
    assert [step_inputs(s)["GPU_CLUSTER_STEP"] for s in scripts] == [
        "install-ssh-host-key", "prepare-host", "reboot-if-needed", "verify-boot",
        "install-controller", "install-backup"]
    install = step_inputs(scripts[-2])
    assert install["K0S_CA_KEY"] == ""
    assert install["K0S_CA_KEY_SSM_PARAMETER"] == "/gpu-cluster/dev/control-plane/ca-key"
    assert install["K0S_CA_CERT"] == ca_cert(dev)
    [eip] = dev.of_type("aws:ec2/eip:Eip")
    public_ip = aws_mocks.resource(eip.type, eip.name, eip.inputs)[1]["publicIp"]
    assert public_ip in yaml.safe_load(install["K0S_CONFIG"])["spec"]["api"]["sans"]
    text = "\n".join(scripts)
    assert not any(secret in text for secret in dev.secrets)
    assert instance.inputs["iamInstanceProfile"]


def test_the_admin_kubeconfig_is_signed_by_the_cluster_ca(dev):
    kubeconfig, secret = dev.outputs["kubeconfig"]
    assert secret
    document = yaml.safe_load(kubeconfig)
    [cluster] = document["clusters"]
    assert cluster["cluster"]["server"].startswith("https://203.0.113.")
    ca = x509.load_pem_x509_certificate(
        base64.b64decode(cluster["cluster"]["certificate-authority-data"]))
    [user] = document["users"]
    client = x509.load_pem_x509_certificate(
        base64.b64decode(user["user"]["client-certificate-data"]))
    client.verify_directly_issued_by(ca)
    assert client.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value \
        == "system:masters"


def test_pool_join_tokens_are_the_controllers_and_registered_by_no_one_else(dev):
    """No bootstrap token Secret of the program's (they never expired); each pool's
    parameter holds a placeholder until the controller's first rotation, and the program
    never writes its value again."""
    assert not [r for r in dev.of_type("kubernetes:core/v1:Secret")
                if r.inputs["type"] == "bootstrap.kubernetes.io/token"]
    tokens = [p for p in dev.of_type("aws:ssm/parameter:Parameter")
              if p.inputs["name"].endswith("/join-token")]
    assert len(tokens) == 3
    for parameter in tokens:
        assert unwrap(parameter.inputs["value"]) == TOKEN_PLACEHOLDER
        assert parameter.ignore_changes == ["value"]


@pytest.mark.parametrize("pool, instance_type, sizes, zones", [
    ("a10g", "g5.12xlarge", (2, 2, 2), 2), ("h100", "p5.48xlarge", (0, 2, 0), 1),
    ("cpu", "m6i.2xlarge", (1, 1, 1), 2)])
def test_pools_are_as_configured(dev, pool, instance_type, sizes, zones):
    group = of_pool(dev, GROUP, pool)
    # min, max, and count as the desired capacity at creation only: afterwards it is
    # cluster-autoscaler's (a fixed pool follows count through min and max).
    assert (group.inputs["minSize"], group.inputs["maxSize"], group.inputs["desiredCapacity"]) \
        == sizes
    assert group.ignore_changes == ["desiredCapacity"]
    assert len(group.inputs["vpcZoneIdentifiers"]) == zones
    assert ("placementGroup" in group.inputs) == (pool == "h100")
    assert of_pool(dev, TEMPLATE, pool).inputs["instanceType"] == instance_type


def test_instances_require_imdsv2_and_encrypt_their_disks(dev):
    [instance] = dev.of_type("aws:ec2/instance:Instance")
    assert instance.inputs["metadataOptions"]["httpTokens"] == "required"
    for template in dev.of_type(TEMPLATE):
        assert template.inputs["metadataOptions"]["httpTokens"] == "required"
        [disk] = template.inputs["blockDeviceMappings"]
        assert disk["ebs"]["encrypted"] == "true"


def test_user_data_boots_the_node_without_any_secret(dev):
    for template in dev.of_type(TEMPLATE):
        raw = base64.b64decode(template.inputs["userData"])
        # Only the bootstrap: the steps and their inputs are in the boot plan.
        assert len(raw) <= 4096, "the boot user data should stay within 4 KiB"
        [bootstrap] = boot_scripts_of(template.inputs["userData"])
        assert "export AWS_REGION='us-west-2'" in bootstrap
        scripts = boot_scripts(template)
        text = "\n".join([bootstrap, *scripts])
        assert not any(secret in text for secret in dev.secrets), template.name
        join = scripts[-2]
        assert "export K0S_JOIN_TOKEN=''" in join
        pool = template.name.split("-")[1]
        assert f"export K0S_JOIN_TOKEN_SSM_PARAMETER='/gpu-cluster/dev/{pool}/join-token'" in join
        steps = [s.split("export GPU_CLUSTER_STEP='")[1].split("'")[0] for s in scripts]
        expected = ["prepare-host", "install-nvidia"] if pool != "cpu" else ["prepare-host"]
        # Nothing on the instance removes its node: the controller does. After the join,
        # the Spot notices service, with the kubelet's own kubectl and no credential.
        assert steps == expected + ["reboot-if-needed", "verify-boot", "join-worker",
                                    "spot-notices"]
        spot = step_inputs(scripts[-1])
        assert spot["NODE_KUBECTL"] == \
            "/usr/local/bin/k0s kubectl --kubeconfig /var/lib/k0s/kubelet.conf"
        assert set(spot) == {"GPU_CLUSTER_HOST", "GPU_CLUSTER_STEP", "NODE_KUBECTL",
                             "SPOT_NOTICE_HANDLER"}


def test_gpu_pools_register_with_their_gpu_labels_and_taints(dev):
    join = boot_step(dev, of_pool(dev, TEMPLATE, "a10g"), "join-worker")
    assert join["NODE_LABELS"] == "gpu-cluster/pool=a10g,gpu-cluster/capacity=on-demand," \
        "nvidia.com/gpu.present=true,nvidia.com/gpu.product=NVIDIA-A10G," \
        "k8s.amazonaws.com/accelerator=nvidia-a10g"
    assert join["NODE_TAINTS"] == "nvidia.com/gpu=present:NoSchedule"
    assert join["NODE_IP"] == ""
    nvidia = boot_scripts(of_pool(dev, TEMPLATE, "a10g"))[1]
    assert step_inputs(nvidia)["GPU_CLUSTER_STEP"] == "install-nvidia"
    assert "export INSTALL_DRIVER='false'" in nvidia  # the GPU image ships the driver


def test_nvswitch_pools_check_the_images_fabric_manager_at_boot(dev):
    """p5 (H100 HGX) instances have NVSwitches on the PCI bus: the boot step finds them
    (NVSWITCH auto) and, with the image's driver, fails the boot unless the image's Fabric
    Manager is there and running; with installDriver it installs one of the driver's
    version (tests/scripts/install-nvidia.bats runs both)."""
    nvidia = boot_scripts(of_pool(dev, TEMPLATE, "h100"))[1]
    inputs = step_inputs(nvidia)
    assert inputs["GPU_CLUSTER_STEP"] == "install-nvidia"
    assert inputs["NVSWITCH"] == "auto"
    assert inputs["INSTALL_DRIVER"] == "false"
    assert "image_fabric_manager\n" in nvidia and "install_fabric_manager\n" in nvidia


def test_secrets_are_secure_strings_each_read_by_the_roles_that_need_it(dev):
    parameters = {p.inputs["name"]: p for p in dev.of_type("aws:ssm/parameter:Parameter")}
    tokens = {f"/gpu-cluster/dev/{p}/join-token" for p in ("a10g", "h100", "cpu")}
    controller = {"/gpu-cluster/dev/control-plane/ca-key",
                  "/gpu-cluster/dev/control-plane/ssh-host-key"}
    assert set(parameters) == tokens | controller
    for parameter in parameters.values():
        assert parameter.inputs["type"] == "SecureString"
        # The pools' tokens are the controller's (components/aws/pool_node_cleanup.py).
        assert rpc.is_rpc_secret(parameter.inputs["value"]) or parameter.inputs["name"] in tokens

    def arn(name: str) -> str:
        parameter = parameters[name]
        return aws_mocks.resource(parameter.type, parameter.name, parameter.inputs)[1]["arn"]

    # The controller's role may also put its backups, and the restore role read them
    # (tests/stacks/test_backups.py, tests/components/test_iam_evaluation.py); and, apart,
    # rotate the pools' tokens (tests/stacks/test_pool_nodes.py), run the cloud controller
    # manager and cluster-autoscaler (tests/stacks/test_cloud_controller.py,
    # tests/upstream/test_autoscaler_iam.py); the pools make EFS access points
    # (tests/components/test_iam_evaluation.py).
    policies = [p for p in dev.of_type("aws:iam/rolePolicy:RolePolicy")
                if p.name not in ("dev-backup-writer", "dev-backups-restore-read",
                                  "dev-node-cleanup-controller", "dev-cluster-autoscaler",
                                  "dev-cloud-controller-controller")
                and not p.name.startswith("dev-efs-csi-controller-")]
    assert len(policies) == 4
    reads = {"a10g": {"/gpu-cluster/dev/a10g/join-token"},
             "h100": {"/gpu-cluster/dev/h100/join-token"},
             "cpu": {"/gpu-cluster/dev/cpu/join-token"},
             "control": controller}
    [bucket] = [b for b in dev.of_type("aws:s3/bucket:Bucket") if b.name == "dev-boot-bucket"]
    bucket_name = aws_mocks.resource(bucket.type, bucket.name, bucket.inputs)[1]["bucket"]
    [bundle] = [o.inputs["key"] for o in dev.of_type("aws:s3/bucketObjectv2:BucketObjectv2")
                if o.inputs["key"].startswith("bundles/")]
    for policy in policies:
        who = policy.name.removeprefix("dev-").split("-")[0]
        machine = "control-plane" if who == "control" else who
        [plan] = [o.inputs["key"] for o in dev.of_type("aws:s3/bucketObjectv2:BucketObjectv2")
                  if o.inputs["key"].startswith(f"plans/{machine}/")]
        document = json.loads(policy.inputs["policy"])
        assert document["Statement"] == [
            {"Sid": "ReadItsParameters", "Effect": "Allow", "Action": ["ssm:GetParameter"],
             "Resource": sorted(arn(name) for name in reads[who])},
            {"Sid": "ReportItsBoot", "Effect": "Allow",
             "Action": ["ssm:PutParameter", "ssm:DeleteParameter"],
             "Resource": "arn:aws:ssm:preview-region-1:000000000000:parameter"
                         f"/gpu-cluster/dev/boot-status/{machine}/*"},
            # Its boot's bundle and plan, nothing else of the bucket.
            {"Sid": "FetchItsBoot", "Effect": "Allow", "Action": ["s3:GetObject"],
             "Resource": sorted(f"arn:aws:s3:::{bucket_name}/{key}" for key in (bundle, plan))},
        ]
    assert not dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")


def test_efs_is_mounted_once_per_subnet_and_open_only_to_the_nodes(dev):
    assert len(dev.of_type("aws:efs/mountTarget:MountTarget")) == 2
    [file_system] = dev.of_type("aws:efs/fileSystem:FileSystem")
    assert file_system.inputs["encrypted"] is True
    nfs_rules = {r.name: r.inputs for r in
                 dev.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
                 if r.name.startswith("dev-efs-nfs")}
    # The pools' instances by their security group: not the VPC, nor the controller, which
    # runs no kubelet and mounts nothing.
    [group] = [g for g in dev.of_type("aws:ec2/securityGroup:SecurityGroup")
               if g.name == "dev-network-nodes"]
    assert nfs_rules["dev-efs-nfs-pool-nodes"]["referencedSecurityGroupId"] == (
        aws_mocks.resource(group.type, group.name, group.inputs)[0])
    assert len(nfs_rules) == 1 and all(r["fromPort"] == r["toPort"] == 2049
                                       for r in nfs_rules.values())


def test_nodes_accept_traffic_only_from_each_other_and_the_controller_s_node_ports(dev):
    """All from each other; from the controller (a node too) its kubelet's and its CNI's
    ports, from its own address, not the VPC's (components/aws/network.py)."""
    rules = [r for r in dev.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
             if r.name.startswith("dev-network-nodes")]
    [among] = [r for r in rules if "referencedSecurityGroupId" in r.inputs]
    assert "cidrIpv4" not in among.inputs
    from_controller = {(r.inputs["description"], r.inputs["ipProtocol"], r.inputs.get("fromPort"),
                        r.inputs["cidrIpv4"]) for r in rules if r is not among}
    assert from_controller == {
        ("kubelet from the controllers", "tcp", 10250, "10.30.0.10/32"),
        ("calico-vxlan from the controllers", "udp", 4789, "10.30.0.10/32")}


def test_the_device_plugin_tolerates_the_gpu_pools_taints():
    from tests.builders import cloud_config, preview

    values = cloud_config()
    values["pools"][0]["taints"] = [{"key": "team", "value": "vision", "effect": "NoExecute"}]
    plan = preview(values)
    [daemon_set] = [r for r in plan.of_type("kubernetes:apps/v1:DaemonSet")
                    if r.inputs["metadata"]["name"] == "nvidia-device-plugin"]
    tolerations = daemon_set.inputs["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "team", "operator": "Exists", "effect": "NoExecute"} in tolerations


def test_acceptance_checks_target_the_pools():
    import acceptance
    from config import load

    stack = read_stack(PROJECT_DIR, "dev")
    settings = load(stack.config, stack.secret_keys, "dev")
    files = acceptance.render(settings)
    smoke = [o for o in files["gpu-smoke.yaml"] if o["kind"] == "Job"]
    # h100 has no instances; cpu has no GPUs.
    assert [job["spec"]["template"]["spec"]["nodeSelector"] for job in smoke] == [
        {"gpu-cluster/pool": "a10g"}]
    [rwx] = [o for o in files["rwx-check.yaml"] if o["kind"] == "Job"]
    assert rwx["metadata"]["annotations"]["gpu-cluster/rwx-check-mode"] == "cross-node"
    assert "mpijob-benchmark.yaml" not in files


def test_a_pool_with_many_labels_and_taints_keeps_its_user_data_small():
    """Labels and taints go to the boot plan in S3, where size does not matter: the user
    data stays the bootstrap whatever a pool holds (EC2 refuses more than 16 KiB)."""
    from tests.builders import cloud_config, preview

    values = cloud_config()
    # Random-looking values, so gzip cannot shrink them away.
    values["pools"][0]["labels"] = {
        f"team.example.com/l{i:03d}": hashlib.sha256(str(i).encode()).hexdigest()[:60]
        for i in range(600)}
    values["pools"][0]["taints"] = [{"key": f"team.example.com/t{i}", "value": "yes",
                                     "effect": "NoSchedule"} for i in range(10)]
    plan = preview(values)
    [template] = [t for t in plan.of_type(TEMPLATE)
                  if t.name.endswith(f"-{values['pools'][0]['name']}-template")]
    assert len(base64.b64decode(template.inputs["userData"])) <= 4096
    join = boot_step(plan, template, "join-worker")
    assert "team.example.com/l599=" in join["NODE_LABELS"]
    assert "team.example.com/t9=yes:NoSchedule" in join["NODE_TAINTS"]


def test_the_boot_bucket_is_private_encrypted_and_tls_only(dev):
    """The bucket the boots fetch from has the settings of every bucket of the program
    (components/aws/buckets.py); it is gone with the stack, as what it holds is rendered
    again by any `pulumi up`."""
    inputs = {r.type.split(":")[-1]: r for r in dev.resources
              if r.type.startswith("aws:s3/") and r.name.startswith("dev-boot-")}
    assert inputs["BucketPublicAccessBlock"].inputs["restrictPublicBuckets"] is True
    assert inputs["BucketOwnershipControls"].inputs["rule"] == {
        "objectOwnership": "BucketOwnerEnforced"}
    [rule] = inputs["BucketServerSideEncryptionConfiguration"].inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "aws:kms"}
    [statement] = json.loads(inputs["BucketPolicy"].inputs["policy"])["Statement"]
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert not any(r.retain_on_delete for r in inputs.values())
    # The bundle is uploaded from its tarball: the state keeps its path and hash.
    [bundle] = [r for r in dev.of_type("aws:s3/bucketObjectv2:BucketObjectv2")
                if r.name == "dev-boot-bundle"]
    assert set(bundle.inputs["source"]) == {"path", "hash"}
