"""EC2 GPU pools on the hybrid layout through the offline preview (tests/builders.py
hybrid_pools_config: RKE2, two on-prem workers, an on-demand and a spot pool): the pools'
groups and templates as on cloud, the controller's token rotation over SSH, the VPC's
routes to the LAN for the pools' subnets, the security groups and host firewalls both ways,
one CNI MTU and an interface pattern that every node matches, storage, Kueue's flavors,
cluster-autoscaler and the cloud controller manager, and the preview's warnings."""

import copy
import ipaddress
import re

import pytest
import yaml

from components.aws.network import RULES_QUOTA_WARNING
from components.common.step_text import step_inputs, whole_text
from components.distributions import distribution_for, distribution_settings
from components.layouts.over_ssh import host_firewall_ruleset, host_firewall_sources
from components.network import vpn_clients
from config.aws_checks import POOLS_WITHOUT_NFS_HOST
from config.pool_tags import autoscaler_tags
from config.warnings import preview_warnings
from contract.names import CAPACITY_LABEL, POOL_LABEL
from preview.engine import unwrap_secrets
from tests.builders import bare_metal_config, hybrid_pools_config, own_warnings, shared_preview
from tests.config.loading import loads, problems_of
from tests.stacks.nft import nft_check
from tests.stacks.steps import boot_step, waits_for

GROUP = "aws:autoscaling/group:Group"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
ROUTE = "aws:ec2/route:Route"
# hybrid_config's networks: the VPC's default, its two public subnets, the LAN, the tunnel.
VPC, SUBNETS = "10.20.0.0/16", ("10.20.0.0/24", "10.20.1.0/24")
LAN, TUNNEL = "192.168.2.0/24", "10.8.0.0/24"
ONPREM = ("192.168.2.2/32", "192.168.2.3/32")
GATEWAY_TUNNEL = "10.8.0.2/32"  # the on-prem gateway's fixed tunnel address
CONTROLLER = "10.20.0.10"


@pytest.fixture(scope="module")
def plan():
    return shared_preview(hybrid_pools_config())


def nat_values() -> dict:
    values = hybrid_pools_config()
    values["aws"]["vpc"] = {"egress": "nat"}
    return values


def of_pool(plan, type_: str, pool: str):
    [resource] = [r for r in plan.of_type(type_) if r.name.startswith(f"test-{pool}-")]
    return resource


def rules(plan, group: str) -> set[tuple]:
    """(description, protocol, from port, source) of one security group's inbound rules."""
    return {(r.inputs["description"], r.inputs["ipProtocol"],
             int(r.inputs.get("fromPort", -1)),
             r.inputs.get("cidrIpv4") or "group")
            for r in plan.of_type(INGRESS) if group in waits_for(plan, r.name)}


def test_both_pools_get_a_group_in_the_vpc_and_a_template_as_on_cloud(plan):
    on_demand, spot = of_pool(plan, GROUP, "burst"), of_pool(plan, GROUP, "spot")
    # On-demand keeps its launch template; spot launches through a mixed instances policy.
    assert on_demand.inputs["launchTemplate"] and "mixedInstancesPolicy" not in on_demand.inputs
    policy = spot.inputs["mixedInstancesPolicy"]
    assert policy["instancesDistribution"]["onDemandPercentageAboveBaseCapacity"] == 0
    assert [o["instanceType"] for o in policy["launchTemplate"]["overrides"]] == [
        "g5.2xlarge", "g5.4xlarge"]
    subnets = {r.name: r for r in plan.of_type("aws:ec2/subnet:Subnet")}
    for group in (on_demand, spot):
        # The VPC's public subnets (egress public): where the controller is.
        assert {s["cidrBlock"] for s in (subnets[n].inputs for n in subnets)} == set(SUBNETS)
        assert len(group.inputs["vpcZoneIdentifiers"]) == 2
    for pool, group in (("burst", on_demand), ("spot", spot)):
        tags = {t["key"]: (t["value"], t["propagateAtLaunch"]) for t in group.inputs["tags"]}
        assert tags[POOL_LABEL] == (pool, True)
        for key in autoscaler_tags("test", next(
                p for p in loads(hybrid_pools_config()).pools if p.name == pool)):
            assert tags[key][1] is False, key
        template = of_pool(plan, TEMPLATE, pool)
        [interface] = template.inputs["networkInterfaces"]
        assert interface["associatePublicIpAddress"] == "true"
        # The nodes' group (the one whose members admit each other).
        assert interface["securityGroups"] == [
            plan.named("test-network-nodes-from-nodes").inputs["referencedSecurityGroupId"]]
        join = boot_step(plan, template, "join-worker")
        # The pools join the controller at its private address, in the VPC, and register
        # with their AWS provider ID (the cloud controller manager runs: RKE2).
        assert yaml.safe_load(join["RKE2_CONFIG"])["server"] == f"https://{CONTROLLER}:9345"
        assert join["RKE2_CLOUD_PROVIDER"] == "aws"


