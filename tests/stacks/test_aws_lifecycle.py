"""What a real AWS account does with the AWS layouts over their life: security group rules
EC2 accepts, an SSH key rotated without replacing the control plane, the same inputs on
every run, instances that reach what they need, pools that roll and clean up after
themselves, and stacks that `pulumi destroy` can remove."""

import copy
import json

import pytest
from pulumi.output import Unknown

from components.common.remote_step import dial_attempts_for
from components.common.step_text import step_inputs
from config import versions
from config.problems import ConfigError
from policy.offline import evaluate_stack, stack_resources_of_plan
from preview import aws_mocks, credentials
from preview.engine import run_program, unwrap_secrets
from preview.stack_file import read_stack
from tests.stacks.steps import boot_steps
from tests.builders import (PROJECT_DIR, TEST_HOST_KEY, cloud_config, example_plan,
                            hybrid_config, preview, shared_preview)

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
INSTANCE = "aws:ec2/instance:Instance"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
GROUP = "aws:autoscaling/group:Group"
EFS = "aws:efs/fileSystem:FileSystem"
GET_AMI = "aws:ec2/getAmi:getAmi"

# aws_instance arguments that force a new instance (ForceNew in the schema of
# terraform-provider-aws internal/service/ec2/ec2_instance.go, which pulumi-aws wraps;
# user_data too when user_data_replace_on_change is set, which the program never sets).
INSTANCE_FORCE_NEW = ("ami", "associatePublicIpAddress", "availabilityZone", "hibernation",
                      "hostId", "ipv6AddressCount", "ipv6Addresses", "keyName",
                      "launchTemplate", "networkInterfaces", "placementGroup",
                      "placementPartitionNumber", "privateDnsNameOptions", "privateIp",
                      "securityGroups", "subnetId", "tenancy")


def ingress_of(plan, group_urn_part: str) -> list[tuple]:
    return [(r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["cidrIpv4"])
            for r in plan.of_type(INGRESS) if group_urn_part in r.name]


def test_admins_on_the_lan_get_each_rule_once():
    """EC2 refuses a second identical rule in a group (InvalidPermission.Duplicate)."""
    values = hybrid_config()
    values["aws"]["adminCidrs"] = [values["network"]["lanCidr"]]
    rules = ingress_of(preview(values), "control-plane-host")
    assert len(rules) == len(set(rules))
    assert ("tcp", 6443, values["network"]["lanCidr"]) in rules
    assert ("tcp", 22, values["network"]["lanCidr"]) in rules


def test_the_configured_api_port_is_the_one_opened():
    values = cloud_config()
    values["kubernetes"] = {"apiPort": 7443}
    plan = preview(values)
    api = [r for r in plan.of_type(INGRESS) if r.inputs["description"] == "kubernetes-api"]
    assert api and {(r.inputs["fromPort"], r.inputs["toPort"]) for r in api} == {(7443, 7443)}
    assert 6443 not in {port for _, port, _ in ingress_of(plan, "control-plane-host")}
    assert plan.outputs["apiEndpoint"][0].endswith(":7443")


@pytest.mark.parametrize("layout_config", [hybrid_config, cloud_config])
def test_a_rotated_ssh_key_forces_no_new_control_plane(layout_config):
    values = layout_config()
    before = preview(values)
    values["sshPrivateKey"] = credentials.ssh_private_key()
    after = preview(values)
    [old], [new] = before.of_type(INSTANCE), after.of_type(INSTANCE)
    # The key pair itself is a new one...
    assert old.inputs["keyName"] != new.inputs["keyName"]
    # ...but nothing that would replace the instance changes for `pulumi up`.
    changed = {field for field in INSTANCE_FORCE_NEW
               if old.inputs.get(field) != new.inputs.get(field)}
    assert changed <= set(new.ignore_changes), changed - set(new.ignore_changes)
    assert {"keyName", "ami", "associatePublicIpAddress"} <= set(new.ignore_changes)


def test_a_dev_stack_can_be_destroyed_and_production_data_cannot():
    dev, prod = example_plan("dev"), example_plan("prod")
    # `pulumi destroy` stops at any protected resource; dev has none.
    assert not [r.name for r in dev.resources if r.protect]
    [dev_efs], [prod_efs] = dev.of_type(EFS), prod.of_type(EFS)
    assert not dev_efs.retain_on_delete
    assert prod_efs.protect and prod_efs.retain_on_delete
    assert prod_efs.inputs["tags"]["gpu-cluster/data-protection"] == "on"
    # Protected unless a stack says otherwise.
    [default] = shared_preview(cloud_config()).of_type(EFS)
    assert default.protect and default.retain_on_delete


