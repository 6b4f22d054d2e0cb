"""kubernetes.controlPlane: 1, 3 or 5 controllers (hosts with a controller role on bare
metal, `replicas` EC2 instances on hybrid and cloud), the stable address in front of
several, a VIP's place on the LAN, and what the endpoint derives for the distributions."""

import hashlib

import pytest

from tests.builders import bare_metal_config, cloud_config, hybrid_config
from tests.config.loading import loads, problem_lines, refused_at, set_path

KEY = "gpu-cluster:kubernetes.controlPlane"


def three_controllers(count: int = 3, **plane) -> dict:
    """A bare-metal stack whose first `count` hosts run the control plane, a VIP in front."""
    values = bare_metal_config(workers=5)
    for host in values["hosts"][1:count]:
        host.update(role="controller+worker")
    values["kubernetes"] = {"controlPlane": {"address": "192.168.2.100", **plane}}
    return values


@pytest.mark.parametrize("count", [3, 5])
def test_three_or_five_controllers_behind_a_vip_load(count):
    values = three_controllers(count, vip={"interface": "bond0", "routerId": 77})
    values["kubernetes"]["apiSans"] = ["192.168.2.100", "api.example.org"]
    endpoint = loads(values).control_plane_endpoint
    addresses = tuple(f"192.168.2.{n}" for n in range(1, count + 1))
    assert (endpoint.node_address, endpoint.replicas, endpoint.load_balancer) == (
        "192.168.2.100", count, "vip")
    assert endpoint.controller_addresses == addresses
    assert endpoint.peers_of("192.168.2.2") == tuple(a for a in addresses if a != "192.168.2.2")
    assert endpoint.vip == "192.168.2.100"
    vrrp = endpoint.vrrp
    assert (vrrp.virtual_ip, vrrp.router_id, vrrp.interface) == ("192.168.2.100/24", 77, "bond0")
    # The same for every controller of a cluster, at most 8 characters (k0s's CRD).
    assert vrrp.auth_pass == hashlib.sha256(b"test").hexdigest()[:8] and len(vrrp.auth_pass) == 8
    # The VIP once, though apiSans names it too.
    assert endpoint.sans(["203.0.113.9"]) == ["192.168.2.100", "203.0.113.9", "api.example.org"]


def test_the_vip_goes_on_each_controllers_own_nic_unless_one_is_named():
    settings = loads(three_controllers())
    vrrp = settings.control_plane_endpoint.vrrp
    assert (vrrp.router_id, vrrp.interface) == (51, None)
    assert vrrp.interface_of(settings.controllers[1]) == "eno2"


def test_an_external_load_balancer_has_no_vrrp():
    values = three_controllers(address="api.lab.example.com", loadBalancer="external")
    values["kubernetes"]["controlPlane"]["address"] = "api.lab.example.com"
    endpoint = loads(values).control_plane_endpoint
    assert (endpoint.node_address, endpoint.load_balancer, endpoint.vrrp, endpoint.vip) == (
        "api.lab.example.com", "external", None, None)


def test_one_controller_behind_an_external_load_balancer_loads():
    values = bare_metal_config()
    values["kubernetes"] = {"controlPlane": {"address": "10.0.0.5", "loadBalancer": "external"}}
    endpoint = loads(values).control_plane_endpoint
    assert (endpoint.node_address, endpoint.replicas) == ("10.0.0.5", 1)


def test_replicas_on_the_aws_layouts_one_zone_each():
    values = cloud_config()
    values["aws"]["vpc"] = {"availabilityZones": 3}
    values["kubernetes"] = {"controlPlane": {"replicas": "3"}}  # as `config set --path` does
    endpoint = loads(values).control_plane_endpoint
    # The load balancer's first address, in front of .10 of each zone's subnet.
    assert (endpoint.replicas, endpoint.node_address, endpoint.controller_addresses,
            endpoint.load_balancer) == (
        3, "10.20.0.11", ("10.20.0.10", "10.20.1.10", "10.20.2.10"), "external")
    assert endpoint.sans() == ["10.20.0.11"]


def aws_three(values: dict, **control_plane) -> dict:
    values["aws"]["vpc"] = {"availabilityZones": 3}
    values["aws"]["controlPlane"] = control_plane
    values["kubernetes"] = {"controlPlane": {"replicas": 3}}
    return values