def test_the_controller_rotates_the_pools_tokens_over_ssh_after_its_install(plan):
    step = plan.named("control-plane-watch-pools")
    assert step.type == "command:remote:Command"
    assert "control-plane-install-controller" in plan.all_dependencies(step)
    for pool in ("burst", "spot"):
        assert step.name in plan.all_dependencies(of_pool(plan, GROUP, pool))
    # Its grant is on the controller's instance role, which hybrid gives it too.
    assert "test-control-plane-host-role" in waits_for(plan, "test-node-cleanup-controller")


def test_the_vpc_routes_the_lan_through_the_vpn_server_from_the_pools_subnets(plan):
    """Egress public: the pools share the public route table, which routes the LAN."""
    routes = plan.of_type(ROUTE)
    assert sorted(r.inputs["destinationCidrBlock"] for r in routes) == sorted([LAN, TUNNEL])
    # No route to the pod network: Canal crosses in VXLAN between node addresses.
    assert all(r.inputs["destinationCidrBlock"] != "10.244.0.0/16" for r in routes)


def test_with_nat_the_pools_private_table_routes_the_lan_too():
    nat = shared_preview(nat_values())
    tables = {r.name: r for r in nat.of_type("aws:ec2/routeTable:RouteTable")}
    assert set(tables) == {"test-network-public", "test-network-private"}
    routed = {(r.inputs["destinationCidrBlock"], next(
        name for name in tables if name in waits_for(nat, r.name))) for r in nat.of_type(ROUTE)}
    assert routed == {(cidr, table) for cidr in (LAN, TUNNEL) for table in tables}
    # And the on-prem side admits the private subnets, not the public ones.
    settings = loads(nat_values())
    private = {"10.20.2.0/24", "10.20.3.0/24"}
    assert private <= set(host_firewall_sources(settings))
    assert not set(SUBNETS) & set(host_firewall_sources(settings))


def test_the_pools_group_admits_the_on_prem_nodes_and_the_path_mtu_replies(plan):
    got = rules(plan, "test-network-nodes")
    sources = (*ONPREM, GATEWAY_TUNNEL)
    for name, protocol, port in (("kubelet", "tcp", 10250), ("canal-vxlan", "udp", 8472),
                                 ("canal-health", "tcp", 9099)):
        assert {(f"{name} from on-prem", protocol, port, s) for s in sources} <= got
    assert ("fragmentation needed from the VPN server", "icmp", 3, f"{CONTROLLER}/32") in got
    # Never the LAN or the tunnel range as a whole.
    assert not {cidr for *_, cidr in got} & {LAN, TUNNEL, "0.0.0.0/0"}
    [icmp] = [r for r in plan.of_type(INGRESS) if r.inputs["ipProtocol"] == "icmp"]
    assert (icmp.inputs["fromPort"], icmp.inputs["toPort"]) == (3, 4)


def test_the_controller_admits_the_pools_subnets_on_the_node_ports(plan):
    got = rules(plan, "test-control-plane-host-sg")
    for name, protocol, port in (("rke2-supervisor", "tcp", 9345), ("kubelet", "tcp", 10250),
                                 ("canal-vxlan", "udp", 8472)):
        assert {(name, protocol, port, s) for s in (*ONPREM, *SUBNETS)} <= got


def test_on_prem_hosts_admit_the_pools_subnets_and_nft_takes_the_ruleset():
    settings = loads(hybrid_pools_config())
    sources = host_firewall_sources(settings)
    assert set(SUBNETS) <= set(sources) and LAN not in sources
    distribution = distribution_for(distribution_settings(settings))
    for host in settings.hosts:
        text = host_firewall_ruleset(settings, distribution, host)
        assert "10.20.0.0/23" in text  # the two /24s, merged into one interval
        assert not nft_check(text)


