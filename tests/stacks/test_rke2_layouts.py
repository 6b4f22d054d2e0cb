"""kubernetes.distribution: rke2 on each layout, through the offline preview: every step
runs RKE2's script with RKE2's inputs and none of k0s's, nodes join with the one agent
token (no per-node token step, no bootstrap token Secret), the server gets the kubelet
settings step too, and the security groups open what RKE2 needs."""

import base64
import hashlib

import pytest
import yaml

from components.aws.boot import USER_DATA_LIMIT_BYTES
from components.aws.pool_node_cleanup import TOKEN_PLACEHOLDER
from components.distributions.rke2 import SUPERVISOR_PORT
from components.common.step_text import step_inputs
from preview.engine import unwrap_secrets as unwrap
from tests.stacks.steps import boot_steps
from tests.builders import bare_metal_config, cloud_config, hybrid_config, preview

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
# The scripts each step runs (the envelope names them: step_text.envelope).
RKE2_SCRIPTS = {"install-controller": "rke2/install-server.sh", "join-worker": "rke2/join-agent.sh",
                "admit-node": "node/admit-node.sh",
                "apply-worker-profile": "rke2/apply-agent-args.sh"}


def rke2(values: dict) -> dict:
    values.setdefault("kubernetes", {})["distribution"] = "rke2"
    return values


@pytest.fixture(scope="module")
def bare_metal():
    return preview(rke2(bare_metal_config()))


@pytest.fixture(scope="module")
def hybrid():
    return preview(rke2(hybrid_config()))


@pytest.fixture(scope="module")
def cloud():
    return preview(rke2(cloud_config()))


def steps(plan) -> dict[str, str]:
    """Each step's stdin, by resource name."""
    return {r.name: unwrap(r.inputs["stdin"]) for r in plan.of_type("command:remote:Command")}


def ca_cert(plan) -> str:
    [cluster] = yaml.safe_load(plan.outputs["kubeconfig"][0])["clusters"]
    return base64.b64decode(cluster["cluster"]["certificate-authority-data"]).decode()


def ingress(plan, group: str) -> set[tuple]:
    """(description, protocol, port, source) of one security group's inbound rules."""
    return {(r.inputs["description"], r.inputs["ipProtocol"], int(r.inputs["fromPort"]),
             r.inputs["cidrIpv4"])
            for r in plan.of_type(INGRESS) if r.name.startswith(group) and "fromPort" in r.inputs}


def vpc_cidr(plan) -> str:
    [vpc] = plan.of_type("aws:ec2/vpc:Vpc")
    return vpc.inputs["cidrBlock"]


@pytest.mark.parametrize("layout", ["bare_metal", "hybrid"])
def test_every_step_over_ssh_is_rke2s(layout, request):
    plan = request.getfixturevalue(layout)
    rendered = steps(plan)
    assert not any("K0S_" in text or "k0s/" in text for text in rendered.values())
    for name, text in rendered.items():
        step = step_inputs(text)["GPU_CLUSTER_STEP"]
        if step in RKE2_SCRIPTS:
            assert f"({RKE2_SCRIPTS[step]}" in text.splitlines()[0], name
        if step == "admit-node":
            # The shared admit and remove scripts run RKE2's kubectl with its admin credential.
            assert step_inputs(text)["KUBECTL"] == (
                "/var/lib/rancher/rke2/bin/kubectl --kubeconfig /etc/rancher/rke2/rke2.yaml"), name
    assert not [name for name in rendered if name.endswith("-create-join-token")]


def test_workers_join_with_the_agent_token_pinning_the_ca(bare_metal):
    rendered = steps(bare_metal)
    served = ca_cert(bare_metal).rstrip("\n") + "\n"
    digest = hashlib.sha256(served.encode()).hexdigest()
    [install] = [t for n, t in rendered.items() if n == "controller-install-controller"]
    secret = step_inputs(install)["RKE2_AGENT_TOKEN"]
    assert len(secret) == 64 and step_inputs(install)["RKE2_TOKEN"] not in ("", secret)
    for worker in ("gpu000", "gpu001", "gpu002"):
        join = step_inputs(rendered[f"{worker}-join-worker"])
        assert join["RKE2_AGENT_TOKEN"] == f"K10{digest}::node:{secret}"
        assert yaml.safe_load(join["RKE2_CONFIG"])["server"] == \
            f"https://192.168.2.1:{SUPERVISOR_PORT}"
        # The token needs no step on the server, but the server must be up.
        assert "controller-install-controller" in bare_metal.all_dependencies(
            bare_metal.named(f"{worker}-join-worker"))


def test_the_server_gets_the_kubelet_settings_step_and_the_workers_theirs(bare_metal):
    rendered = steps(bare_metal)
    server = step_inputs(rendered["controller-apply-worker-profile"])
    assert server["RKE2_SERVICE"] == "rke2-server" and server["NODE_NAME"] == "controller"
    worker = step_inputs(rendered["gpu000-apply-worker-profile"])
    assert worker["RKE2_SERVICE"] == "rke2-agent"
    # Nothing uses the API while the server may restart with new settings.
    assert "controller-apply-worker-profile" in {
        bare_metal.by_urn[d].name
        for d in bare_metal.named("test-kubernetes-nodes").dependencies}
    for provider in bare_metal.of_type("pulumi:providers:kubernetes"):
        assert "controller-apply-worker-profile" in bare_metal.all_dependencies(provider)


