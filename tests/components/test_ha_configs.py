"""The distributions' configs for 3 and 5 controllers, held to their real consumers: every
k0s.yaml to the pinned k0s ClusterConfig CRD's openAPIV3Schema (vendored from the tag)
with no key it does not declare, and to k0s's own Go checks of control plane load
balancing; RKE2's keys to its server flags. One controller keeps today's configs."""

import ipaddress
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from components.distributions import distribution_for, distribution_settings
from components.distributions.k0s_api import node_local_load_balancing
from config import versions
from components.aws.control_plane_host import ec2_controllers
from tests.builders import PROJECT_DIR, bare_metal_config, cloud_config, hybrid_config
from tests.components.conftest import settings_for
from tests.components.test_rke2 import RKE2_AGENT_KEYS, RKE2_SERVER_KEYS

CRD = Path(PROJECT_DIR, "vendor", f"k0s-{versions.K0S}", "static", "_crds", "k0s",
           "k0s.k0sproject.io_clusterconfigs.yaml")
VIP = "192.168.2.100"
# k0s's isAnyAddress (api.go:139-141); a DNS name as govalidator's IsDNSName takes it
# (asaskevich/govalidator patterns.go DNSName, at d6cee37).
ANY = ("0.0.0.0", "::")
DNS_NAME = re.compile(r"([a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})(\.[a-zA-Z0-9_][a-zA-Z0-9_-]{0,62})*"
                      r"[._]?")


def cluster(count: int, distribution: str = "k0s", **plane) -> dict:
    """A bare-metal stack whose first `count` hosts run the control plane."""
    values = bare_metal_config(workers=5)
    for host in values["hosts"][1:count]:
        host.update(role="controller+worker")
    values["kubernetes"] = {"distribution": distribution}
    if count > 1:
        values["kubernetes"]["controlPlane"] = {"address": VIP, **plane}
    return values


def rendered(values: dict) -> tuple[object, list[dict], list]:
    """(the distribution, each controller's config, the controllers)."""
    settings = settings_for(values)
    distribution = distribution_for(distribution_settings(settings))
    # Hybrid and cloud: the EC2 controllers.
    controllers = list(settings.controllers) or ec2_controllers(
        settings.aws, settings.control_plane_endpoint.replicas)
    return (distribution, [yaml.safe_load(distribution.cluster_config(host, ["203.0.113.9"]))
                           for host in controllers], controllers)


def schema() -> dict:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    assert (crd["spec"]["names"]["kind"], version["name"]) == ("ClusterConfig", "v1beta1")
    return version["schema"]["openAPIV3Schema"]