def test_the_kubernetes_provider_keeps_its_identity_when_the_kubeconfig_changes():
    first, second = preview(cloud_config()), preview(cloud_config())
    for name in ("test-kubernetes", "test-kubernetes-nodes"):
        a, b = first.named(name), second.named(name)
        # Fresh credentials each time: a different kubeconfig, the same cluster.
        assert unwrap_secrets(a.inputs["kubeconfig"]) != unwrap_secrets(b.inputs["kubeconfig"])
        assert a.inputs["clusterIdentifier"] == b.inputs["clusterIdentifier"] == "test"


def test_instances_have_a_way_out_with_public_egress():
    plan = shared_preview(cloud_config())
    [instance] = plan.of_type(INSTANCE)
    assert instance.inputs["associatePublicIpAddress"] is True
    for template in plan.of_type(TEMPLATE):
        [interface] = template.inputs["networkInterfaces"]
        assert interface["associatePublicIpAddress"] == "true"
        assert "vpcSecurityGroupIds" not in template.inputs  # on the interface instead
    assert not plan.of_type("aws:ec2/natGateway:NatGateway")
    assert evaluate_stack(stack_resources_of_plan(plan)) == []


def test_nat_egress_puts_the_pools_in_private_subnets_behind_a_nat_gateway():
    values = cloud_config()
    values["aws"]["vpc"] = {"egress": "nat"}
    plan = preview(values)
    [nat] = plan.of_type("aws:ec2/natGateway:NatGateway")
    assert [plan.by_urn[u].name for u in nat.property_dependencies["subnetId"]] == [
        "test-network-subnet-0"]
    private = {r.name: r for r in plan.of_type("aws:ec2/subnet:Subnet")
               if "private" in r.name}
    assert {r.inputs["cidrBlock"] for r in private.values()} == {"10.20.2.0/24", "10.20.3.0/24"}
    [group] = plan.of_type(GROUP)
    assert {plan.by_urn[u].name for u in group.property_dependencies["vpcZoneIdentifiers"]} \
        == set(private)
    [template] = plan.of_type(TEMPLATE)
    assert template.inputs["networkInterfaces"][0]["associatePublicIpAddress"] == "false"
    [endpoint] = plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-west-2.ssm"
    assert endpoint.inputs["vpcEndpointType"] == "Interface"
    assert endpoint.inputs["privateDnsEnabled"] is True
    assert evaluate_stack(stack_resources_of_plan(plan)) == []


@pytest.mark.parametrize("vpc, key, message", [
    ({"egress": "public", "privateSubnetCidrs": ["10.20.8.0/24"]}, "aws.vpc.privateSubnetCidrs",
     "is only used with aws.vpc.egress: nat"),
    ({"egress": "nat", "privateSubnetCidrs": ["10.20.0.0/24", "10.20.9.0/24"]},
     "aws.vpc.privateSubnetCidrs[0]", "10.20.0.0/24 overlaps a public subnet"),
    ({"egress": "nat", "cidr": "10.20.0.0/23"}, "aws.vpc.cidr",
     "has no room for 2 private /24 subnets"),
    ({"egress": "nat", "id": "vpc-0123456789abcdef0", "subnetIds": ["subnet-01234567",
     "subnet-89abcdef"], "routeTableIds": ["rtb-01234567"]}, "aws.vpc.privateSubnetIds",
     "at least two private subnets"),
])
def test_nat_egress_settings_are_checked(vpc, key, message):
    values = cloud_config()
    values["aws"]["vpc"] = vpc
    if "id" in vpc:
        values["aws"]["controlPlane"] = {"privateIp": "10.20.0.10"}
        values["storage"] = {"efs": {"mountTargetAddress": "10.20.0.20", "anonymousNfs": True}}
    with pytest.raises(ConfigError) as error:
        preview(values)
    assert f"gpu-cluster:{key}: " in str(error.value) and message in str(error.value)


def test_images_are_pinned_by_exact_name_and_their_ids_are_an_output():
    plan = shared_preview(cloud_config())
    lookups = [args for token, args in plan.invokes if token == GET_AMI]
    assert sorted(a["filters"][0]["values"][0] for a in lookups) == sorted(
        [versions.UBUNTU_IMAGE_NAME, versions.GPU_IMAGE_NAME])
    for args in lookups:
        assert "*" not in args["filters"][0]["values"][0]
        assert not args.get("mostRecent") and args["includeDeprecated"] is True
    images, secret = plan.outputs["images"]
    assert not secret and set(images) == {"controlPlane", "gpu"}