def test_several_controllers_in_an_adopted_vpc_are_refused():
    values = aws_three(hybrid_config(), privateIp="10.20.0.10")
    values["aws"]["vpc"] = {"id": "vpc-0123456789abcdef0", "cidr": "10.20.0.0/16",
                            "routeTableIds": ["rtb-0123456789abcdef0"],
                            "subnetIds": [f"subnet-0123456789abcdef{n}" for n in range(3)]}
    refused_at(values, f"{KEY}.replicas", "3 controllers in an adopted VPC "
               "(vpc-0123456789abcdef0) are not built yet")


def test_the_controllers_names_are_free_and_fit_a_dns_label():
    values = aws_three(hybrid_config(), name="gpu")
    values["hosts"][1]["name"] = "gpu-3"
    refused_at(values, f"{KEY}.replicas", "controller 3 would be named 'gpu-3', the name of "
               "gpu-cluster:hosts[1] (gpu-3)")
    refused_at(aws_three(hybrid_config(), name="c" * 62), "gpu-cluster:aws.controlPlane.name",
               f"too long for the name of controller 3, '{'c' * 62}-3'")


def test_the_first_controller_keeps_off_the_load_balancers_address():
    refused_at(aws_three(cloud_config(), privateIp="10.20.0.11"),
               "gpu-cluster:aws.controlPlane.privateIp",
               "10.20.0.11 is the API load balancer's address in the first subnet")


@pytest.mark.parametrize("count", [2, 4])
def test_an_even_number_of_controller_hosts_is_refused_with_etcds_reason(count):
    refused_at(three_controllers(count), "gpu-cluster:hosts",
               f"{count} hosts have a controller role (gpu-cluster:hosts[0] (controller), "
               "gpu-cluster:hosts[1] (gpu000)")
    refused_at(three_controllers(count), "gpu-cluster:hosts",
               "etcd needs a majority: 2 controllers tolerate no failure, 4 tolerate what 3 do")


def test_six_controller_hosts_are_refused():
    refused_at(three_controllers(6), "gpu-cluster:hosts", "6 hosts have a controller role")


@pytest.mark.parametrize("values", [cloud_config(), hybrid_config()], ids=["cloud", "hybrid"])
@pytest.mark.parametrize("replicas, fragment", [
    (2, "must be 1, 3 or 5: etcd needs a majority"), (4, "4 tolerate what 3 do"),
    (7, "must be 1, 3 or 5"), ("three", "whole number")])
def test_replicas_other_than_1_3_5_are_refused(values, replicas, fragment):
    set_path("kubernetes", {"controlPlane": {"replicas": replicas}})(values)
    refused_at(values, f"{KEY}.replicas", fragment)