def undeclared(document, node: dict, path: str = "") -> list[str]:
    """Keys the schema does not declare: the API server would prune them, and k0s reads
    k0s.yaml strictly, refusing them (pkg/apis/k0s/v1beta1/clusterconfig_types.go:307-313,
    strictyaml.YamlUnmarshalStrictIgnoringFields)."""
    if isinstance(document, dict) and "properties" in node:
        found = []
        for key, value in document.items():
            if key not in node["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += undeclared(value, node["properties"][key], f"{path}.{key}")
        return found
    if isinstance(document, list) and "items" in node:
        return [p for i, item in enumerate(document)
                for p in undeclared(item, node["items"], f"{path}[{i}]")]
    return []


def go_validate(config: dict) -> list[str]:
    """k0s's own checks of the ClusterConfig, as k0s v1.36.3+k0s.2 runs them at start:
    pkg/apis/k0s/v1beta1/cplb.go ControlPlaneLoadBalancingSpec.Validate (:324-338) and
    validateVRRPInstances (:140-208), clusterconfig_types.go ValidateNodeLocalLoadBalancing
    (:477-492)."""
    errors = []
    spec = config["spec"]
    # APISpec.Validate (api.go:144-188): address an IP, externalAddress and sans IPs or
    # DNS names, neither INADDR_ANY.
    api = spec["api"]
    if not _parses(ipaddress.ip_address, api["address"]) or api["address"] in ANY:
        errors.append(f"address: invalid IP address {api['address']}")
    for name in [api.get("externalAddress", "localhost"), *api.get("sans", [])]:
        if name in ANY or not (_parses(ipaddress.ip_address, name) or DNS_NAME.fullmatch(name)):
            errors.append(f"invalid IP address / DNS name: {name}")
    nllb = spec["network"].get("nodeLocalLoadBalancing", {})
    if nllb.get("enabled") and spec["api"].get("externalAddress"):
        errors.append("node-local load balancing cannot be used in conjunction with an "
                      "external Kubernetes API server address")
    cplb = spec["network"].get("controlPlaneLoadBalancing")
    if cplb is None:
        return errors
    if cplb.get("type", "Keepalived") != "Keepalived":
        errors.append(f"unsupported CPLB type: {cplb['type']}")
    for instance in cplb.get("keepalived", {}).get("vrrpInstances", []):
        router_id = instance.get("virtualRouterID", 0)
        if router_id < 0 or router_id > 255:
            errors.append("VirtualRouterID must be in the range of 1-255")
        if not instance.get("authPass"):
            errors.append("AuthPass must be defined")
        if len(instance.get("authPass", "")) > 8:
            errors.append("AuthPass must be 8 characters or less")
        if not instance.get("virtualIPs"):
            errors.append("VirtualIPs must be defined")
        for vip in instance.get("virtualIPs", []):
            if "/" not in vip or not _parses(ipaddress.ip_interface, vip):
                errors.append(f"VirtualIPs must be a CIDR. Got: {vip}")
        peers = instance.get("unicastPeers", [])
        source = instance.get("unicastSourceIP", "")
        if peers and not _parses(ipaddress.ip_address, source):
            errors.append(f"UnicastPeers require a valid UnicastSourceIP. Got: {source}")
        for peer in peers:
            if not _parses(ipaddress.ip_address, peer):
                errors.append(f"UnicastPeers require valid IP addresses. Got: {peer}")
            if peer == source:
                errors.append(f"UnicastPeers must not contain the UnicastSourceIP. Got: {peer}")
    return errors


def _parses(parse, text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True


def hybrid_controllers(count: int, distribution: str = "k0s", layout=hybrid_config) -> dict:
    """A hybrid (or `layout`) stack with `count` EC2 controllers behind the network load
    balancer."""
    values = layout()
    values["aws"]["vpc"] = {"availabilityZones": count}
    values["kubernetes"] = {"distribution": distribution, "controlPlane": {"replicas": count}}
    return values


# The load balancer's first address (.11 of the first subnet) and the controllers' (.10).
BALANCER = "10.20.0.11"
SINGLE = [bare_metal_config(), hybrid_config(), cloud_config()]
MANY = [cluster(3), cluster(5), cluster(3, vip={"interface": "bond0", "routerId": 7}),
        cluster(3, address="api.lab.example.com", loadBalancer="external"),
        hybrid_controllers(3), hybrid_controllers(5),
        hybrid_controllers(3, layout=cloud_config), hybrid_controllers(5, layout=cloud_config)]


@pytest.mark.parametrize("values", SINGLE + MANY, ids=[
    "bare-metal-1", "hybrid-1", "cloud-1", "vip-3", "vip-5", "vip-3-bond0", "external-3",
    "hybrid-nlb-3", "hybrid-nlb-5", "cloud-nlb-3", "cloud-nlb-5"])
def test_every_k0s_config_is_valid_for_the_pinned_k0s(values):
    _, configs, _ = rendered(values)
    for config in configs:
        jsonschema.validate(config, schema())
        assert undeclared(config, schema()) == []
        assert go_validate(config) == []


@pytest.mark.parametrize("count", [3, 5])
def test_k0s_controllers_hold_the_vip_and_workers_balance_locally(count):
    distribution, configs, controllers = rendered(cluster(count))
    addresses = [host.address for host in controllers]
    instances = []
    for host, config in zip(controllers, configs):
        api, network = config["spec"]["api"], config["spec"]["network"]
        assert api["address"] == host.address and "externalAddress" not in api
        assert api["sans"] == [VIP, "203.0.113.9", host.address]
        cplb = network["controlPlaneLoadBalancing"]
        assert (cplb["enabled"], cplb["type"]) == (True, "Keepalived")
        (instance,) = cplb["keepalived"]["vrrpInstances"]
        assert instance["unicastSourceIP"] == host.address
        assert sorted([host.address, *instance["unicastPeers"]]) == sorted(addresses)
        assert instance["interface"] == "eno2"  # hosts[].interface
        instances.append(instance)
        assert network["nodeLocalLoadBalancing"] == {"enabled": True, "type": "EnvoyProxy"}
    # All but the interface equal on every controller (k0s docs/cplb.md:75); unicast
    # fields are each controller's own.
    shared = {(tuple(i["virtualIPs"]), i["authPass"], i["virtualRouterID"]) for i in instances}
    assert shared == {((f"{VIP}/24",), instances[0]["authPass"], 51)}
    assert node_local_load_balancing(distribution.settings.endpoint)


def test_a_go_check_the_configs_pass_is_a_real_check():
    _, (config, *_), _ = rendered(cluster(3))
    instance = config["spec"]["network"]["controlPlaneLoadBalancing"]["keepalived"][
        "vrrpInstances"][0]
    instance["unicastPeers"].append(instance["unicastSourceIP"])
    instance["authPass"] = "123456789"
    config["spec"]["api"]["externalAddress"] = VIP
    config["spec"]["api"]["sans"].append("0.0.0.0")
    assert len(go_validate(config)) == 4
    with pytest.raises(jsonschema.ValidationError, match="is too long"):
        jsonschema.validate(config, schema())
    config["spec"]["api"]["bindAddress"] = "0.0.0.0"
    assert undeclared(config, schema()) == [".spec.api.bindAddress"]


def test_k0s_behind_an_external_load_balancer_names_it_everywhere():
    distribution, configs, _ = rendered(
        cluster(3, address="api.lab.example.com", loadBalancer="external"))
    for config in configs:
        assert config["spec"]["api"]["externalAddress"] == "api.lab.example.com"
        assert config["spec"]["api"]["sans"][0] == "api.lab.example.com"
        assert not {"controlPlaneLoadBalancing", "nodeLocalLoadBalancing"} & set(
            config["spec"]["network"])
    assert not node_local_load_balancing(distribution.settings.endpoint)


@pytest.mark.parametrize("values", SINGLE, ids=["bare-metal", "hybrid", "cloud"])
def test_one_controller_has_no_load_balancing(values):
    distribution, (config,), _ = rendered(values)
    assert "externalAddress" not in config["spec"]["api"]
    assert not {"controlPlaneLoadBalancing", "nodeLocalLoadBalancing"} & set(
        config["spec"]["network"])
    assert not node_local_load_balancing(distribution.settings.endpoint)


def test_envoy_is_pulled_only_with_node_local_load_balancing():
    envoy = "quay.io/k0sproject/envoy-distroless:v1.39.0"
    assert envoy not in versions.release_images("k0s", versions.K0S, "calico")
    assert envoy in versions.release_images("k0s", versions.K0S, "calico", nllb=True)
    assert envoy not in versions.release_images("rke2", versions.RKE2, "calico", nllb=True)


@pytest.mark.parametrize("values, address", [
    (cluster(3, "rke2"), VIP), (cluster(5, "rke2"), VIP),
    (hybrid_controllers(3, "rke2"), BALANCER), (hybrid_controllers(5, "rke2"), BALANCER),
    (hybrid_controllers(3, "rke2", cloud_config), BALANCER)],
    ids=["vip-3", "vip-5", "hybrid-nlb-3", "hybrid-nlb-5", "cloud-nlb-3"])
def test_rke2_servers_after_the_first_join_at_the_fixed_address(values, address):
    distribution, configs, controllers = rendered(values)
    first, *joining = configs
    assert "server" not in first
    for config in joining:
        assert config["server"] == f"https://{address}:9345"
    for host, config in zip(controllers, configs):
        assert set(config) <= RKE2_SERVER_KEYS, set(config) - RKE2_SERVER_KEYS
        assert config["tls-san"] == [address, "203.0.113.9", host.address]
        assert config["token-file"] == configs[0]["token-file"]
    agent = yaml.safe_load(distribution.agent_config(controllers[0], "192.168.2.9"))
    assert agent["server"] == f"https://{address}:9345" and set(agent) <= RKE2_AGENT_KEYS


@pytest.mark.parametrize("count", [3, 5])
@pytest.mark.parametrize("layout", [hybrid_config, cloud_config], ids=["hybrid", "cloud"])
def test_ec2_controllers_name_the_load_balancer_as_k0s_external_address(count, layout):
    _, configs, controllers = rendered(hybrid_controllers(count, layout=layout))
    assert [host.address for host in controllers] == [
        f"10.20.{zone}.10" for zone in range(count)]
    for host, config in zip(controllers, configs):
        api = config["spec"]["api"]
        assert (api["address"], api["externalAddress"]) == (host.address, BALANCER)
        assert api["sans"] == [BALANCER, "203.0.113.9", host.address]
        # No VRRP in a VPC, and no node-local balancer beside an external address.
        assert not {"controlPlaneLoadBalancing", "nodeLocalLoadBalancing"} & set(
            config["spec"]["network"])

