"""The cloud layout through the offline preview: no SSH to workers, pools as configured,
no secret in user data, IMDSv2 everywhere, IAM limited to reading one parameter."""

import base64
import email
import gzip
import json

import pytest
from pulumi.runtime import rpc

from preview import aws_mocks
from preview.engine import run_program
from preview.stack_file import read_stack
from tests.conftest import PROJECT_DIR

TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
GROUP = "aws:autoscaling/group:Group"


@pytest.fixture(scope="module")
def dev():
    return run_program(PROJECT_DIR, read_stack(PROJECT_DIR, "dev"))


def of_pool(plan, type_: str, pool: str):
    [resource] = [r for r in plan.of_type(type_) if r.name.startswith(f"dev-{pool}-")]
    return resource


def boot_scripts(template) -> list[str]:
    raw = gzip.decompress(base64.b64decode(template.inputs["userData"]))
    message = email.message_from_bytes(raw)
    return [part.get_payload(decode=True).decode() for part in message.get_payload()]


def test_the_program_reaches_no_worker_over_ssh(dev):
    for command in dev.of_type("command:remote:Command"):
        connection = dev.redact(command.inputs["connection"])
        assert connection["host"].startswith("203.0.113."), command.name  # the controller
    steps = {c.name for c in dev.of_type("command:remote:Command")}
    assert {s for s in steps if not s.startswith("control-plane-")} == {
        "a10g-create-join-token", "h100-create-join-token", "cpu-create-join-token"}
    assert not dev.of_type("kubernetes:core/v1:NodePatch")


@pytest.mark.parametrize("pool, instance_type, count, zones", [
    ("a10g", "g5.12xlarge", 2, 2), ("h100", "p5.48xlarge", 0, 1), ("cpu", "m6i.2xlarge", 1, 2)])
def test_pools_are_as_configured(dev, pool, instance_type, count, zones):
    group = of_pool(dev, GROUP, pool)
    assert (group.inputs["minSize"], group.inputs["maxSize"], group.inputs["desiredCapacity"]) \
        == (count, count, count)
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
        assert len(raw) < 16384, "EC2 user data is limited to 16 KiB"
        scripts = boot_scripts(template)
        text = "\n".join(scripts)
        assert not any(secret in text for secret in dev.secrets), template.name
        join = scripts[-1]
        assert "export K0S_JOIN_TOKEN=''" in join
        pool = template.name.split("-")[1]
        assert f"export K0S_JOIN_TOKEN_SSM_PARAMETER='/gpu-cluster/dev/{pool}/join-token'" in join
        assert "export AWS_REGION='us-west-2'" in join
        steps = [s.split("export GPU_CLUSTER_STEP='")[1].split("'")[0] for s in scripts]
        expected = ["prepare-host", "install-nvidia", "join-worker"] if pool != "cpu" \
            else ["prepare-host", "join-worker"]
        assert steps == expected


def test_gpu_pools_register_with_their_gpu_labels_and_taints(dev):
    join = boot_scripts(of_pool(dev, TEMPLATE, "a10g"))[-1]
    assert "export NODE_LABELS='nvidia.com/gpu.present=true,nvidia.com/gpu.product=NVIDIA-A10G'" \
        in join
    assert "export NODE_TAINTS='nvidia.com/gpu=present:NoSchedule'" in join
    assert "export NODE_IP=''" in join
    nvidia = boot_scripts(of_pool(dev, TEMPLATE, "a10g"))[1]
    assert "export INSTALL_DRIVER='false'" in nvidia  # the GPU image ships the driver


def test_join_tokens_are_secure_strings_only_the_pool_role_reads(dev):
    parameters = {p.inputs["name"]: p for p in dev.of_type("aws:ssm/parameter:Parameter")}
    assert set(parameters) == {f"/gpu-cluster/dev/{p}/join-token" for p in ("a10g", "h100", "cpu")}
    for parameter in parameters.values():
        assert parameter.inputs["type"] == "SecureString"
        assert rpc.is_rpc_secret(parameter.inputs["value"])
    policies = dev.of_type("aws:iam/rolePolicy:RolePolicy")
    assert len(policies) == 3
    for policy in policies:
        pool = policy.name.removeprefix("dev-").split("-")[0]
        parameter = parameters[f"/gpu-cluster/dev/{pool}/join-token"]
        arn = aws_mocks.resource(parameter.type, parameter.name, {})[1]["arn"]
        document = json.loads(policy.inputs["policy"])
        assert document["Statement"] == [
            {"Effect": "Allow", "Action": ["ssm:GetParameter"], "Resource": arn}]
    assert not dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")


def test_efs_is_mounted_once_per_subnet_and_open_only_to_the_vpc(dev):
    assert len(dev.of_type("aws:efs/mountTarget:MountTarget")) == 2
    [file_system] = dev.of_type("aws:efs/fileSystem:FileSystem")
    assert file_system.inputs["encrypted"] is True and file_system.protect
    nfs_rules = [r for r in dev.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
                 if r.inputs["description"] == "nfs"]
    assert [r.inputs["cidrIpv4"] for r in nfs_rules] == ["10.30.0.0/16"]


def test_nodes_accept_traffic_only_from_each_other(dev):
    rules = [r for r in dev.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
             if r.name.startswith("dev-network-nodes")]
    assert len(rules) == 1 and "referencedSecurityGroupId" in rules[0].inputs
    assert "cidrIpv4" not in rules[0].inputs


def test_the_device_plugin_tolerates_the_gpu_pools_taints():
    from tests.conftest import cloud_config, preview

    values = cloud_config()
    values["pools"][0]["taints"] = [{"key": "team", "value": "vision", "effect": "NoExecute"}]
    plan = preview(values)
    [daemon_set] = [r for r in plan.of_type("kubernetes:apps/v1:DaemonSet")
                    if r.inputs["metadata"]["name"] == "nvidia-device-plugin"]
    tolerations = daemon_set.inputs["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "team", "operator": "Exists", "effect": "NoExecute"} in tolerations
