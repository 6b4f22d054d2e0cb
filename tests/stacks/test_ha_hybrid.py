"""Three EC2 controllers on the hybrid layout through the offline preview, for each
distribution: one per zone, the first initialising and serving the VPN, the others joining
it over SSH through the network load balancer; the load balancer's fixed first address in
every join, certificate and kubeconfig, and its DNS name in every certificate; who reaches
what (the load balancer's group filters the clients, the controllers admit it and each
other only)."""

import ipaddress
import re

import pytest
import yaml

from components.common.step_text import step_inputs
from contract import ports
from policy import offline
from preview.engine import unwrap_secrets as unwrap
from tests.builders import hybrid_config, shared_preview
from tests.stacks.ec2_controllers import (ADDRESSES, BALANCED, BALANCER, CONTROLLERS,
                                          DISTRIBUTIONS, ENDPOINT, apiserver_targets, attached,
                                          outputs, runs_on, three_controllers)

ON_PREM = ("192.168.2.2", "192.168.2.3")


@pytest.fixture(scope="module", params=DISTRIBUTIONS)
def ha(request):
    return request.param, shared_preview(three_controllers(hybrid_config(), request.param))


def inputs(plan, name: str) -> dict[str, str]:
    return step_inputs(unwrap(plan.named(name).inputs["stdin"]))


def sans(distribution: str, env: dict) -> list[str]:
    if distribution == "k0s":
        return yaml.safe_load(env["K0S_CONFIG"])["spec"]["api"]["sans"]
    return yaml.safe_load(env["RKE2_CONFIG"])["tls-san"]


def balancer(plan):
    """The internal load balancer (the public one is for aws.adminCidrs)."""
    return plan.named("test-api-nlb")


def test_one_controller_per_zone_each_at_its_fixed_address(ha):
    _, plan = ha
    instances = {r.name: r.inputs for r in plan.of_type("aws:ec2/instance:Instance")}
    subnets = [outputs(plan, r.name)["id"]
               for r in plan.of_type_in_tree_order("aws:ec2/subnet:Subnet")]
    for index, (name, address) in enumerate(zip(
            ("test-control-plane-host-instance", "test-control-plane-host-2-instance",
             "test-control-plane-host-3-instance"), ADDRESSES)):
        assert instances[name]["privateIp"] == address
        assert instances[name]["subnetId"] == subnets[index]
        # The first alone forwards for the VPN; the others check their packets' source.
        assert instances[name]["sourceDestCheck"] is (index != 0)
    # The LAN and the tunnel are routed through the first (the VPN server) only.
    interface = outputs(plan, "test-control-plane-host-instance")["primaryNetworkInterfaceId"]
    routes = [r.inputs for r in plan.of_type("aws:ec2/route:Route")]
    assert routes and all(r["networkInterfaceId"] == interface for r in routes)


def test_the_controllers_join_the_first_in_order_over_ssh(ha):
    distribution, plan = ha
    first = runs_on(plan, "control-plane-install-controller")
    for index, controller in enumerate(CONTROLLERS):
        install = plan.named(f"{controller}-install-controller")
        assert runs_on(plan, install.name) not in {runs_on(plan, f"{c}-install-controller")
                                                   for c in CONTROLLERS if c != controller}
        if index:
            before = CONTROLLERS[index - 1]
            last = (f"{before}-etcd-member" if index > 1 else
                    f"{before}-{'apply-worker-profile' if distribution == 'rke2' else 'install-controller'}")
            assert last in plan.all_dependencies(install)
            assert runs_on(plan, f"{controller}-etcd-member") == first
            assert inputs(plan, f"{controller}-etcd-quorum")["EXPECTED_MEMBERS"] == "3"
            key = f"{distribution.upper()}_CA_KEY"
            assert key not in inputs(plan, install.name)
            if distribution == "rke2":
                config = yaml.safe_load(inputs(plan, install.name)["RKE2_CONFIG"])
                assert config["server"] == f"https://{ENDPOINT}:{ports.RKE2_SUPERVISOR}"
            else:
                assert runs_on(plan, f"{controller}-create-controller-token") == first