def test_a_pool_rolls_on_a_new_template_and_its_instances_leave_without_a_hook():
    plan = shared_preview(cloud_config())
    [group] = plan.of_type(GROUP)
    assert group.inputs["instanceRefresh"]["strategy"] == "Rolling"
    assert group.inputs["instanceRefresh"]["preferences"]["minHealthyPercentage"] == 90
    # The controller deletes the node of a gone instance (tests/stacks/test_pool_nodes.py):
    # nothing holds a terminating instance for it.
    assert not plan.of_type("aws:autoscaling/lifecycleHook:LifecycleHook")
    [template] = plan.of_type(TEMPLATE)
    steps = [step_inputs(s)["GPU_CLUSTER_STEP"] for s in boot_steps(plan, template)]
    assert steps[-2:] == ["join-worker", "spot-notices"]


def efs_server(plan) -> str:
    [deployment] = [r for r in plan.of_type("kubernetes:apps/v1:Deployment")
                    if r.inputs["metadata"]["name"] == "efs-subdir-provisioner"]
    env = deployment.inputs["spec"]["template"]["spec"]["containers"][0]["env"]
    return next(e["value"] for e in env if e["name"] == "NFS_SERVER")


def test_cloud_nodes_mount_efs_in_their_own_zone_and_onprem_nodes_by_address():
    cloud = shared_preview(cloud_config())
    [file_system] = cloud.of_type(EFS)
    # The CSI driver mounts by the file system's id: efs-utils mounts its DNS name, which
    # resolves to the mount target of the client's zone.
    [storage_class] = [r for r in cloud.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
                       if r.inputs["metadata"]["name"] == "efs"]
    assert storage_class.inputs["parameters"]["fileSystemId"] == aws_mocks.resource(
        file_system.type, file_system.name, file_system.inputs)[0]
    assert efs_server(shared_preview(hybrid_config())) == "10.20.0.20"


def test_ssh_to_the_hybrid_control_plane_verifies_the_host_key_it_installs():
    plan = shared_preview(hybrid_config())
    [instance] = plan.of_type(INSTANCE)
    [part] = boot_steps(plan, instance)
    installed = step_inputs(part)["SSH_HOST_PUBLIC_KEY"]
    assert installed.startswith("ssh-ed25519 ")
    [eip] = plan.of_type("aws:ec2/eip:Eip")
    address = aws_mocks.resource(eip.type, eip.name, eip.inputs)[1]["publicIp"]
    connections = [unwrap_secrets(r.inputs["connection"])
                   for r in plan.of_type("command:remote:Command")]
    to_instance = [c for c in connections if c["host"] == address]
    assert to_instance
    for connection in to_instance:
        assert connection["hostKey"] == installed
        # Enough retries to wait for the boot that installs the key (8 minutes), or for a
        # reboot (tuning.rebootTimeoutSeconds).
        assert connection["dialErrorLimit"] in (dial_attempts_for(480), dial_attempts_for(900))
    # On-prem hosts keep their own settings: their configured key (but wait out a reboot).
    assert all(c["hostKey"] == TEST_HOST_KEY
               and c["dialErrorLimit"] in (10, dial_attempts_for(900))
               for c in connections if c["host"] != address)


def serialised_inputs(plan) -> dict:
    """Each resource's inputs as text; a value unknown until `up` (an output of a resource
    the preview does not make up, such as a role's name) reads the same every time."""
    def unknown(value):
        assert isinstance(value, Unknown), value
        return "<unknown>"
    return {r.urn: json.dumps(unwrap_secrets(r.inputs), sort_keys=True, default=unknown)
            for r in plan.resources}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_two_runs_give_every_resource_the_same_inputs(stack, provider_state):
    # One read: secrets missing offline get placeholders made anew by every read.
    stack_file = read_stack(PROJECT_DIR, stack)
    first = serialised_inputs(run_program(PROJECT_DIR, stack_file))
    second = serialised_inputs(run_program(PROJECT_DIR, stack_file))
    assert first.keys() == second.keys()
    assert [urn for urn in first if first[urn] != second[urn]] == []
    # The launch templates (and so the pools) are among them, byte for byte.
    if stack == "dev":
        assert any(TEMPLATE in urn for urn in first)


def test_unchanged_config_renders_the_same_user_data():
    from components.aws.boot import multipart_gzip_base64

    scripts = ["#!/bin/bash\necho one\n", "#!/bin/bash\necho two\n"]
    assert multipart_gzip_base64(scripts) == multipart_gzip_base64(copy.deepcopy(scripts))
    assert multipart_gzip_base64(scripts) != multipart_gzip_base64(scripts[::-1])