def test_the_vpn_filter_lets_the_lan_reach_the_pools_subnets():
    """The server's filter (vpn_clients.py) lets the gateway and the LAN behind it reach
    the VPC: the pools' subnets are in it."""
    names = {"gateway": "gw", "admin": "admin"}
    rules = vpn_clients.filter_rules(vpn_clients.clients(
        TUNNEL, VPC, LAN, names, vpn_clients.Reach(f"{CONTROLLER}/32", 6443), {}))
    allowed = [line.split()[3:6:2] for line in rules.splitlines()
               if line.startswith("-A ") and "-s " in line and "--dport" not in line]
    for subnet in SUBNETS:
        for source in (LAN, GATEWAY_TUNNEL):
            assert any(s == source and ipaddress.ip_network(subnet).subnet_of(
                ipaddress.ip_network(d)) for s, d in allowed), (subnet, source, allowed)


def canal(plan) -> dict:
    step = plan.named("control-plane-install-controller")
    inputs = step_inputs(whole_text(unwrap_secrets(step.inputs["stdin"])))
    document = yaml.safe_load(inputs["RKE2_CANAL_CONFIG"])
    return yaml.safe_load(document["spec"]["valuesContent"])


def test_one_cni_mtu_and_an_interface_pattern_every_node_matches(plan):
    values = canal(plan)
    # The tunnel's MTU (vpn.mtu's default 1400) less VXLAN's 50, for the one DaemonSet
    # every node runs: the pools' pods send what fits through the tunnel.
    assert values["calico"]["vethuMTU"] == 1350
    pattern = re.compile(values["flannel"]["regexIface"])
    for address in ("192.168.2.2", "192.168.2.3", CONTROLLER, "10.20.0.57", "10.20.1.200"):
        assert pattern.search(address), address
    # Not the tunnel's addresses (the controller's and the gateway's tun), not the LAN's
    # others, not the private subnets the pools are not in.
    for address in ("10.8.0.1", "10.8.0.2", "192.168.2.77", "10.20.2.5", "10.200.0.1"):
        assert not pattern.search(address), address


def test_storage_the_pools_reach_efs_by_their_group_and_no_on_prem_export(plan):
    got = rules(plan, "test-efs-nfs")
    assert ("nfs from the pools' nodes", "tcp", 2049, "group") in got
    values = hybrid_pools_config()
    values["storage"] = {"nfs": {"host": "gpu000"}}
    assert ("storage.nfs.host", POOLS_WITHOUT_NFS_HOST) in problems_of(values)
    # An existing server is the config's to export: accepted.
    values["storage"] = {"nfs": {"server": "192.168.2.250"}}
    loads(values)


def test_a_pool_may_not_take_a_host_or_controller_name():
    values = hybrid_pools_config()
    values["pools"][0]["name"] = "gpu000"
    values["pools"][1]["name"] = "control-plane"
    problems = problems_of(values)
    for index in (0, 1):
        assert any(path.startswith(f"pools[{index}] (") and path.endswith(".name")
                   and "host or an EC2 controller" in message
                   for path, message in problems), problems


def test_cluster_autoscaler_and_the_cloud_controller_run_on_the_controllers(plan):
    assert plan.named("test-cluster-autoscaler").type == "gpu-cluster:addons:ClusterAutoscaler"
    assert plan.named("test-cloud-controller").type == "gpu-cluster:aws:CloudController"
    assert plan.named("test-cluster-autoscaler-chart")
    assert not [w for w in plan.warnings if "cloud controller manager" in w]
    # Never an on-prem node: their joins carry no cloud provider (docs/layouts.md, "The
    # AWS cloud controller manager").
    for host in ("gpu000", "gpu001"):
        join = step_inputs(whole_text(unwrap_secrets(
            plan.named(f"{host}-join-worker").inputs["stdin"])))
        assert "RKE2_CONFIG" in join and "RKE2_CLOUD_PROVIDER" not in join
        # Nor a pool's label: a pool's Kueue flavor selects its nodes by it
        # (components/access/queues.py), and no on-prem node may be taken for one.
        labels = yaml.safe_load(join["RKE2_CONFIG"])["node-label"]
        assert f"{CAPACITY_LABEL}=on-prem" in labels
        assert not [label for label in labels if label.startswith(f"{POOL_LABEL}=")]


def test_kueue_flavors_are_on_prem_then_the_pools():
    values = hybrid_pools_config()
    values["access"] = {"teams": [{"name": "vision", "quota": {"flavors": [
        {"name": "on-prem", "gpus": 8}, {"name": "burst", "gpus": 8},
        {"name": "spot", "gpus": 4}]}}]}
    flavored = shared_preview(values)
    flavors = {r.name: r.inputs["spec"] for r in flavored.resources
               if r.type.endswith(":ResourceFlavor")}
    assert flavors == {
        "resourceflavor-default-flavor": {},
        "resourceflavor-on-prem": {"nodeLabels": {CAPACITY_LABEL: "on-prem"}},
        "resourceflavor-burst": {"nodeLabels": {POOL_LABEL: "burst"}},
        "resourceflavor-spot": {"nodeLabels": {POOL_LABEL: "spot"}}}


