"""The policy pack as the Pulumi CLI runs it: policy/__main__.py started in its folder
serves the analyzer protocol on a loopback port; the CLI asks it for its policies and
sends it each resource. Here the test plays the CLI's part."""

import json
import subprocess
import sys

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from policy import offline
from policy.rules import RULES
from policy.stack_rules import STACK_RULES
from tests.builders import PROJECT_DIR

MANDATORY = analyzer_pb2.EnforcementLevel.Value("MANDATORY")


@pytest.fixture(scope="module")
def analyzer():
    pack = PROJECT_DIR / "policy"
    # As the CLI starts a Python pack: `python -u -m pulumi.policy ENGINE PACK_DIR` in the
    # pack's folder (pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go:1615 and
    # 1639), which runs policy/__main__.py with runpy.run_path
    # (sdk/python/lib/pulumi/policy/__main__.py:61); so the rules reach contract/ as there.
    # No engine listens at the address: the pack asks it nothing before serving.
    process = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1",
                                str(pack)], cwd=pack,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = process.stdout.readline().strip()
        assert port.isdigit(), process.stderr.read() if process.poll() is not None else port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _struct(value) -> struct_pb2.Struct:
    """Inputs as the engine sends them: secrets wrapped, unknowns as the sentinel."""
    def plain(item):
        item = rpc.unwrap_rpc_secret(item)
        if isinstance(item, dict):
            return {k: plain(v) for k, v in item.items()}
        if isinstance(item, list):
            return [plain(v) for v in item]
        if item is None or isinstance(item, (str, bool, int, float)):
            return item
        return rpc.UNKNOWN
    struct = struct_pb2.Struct()
    struct.update(json.loads(json.dumps(plain(value))))
    return struct


def analyze(stub, type_, name, props, protect=False):
    request = analyzer_pb2.AnalyzeRequest(
        type=type_, name=name, urn=f"urn:pulumi:test::gpu-cluster::{type_}::{name}",
        properties=_struct(props), options=analyzer_pb2.AnalyzerResourceOptions(protect=protect))
    return list(stub.Analyze(request).diagnostics)


def test_the_pack_offers_every_rule_as_mandatory(analyzer):
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "gpu-cluster"
    assert {p.name for p in info.policies} == \
        {rule.name for rule in RULES} | {rule.name for rule in STACK_RULES}
    assert {p.enforcementLevel for p in info.policies} == {MANDATORY}


def test_a_failing_and_a_passing_resource(analyzer):
    ingress = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
    props = {"ipProtocol": "tcp", "fromPort": 22, "toPort": 22, "cidrIpv4": "0.0.0.0/0"}
    [diagnostic] = analyze(analyzer, ingress, "ssh", props)
    assert diagnostic.policyName == "no-admin-ports-to-the-world"
    assert diagnostic.enforcementLevel == MANDATORY
    assert "SSH (port 22) is open to 0.0.0.0/0" in diagnostic.message
    assert analyze(analyzer, ingress, "ssh", {**props, "cidrIpv4": "198.51.100.0/24"}) == []


def test_protect_comes_from_the_resource_options(analyzer):
    efs = "aws:efs/fileSystem:FileSystem"
    [diagnostic] = analyze(analyzer, efs, "shared", {"encrypted": True}, protect=False)
    assert diagnostic.policyName == "efs-protected"
    assert analyze(analyzer, efs, "shared", {"encrypted": True}, protect=True) == []


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_an_example_stack_through_the_pack(analyzer, stack):
    plan = offline.preview_plan(stack)
    found = [d for r in plan.resources
             for d in analyze(analyzer, r.type, r.name, r.inputs, protect=r.protect)]
    assert [(d.policyName, d.message) for d in found if d.enforcementLevel == MANDATORY] == []
    # Only values unknown until deployment may keep a rule from running during preview.
    assert all("during preview" in d.message for d in found), [d.message for d in found]


def analyze_stack(stub, plan, change=lambda record: record.inputs):
    """The whole plan, as the engine sends it to a stack policy (property dependencies
    included); `change` may alter a resource's inputs."""
    resources = [analyzer_pb2.AnalyzerResource(
        type=r.type, name=r.name, urn=r.urn, properties=_struct(change(r)),
        propertyDependencies={key: analyzer_pb2.AnalyzerPropertyDependencies(urns=urns)
                              for key, urns in r.property_dependencies.items()})
        for r in plan.resources]
    request = analyzer_pb2.AnalyzeStackRequest(resources=resources)
    return list(stub.AnalyzeStack(request).diagnostics)


def test_the_pack_finds_pools_that_cannot_reach_the_internet(analyzer):
    plan = offline.preview_plan("dev")
    assert analyze_stack(analyzer, plan) == []

    def without_public_address(record):
        if record.type != "aws:ec2/launchTemplate:LaunchTemplate":
            return record.inputs
        [interface] = record.inputs["networkInterfaces"]
        return {**record.inputs,
                "networkInterfaces": [{**interface, "associatePublicIpAddress": "false"}]}

    found = analyze_stack(analyzer, plan, without_public_address)
    # Three pools in two public subnets each, but h100's placement group keeps it to one.
    assert len(found) == 5
    assert {d.policyName for d in found} == {"instances-reach-the-internet"}
    assert {d.enforcementLevel for d in found} == {MANDATORY}
    assert all("has no public address" in d.message for d in found)
    assert {d.urn.rsplit("::", 1)[1] for d in found} == {
        "dev-a10g-asg", "dev-h100-asg", "dev-cpu-asg"}