def test_every_certificate_names_the_balancers_and_every_kubeconfig_one(ha):
    distribution, plan = ha
    dns_name = outputs(plan, balancer(plan).name)["dnsName"]
    public = outputs(plan, "test-public-api-nlb")["dnsName"]
    for controller, address in zip(CONTROLLERS, ADDRESSES):
        env = inputs(plan, f"{controller}-install-controller")
        assert {ENDPOINT, dns_name, public, address} <= set(sans(distribution, env))
        if distribution == "k0s":
            spec = yaml.safe_load(env["K0S_CONFIG"])["spec"]
            assert spec["api"]["externalAddress"] == ENDPOINT
            assert "controlPlaneLoadBalancing" not in spec["network"]
    for kubeconfig in plan.outputs["userKubeconfigs"][0].values():
        assert yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"] == \
            f"https://{ENDPOINT}:6443"
    # The admin and `pulumi up`, from aws.adminCidrs, through the public one.
    assert yaml.safe_load(plan.outputs["kubeconfig"][0])["clusters"][0]["cluster"][
        "server"] == f"https://{public}:6443"
    # No VIP on AWS: VPC subnets carry no VRRP.
    assert not [r for r in plan.of_type("command:remote:Command")
                if r.name.endswith("-control-plane-vip")]


def test_the_balancer_is_internal_at_fixed_addresses_and_forwards_each_port(ha):
    distribution, plan = ha
    nlb = balancer(plan).inputs
    assert (nlb["loadBalancerType"], nlb["internal"]) == ("network", True)
    assert nlb["enableCrossZoneLoadBalancing"] is True
    assert [m["privateIpv4Address"] for m in nlb["subnetMappings"]] == list(BALANCER)
    listeners = {r.inputs["port"] for r in plan.of_type("aws:lb/listener:Listener")
                 if r.name.startswith("test-api-")}
    assert listeners == BALANCED[distribution]
    instances = {outputs(plan, f"test-control-plane-host{s}-instance")["id"]
                 for s in ("", "-2", "-3")}
    for group in plan.of_type("aws:lb/targetGroup:TargetGroup"):
        assert group.inputs["preserveClientIp"] == "false"
        assert group.inputs["healthCheck"]["protocol"] == "TCP"
        assert attached(plan)[group.name] == instances


def group_rules(plan, group: str, direction: str = "Ingress") -> list[dict]:
    group_id = outputs(plan, group)["id"]
    type_ = f"aws:vpc/securityGroup{direction}Rule:SecurityGroup{direction}Rule"
    return [r.inputs for r in plan.of_type(type_) if r.inputs["securityGroupId"] == group_id]


def test_the_balancers_group_filters_clients_and_sends_to_the_controllers_only(ha):
    distribution, plan = ha
    by_port: dict[int, set[str]] = {}
    for rule in group_rules(plan, "test-api-sg"):
        by_port.setdefault(rule["fromPort"], set()).add(rule["cidrIpv4"])
    assert set(by_port) == BALANCED[distribution]
    # The API from the cluster's networks (VPC, LAN, tunnel), never the internet.
    assert by_port.pop(ports.KUBERNETES_API) == {"10.20.0.0/16", "192.168.2.0/24", "10.8.0.0/24"}
    nodes = {f"{a}/32" for a in (*ON_PREM, *ADDRESSES)}
    assert all(sources == nodes for sources in by_port.values())
    out = group_rules(plan, "test-api-sg", "Egress")
    assert {r["cidrIpv4"] for r in out} == {f"{a}/32" for a in ADDRESSES}


def test_controllers_admit_the_balancer_by_group_and_etcd_from_each_other(ha):
    distribution, plan = ha
    balancer_group = outputs(plan, "test-api-sg")["id"]
    peers = outputs(plan, "test-controllers")["id"]
    for suffix in ("", "-2", "-3"):
        found = group_rules(plan, f"test-control-plane-host{suffix}-sg")
        balanced = {r["fromPort"] for r in found
                    if r.get("referencedSecurityGroupId") == balancer_group}
        assert balanced == BALANCED[distribution]
        # Nothing of a controller's is open to the world, and etcd only to the others.
        assert not [r for r in found if r.get("cidrIpv4") == "0.0.0.0/0"]
        assert not [r for r in found if r["fromPort"] == ports.ETCD_PEER]
        instance = plan.named(f"test-control-plane-host{suffix}-instance").inputs
        assert peers in instance["vpcSecurityGroupIds"]
    among = group_rules(plan, "test-controllers")
    assert all(r["referencedSecurityGroupId"] == peers and "cidrIpv4" not in r for r in among)
    assert ports.ETCD_PEER in {r["fromPort"] for r in among}