def test_the_preview_warns_about_spot_and_nothing_else_new(plan):
    warnings = own_warnings(plan)
    assert any(w.startswith("gpu-cluster:pools[1] (spot).capacity is spot") for w in warnings)
    assert not [w for w in warnings if "pools do not autoscale" in w]
    assert not [w for w in warnings if w.startswith(RULES_QUOTA_WARNING[:20])]
    assert len(warnings) == 2, warnings  # spot, and hybrid_config's storage.efs.anonymousNfs


def test_without_pools_the_hybrid_stack_has_no_node_group_and_keeps_its_pinning():
    values = copy.deepcopy(hybrid_pools_config())
    del values["pools"]
    plain = shared_preview(values)
    assert not plain.of_type(GROUP)
    assert "test-network-nodes" not in {r.name for r in plain.resources}
    # The nodes' addresses alone, no network's pattern.
    assert canal(plain)["flannel"]["regexIface"] == (
        "^(10\\.20\\.0\\.10|192\\.168\\.2\\.2|192\\.168\\.2\\.3)$")


def k0s_values(cni: str = "kuberouter") -> dict:
    values = hybrid_pools_config()
    values["kubernetes"] = {"distribution": "k0s"}
    values["network"]["cni"] = cni
    return values


def test_with_k0s_and_kube_router_the_pools_admit_ip_in_ip_and_autoscale():
    """kube-router crosses between the pools' subnets and the LAN in IP in IP
    (components/distributions/k0s.py): a protocol rule without ports; BGP and the kubelet
    as ports. cluster-autoscaler runs on the controllers, k0s's tainted nodes there."""
    plan = shared_preview(k0s_values())
    ipip = [r.inputs for r in plan.of_type(INGRESS)
            if r.inputs["description"] == "kube-router-ipip from on-prem"]
    assert sorted(i["cidrIpv4"] for i in ipip) == sorted([*ONPREM, GATEWAY_TUNNEL])
    assert all(i["ipProtocol"] == "4" and "fromPort" not in i for i in ipip)
    got = rules(plan, "test-network-nodes")
    for name, protocol, port in (("kubelet", "tcp", 10250), ("kube-router-bgp", "tcp", 179)):
        assert {(f"{name} from on-prem", protocol, port, s) for s in ONPREM} <= got
    # The controller, a node: the pools and the on-prem nodes reach its kubelet and tunnel
    # to it; the pools reach it from their subnets.
    controller = rules(plan, "test-control-plane-host-sg")
    for name, protocol, port in (("kubelet", "tcp", 10250), ("kube-router-bgp", "tcp", 179),
                                 ("kube-router-ipip", "4", -1)):
        assert {(name, protocol, port, s) for s in ONPREM} <= controller, name
    assert not any("autoscale" in w for w in plan.warnings)
    assert plan.named("test-cluster-autoscaler")


def kube_router_of(plan) -> dict:
    [install] = [r for r in plan.of_type("command:remote:Command")
                 if r.name.endswith("-install-controller")]
    inputs = step_inputs(whole_text(unwrap_secrets(install.inputs["stdin"])))
    return yaml.safe_load(inputs["K0S_CONFIG"])["spec"]["network"].get("kuberouter", {})


def test_with_k0s_on_aws_kube_router_tunnels_between_all_nodes_and_leaves_ec2_alone():
    """EC2 drops a pod's packet routed directly between two nodes of one subnet (its
    addresses are not the instance's); kube-router's own cure, turning each instance's
    source/destination check off, needs ec2:ModifyInstanceAttribute on every node. So IP in
    IP between all nodes, and no attempt (k0s.py AWS_KUBE_ROUTER_ARGS; kube-router v2.10.0
    pkg/options/options.go:153,229-233). On bare metal kube-router keeps its defaults."""
    assert kube_router_of(shared_preview(k0s_values()))["extraArgs"] == {
        "overlay-type": "full", "disable-source-dest-check": "false"}
    bare_metal = bare_metal_config(workers=1)
    bare_metal.setdefault("network", {})["cni"] = "kuberouter"
    assert "extraArgs" not in kube_router_of(shared_preview(bare_metal))


def test_with_k0s_and_calico_vxlan_is_a_port_and_no_protocol_rule():
    plan = shared_preview(k0s_values("calico"))
    got = rules(plan, "test-network-nodes")
    assert {("calico-vxlan from on-prem", "udp", 4789, s) for s in ONPREM} <= got
    assert not [r for r in got if r[1] == "4"]