@pytest.mark.parametrize("vpc, key", [
    ({}, "aws.vpc.availabilityZones"),
    ({"id": "vpc-0123456789abcdef0", "cidr": "10.20.0.0/16",
      "subnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]}, "aws.vpc.subnetIds"),
])
def test_more_controllers_than_zones_is_refused(vpc, key):
    values = cloud_config()
    values["aws"]["vpc"] = vpc
    values["kubernetes"] = {"controlPlane": {"replicas": 3}}
    refused_at(values, f"{KEY}.replicas", f"3 controllers in 2 availability zones ({key}): a "
               "zone holding two of them takes etcd's majority with it")


def test_the_hosts_decide_on_bare_metal():
    values = three_controllers(replicas=5)
    refused_at(values, f"{KEY}.replicas", "is 5 but 3 hosts have a controller role")
    assert loads(three_controllers(replicas=3)).control_plane_endpoint.replicas == 3


def test_several_controllers_need_an_address():
    values = three_controllers()
    del values["kubernetes"]["controlPlane"]["address"]
    refused_at(values, f"{KEY}.address", "is required with 3 controllers")


@pytest.mark.parametrize("address, fragment", [
    ("10.9.9.100", "VIP 10.9.9.100 is outside gpu-cluster:network.lanCidr 192.168.2.0/24"),
    ("192.168.2.255", "VIP 192.168.2.255 is a reserved address"),
    ("192.168.2.0", "VIP 192.168.2.0 is a reserved address"),
    ("192.168.2.3", "VIP 192.168.2.3 is the address of gpu-cluster:hosts[2] (gpu001)"),
    ("192.168.2.5", "VIP 192.168.2.5 is the address of gpu-cluster:hosts[4] (gpu003)"),
    ("api.lab.example.com", "'api.lab.example.com' is a name; with loadBalancer: vip"),
])
def test_a_vip_is_a_free_address_of_the_lan(address, fragment):
    refused_at(three_controllers(address=address), f"{KEY}.address", fragment)


@pytest.mark.parametrize("address", ["0.0.0.0", "127.0.0.1", "224.0.0.18", "fd00::10"])
@pytest.mark.parametrize("load_balancer", ["vip", "external"])
def test_an_address_no_node_reaches_is_refused(address, load_balancer):
    refused_at(three_controllers(address=address, loadBalancer=load_balancer), f"{KEY}.address",
               "is not an IPv4 address every node can reach the controllers at")


def test_a_vip_needs_several_controllers():
    values = bare_metal_config()
    values["kubernetes"] = {"controlPlane": {"address": "192.168.2.100"}}
    refused_at(values, f"{KEY}.address", "a VIP needs several controllers to move between")


@pytest.mark.parametrize("mutate, key, fragment", [
    (set_path("kubernetes.controlPlane.vip.routerId", 0), "vip.routerId", "greater than or equal to 1"),
    (set_path("kubernetes.controlPlane.vip.routerId", 256), "vip.routerId", "less than or equal to 255"),
    (set_path("kubernetes.controlPlane.vip.interface", "eth0; reboot"), "vip.interface", ""),
    (set_path("kubernetes.controlPlane.loadBalancer", "haproxy"), "loadBalancer", "'vip' or 'external'"),
    (set_path("kubernetes.controlPlane.address", "192.168.2.100\nreboot"), "address", ""),
])
def test_bad_values_are_named(mutate, key, fragment):
    values = three_controllers()
    mutate(values)
    refused_at(values, f"{KEY}.{key}", fragment)


def test_vip_keys_with_an_external_load_balancer_are_refused():
    values = three_controllers(loadBalancer="external", vip={"routerId": 9})
    refused_at(values, f"{KEY}.vip", "is read only with loadBalancer: vip")


@pytest.mark.parametrize("values", [cloud_config(), hybrid_config()], ids=["cloud", "hybrid"])
def test_on_prem_keys_on_the_aws_layouts_are_refused(values):
    values["kubernetes"] = {"controlPlane": {"address": "10.20.0.5", "loadBalancer": "vip"}}
    problems = problem_lines(values)
    for key in ("address", "loadBalancer"):
        assert any(p.startswith(f"{KEY}.{key}: is for on-prem controllers") for p in problems), \
            problems


def test_every_problem_at_once():
    values = three_controllers(2, address="10.9.9.9", replicas=3)
    values["hosts"][1]["generation"] = 1
    problems = problem_lines(values)
    assert sorted(p.split(":", 2)[1] for p in problems) == [
        "hosts", "hosts[1] (gpu000).generation", f"{KEY[12:]}.address", f"{KEY[12:]}.replicas"], \
        problems


def test_a_controller_takes_a_generation_beside_two_others():
    values = three_controllers()
    values["hosts"][1]["generation"] = 1
    assert loads(values).hosts[1].generation == 1


def test_the_first_controller_takes_no_generation():
    values = three_controllers()
    values["hosts"][0]["generation"] = 1
    assert problem_lines(values) == [
        "gpu-cluster:hosts[0] (controller).generation: the first controller initialised the "
        "cluster, and replacing its machine is not built yet: new hardware under it would "
        "start another cluster (docs/distributions.md, High availability)"]




def test_a_new_instance_is_asked_for_by_a_later_controllers_name_only():
    values = aws_three(cloud_config(), generations={"control-plane-3": 2})
    assert loads(values).aws.control_plane.generations == {"control-plane-3": 2}
    values["aws"]["controlPlane"]["generations"] = {"control-plane-2": 0}
    assert problem_lines(values) == [
        "gpu-cluster:aws.controlPlane.generations.control-plane-2: Input should be greater "
        "than or equal to 1 (got 0)"]


def test_generations_name_the_first_and_unknown_controllers():
    values = aws_three(hybrid_config(), generations={"control-plane": 1, "control-plane-4": 1})
    assert problem_lines(values) == [
        "gpu-cluster:aws.controlPlane.generations.control-plane: the first controller "
        "initialised the cluster, and a new instance under its name is not built yet: it "
        "would start another cluster (docs/day-2.md, \"Losing the first EC2 controller\")",
        "gpu-cluster:aws.controlPlane.generations.control-plane-4: is not one of the EC2 "
        "controllers after the first (control-plane-2, control-plane-3)"]
    single = cloud_config()
    single["aws"]["controlPlane"] = {"generations": {"control-plane-2": 1}}
    assert problem_lines(single) == [
        "gpu-cluster:aws.controlPlane.generations.control-plane-2: is not one of the EC2 "
        "controllers after the first (there are none)"]