def test_every_security_group_keeps_within_its_rule_quota(ha):
    """60 inbound and 60 outbound rules per group, AWS's default quota
    (docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html)."""
    _, plan = ha
    for group in plan.of_type("aws:ec2/securityGroup:SecurityGroup"):
        for direction in ("Ingress", "Egress"):
            assert len(group_rules(plan, group.name, direction)) <= 30, group.name


def test_vpn_users_reach_the_api_at_the_balancer(ha):
    _, plan = ha
    rules_text = inputs(plan, "control-plane-install-openvpn-server")["OPENVPN_FILTER"]
    user_lines = [line for line in rules_text.splitlines() if f"--dport {ports.KUBERNETES_API}" in line]
    assert user_lines and all(f"-d {ENDPOINT}/32" in line for line in user_lines)


def test_on_prem_hosts_admit_every_controller(ha):
    _, plan = ha
    ruleset = inputs(plan, "gpu001-host-firewall")["HOST_FIREWALL_RULESET"]
    [elements] = re.findall(r"set node_sources \{[^}]*elements = \{ ([^}]*) \}", ruleset)
    sources = [ipaddress.ip_network(element) for element in elements.split(", ")]
    for address in ADDRESSES:
        assert any(ipaddress.ip_address(address) in source for source in sources)


def test_the_policy_pack_passes_the_stack(ha):
    _, plan = ha
    resources = offline.resources_of_plan(plan)
    assert "aws:lb/loadBalancer:LoadBalancer" in {r.type for r in resources}
    assert offline.evaluate(resources) == []


def test_prometheus_scrapes_every_controllers_api_server(ha):
    _, plan = ha
    assert apiserver_targets(plan) == [sorted(f"{address}:6443" for address in ADDRESSES)]


def test_a_controllers_steps_go_before_its_instance(ha):
    """Removing a controller deletes in the reverse order of these dependencies: its etcd
    member leaves and its reset runs while its instance is still there."""
    _, plan = ha
    for controller, suffix in zip(CONTROLLERS[1:], ("-2", "-3")):
        for step in ("install-controller", "etcd-member"):
            assert f"test-control-plane-host{suffix}-instance" in plan.all_dependencies(
                plan.named(f"{controller}-{step}"))


@pytest.mark.parametrize("hosts, warned", [(12, False), (14, True)])
def test_a_group_past_awss_rule_quota_is_warned(hosts, warned):
    """RKE2 opens four node ports to each on-prem node's own address: 14 hosts take the
    controller's group past AWS's default 60 inbound rules."""
    values = hybrid_config(workers=hosts)
    values["kubernetes"] = {"distribution": "rke2"}
    plan = shared_preview(values)
    count = len(group_rules(plan, "test-control-plane-host-sg"))
    assert (count > 60) is warned
    found = [w for w in plan.warnings if "inbound rules, above AWS's default quota" in w]
    assert bool(found) is warned
    if warned:
        [warning] = found
        assert f"security group test-control-plane-host-sg gets {count} inbound rules" in warning


def test_pulumi_up_waits_for_the_api_behind_the_public_balancer(ha):
    """The Kubernetes providers reach the API through the public load balancer, which
    forwards once its health checks passed."""
    _, plan = ha
    wait = plan.named("control-plane-wait-for-api")
    assert "control-plane-3-etcd-member" in plan.all_dependencies(wait)
    public = outputs(plan, "test-public-api-nlb")["dnsName"]
    assert f"https://{public}:6443" in unwrap(wait.inputs["stdin"])
    [provider] = [r for r in plan.resources if r.name == "test-kubernetes-nodes"]
    assert wait.name in plan.all_dependencies(provider)