def test_the_outputs_list_the_on_prem_nodes_and_the_pools(plan):
    """What the day-2 tools expect of the cluster (contract/stack.py: `nodes` and `pools`)."""
    nodes, _ = plan.outputs["nodes"]
    pools, _ = plan.outputs["pools"]
    assert {n["name"] for n in nodes} == {"control-plane", "gpu000", "gpu001"}
    assert [(p["name"], p["capacity"], p["min"], p["max"]) for p in pools] == [
        ("burst", "on-demand", 0, 4), ("spot", "spot", 0, 8)]
    images, _ = plan.outputs["images"]
    assert set(images) == {"controlPlane", "burst", "spot"}


def adopted_values(cidrs: tuple = ()) -> dict:
    values = hybrid_pools_config()
    values["aws"]["vpc"] = {"id": "vpc-0123456789abcdef0", "cidr": VPC,
                            "routeTableIds": ["rtb-0123456789abcdef0"],
                            "subnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                            **({"poolSubnetCidrs": list(cidrs)} if cidrs else {})}
    values["aws"]["controlPlane"] = {"privateIp": CONTROLLER}
    values["storage"]["efs"]["mountTargetAddress"] = "10.20.0.20"
    return values


def test_an_adopted_vpc_widens_the_on_prem_side_to_it_and_the_preview_says_so():
    settings = loads(adopted_values())
    assert VPC in host_firewall_sources(settings)
    [warning] = [w for w in preview_warnings(settings) if "adopted VPC" in w]
    assert warning.startswith("gpu-cluster:pools on hybrid in the adopted VPC "
                              "vpc-0123456789abcdef0: the on-prem hosts' node ports")
    assert "set gpu-cluster:aws.vpc.poolSubnetCidrs" in warning
    assert not [w for w in preview_warnings(loads(hybrid_pools_config())) if "adopted VPC" in w]


ADOPTED = ("10.20.0.0/20", "10.20.32.0/20")  # apart: no merged interval covers the gap


def test_with_pool_subnet_cidrs_the_on_prem_side_admits_only_them_and_no_warning():
    """aws.vpc.poolSubnetCidrs through the offline preview: the on-prem hosts' firewalls,
    the controller's node ports and Canal's interface pattern take those subnets, not the
    adopted VPC, and the preview no longer warns about it."""
    plan = shared_preview(adopted_values(ADOPTED))
    # The hosts, the controller and the VPN server's tunnel address, and the two subnets,
    # merged into intervals as the ruleset writes them (the controller is in the first).
    wanted = list(ipaddress.collapse_addresses(ipaddress.ip_network(cidr) for cidr in (
        *ONPREM, f"{CONTROLLER}/32", "10.8.0.1/32", *ADOPTED)))
    elsewhere = "10.20.200.5"  # in the VPC, in neither subnet
    for host in ("gpu000", "gpu001"):
        step = plan.named(f"{host}-host-firewall")
        ruleset = step_inputs(unwrap_secrets(step.inputs["stdin"]))["HOST_FIREWALL_RULESET"]
        [elements] = re.findall(r"set node_sources \{[^}]*elements = \{ ([^}]*) \}", ruleset)
        assert sorted(map(ipaddress.ip_network, elements.split(", "))) == wanted, elements
        assert not nft_check(ruleset)
    got = rules(plan, "test-control-plane-host-sg")
    for name, protocol, port in (("rke2-supervisor", "tcp", 9345), ("kubelet", "tcp", 10250),
                                 ("canal-vxlan", "udp", 8472)):
        assert {s for n, p, f, s in got if (n, p, f) == (name, protocol, port)} == {
            *ONPREM, *ADOPTED}, name
    pattern = re.compile(canal(plan)["flannel"]["regexIface"])
    for address in ("192.168.2.2", CONTROLLER, "10.20.15.200", "10.20.40.7"):
        assert pattern.search(address), address
    assert not pattern.search(elsewhere)
    assert not [w for w in own_warnings(plan) if "adopted VPC" in w]


def test_several_controllers_say_the_token_rotation_runs_on_the_first():
    values = hybrid_pools_config()
    values["kubernetes"]["controlPlane"] = {"replicas": 3}
    values["aws"]["vpc"] = {"availabilityZones": 3}
    [warning] = [w for w in preview_warnings(loads(values)) if "controlPlane.replicas" in w]
    assert "the VPN runs on the first controller's instance only" in warning
    assert "the pools' join-token rotation" in warning