def test_gpu_hosts_get_no_containerd_dropin(bare_metal):
    install = step_inputs(steps(bare_metal)["gpu000-install-nvidia"])
    assert install["CONTAINERD_DROPIN_CONTENT"] == ""


def test_hybrid_control_plane_opens_rke2s_ports_to_the_nodes_only(hybrid):
    rules = ingress(hybrid, "test-control-plane-host-")
    # The on-prem nodes' own addresses (hybrid_config: gpu000 and gpu001), not the LAN, the
    # VPN range or the VPC (config/cloud.py node_cidrs).
    nodes = {"192.168.2.2/32", "192.168.2.3/32"}
    for name, protocol, port in (("rke2-supervisor", "tcp", 9345), ("kubelet", "tcp", 10250),
                                 ("canal-vxlan", "udp", 8472), ("canal-health", "tcp", 9099)):
        assert {cidr for rule, proto, p, cidr in rules
                if (rule, proto, p) == (name, protocol, port)} == nodes, name
    assert not any(name in ("k0s-join-api", "konnectivity") for name, *_ in rules)


def test_cloud_pools_join_with_the_agent_token_from_ssm(cloud):
    assert not [r for r in cloud.of_type("kubernetes:core/v1:Secret")
                if r.inputs.get("type") == "bootstrap.kubernetes.io/token"]
    [template] = cloud.of_type(TEMPLATE)
    raw = base64.b64decode(template.inputs["userData"])
    assert len(raw) <= USER_DATA_LIMIT_BYTES
    scripts = boot_steps(cloud, template)
    assert not any(secret in "\n".join(scripts) for secret in cloud.secrets)
    join = step_inputs(scripts[-2])
    assert join["GPU_CLUSTER_STEP"] == "join-worker"
    # The Spot notices service uses the agent's kubelet kubeconfig.
    assert step_inputs(scripts[-1])["NODE_KUBECTL"] == ("/var/lib/rancher/rke2/bin/kubectl "
                                                        "--kubeconfig /var/lib/rancher/rke2/agent/kubelet.kubeconfig")
    assert join["RKE2_AGENT_TOKEN"] == ""
    assert join["RKE2_AGENT_TOKEN_SSM_PARAMETER"] == "/gpu-cluster/test/gpu/join-token"
    assert "node-ip" not in yaml.safe_load(join["RKE2_CONFIG"])
    [parameter] = [p for p in cloud.of_type("aws:ssm/parameter:Parameter")
                   if p.inputs["name"] == "/gpu-cluster/test/gpu/join-token"]
    # The controller stores an expiring bootstrap token there (`rke2 token create`,
    # tests/stacks/test_pool_nodes.py) before the group starts an instance.
    assert unwrap(parameter.inputs["value"]) == TOKEN_PLACEHOLDER
    [group] = cloud.of_type("aws:autoscaling/group:Group")
    assert "control-plane-watch-pools" in cloud.all_dependencies(group)


def test_cloud_controller_reads_its_secrets_from_ssm(cloud):
    [instance] = cloud.of_type(INSTANCE)
    scripts = boot_steps(cloud, instance)
    install = step_inputs(scripts[-2])
    assert install["GPU_CLUSTER_STEP"] == "install-controller"
    assert step_inputs(scripts[-1])["GPU_CLUSTER_STEP"] == "install-backup"
    for name, secret in (("RKE2_CA_KEY", "ca-key"), ("RKE2_TOKEN", "server-token"),
                         ("RKE2_AGENT_TOKEN", "agent-token")):
        assert install[name] == ""
        assert install[f"{name}_SSM_PARAMETER"] == f"/gpu-cluster/test/control-plane/{secret}"
    names = {p.inputs["name"] for p in cloud.of_type("aws:ssm/parameter:Parameter")}
    assert {"/gpu-cluster/test/control-plane/server-token",
            "/gpu-cluster/test/control-plane/agent-token"} <= names
    assert not any(secret in "\n".join(scripts) for secret in cloud.secrets)


def test_cloud_nodes_accept_what_the_server_dials_from_it_alone(cloud):
    """From the server's own address, not the VPC's: Canal's VXLAN is unauthenticated
    (components/aws/network.py)."""
    rules = ingress(cloud, "test-network-nodes-")
    [instance] = cloud.of_type(INSTANCE)
    server = f"{instance.inputs['privateIp']}/32"
    assert rules == {(f"{name} from the controllers", protocol, port, server)
                     for name, protocol, port in (("kubelet", "tcp", 10250),
                                                  ("canal-vxlan", "udp", 8472),
                                                  ("canal-health", "tcp", 9099))}
