"""The controllers and the control plane's endpoint are derived once from the config
(config/model.py StackConfig.controllers, config/control_plane.py): with one controller,
the addresses every layout used before, and the distributions' configs name them."""

import yaml

import pytest

from components.distributions import distribution_for, distribution_settings
from tests.builders import bare_metal_config, cloud_config, hybrid_config
from tests.config.loading import loads


def test_the_controllers_are_the_control_plane_hosts_in_config_order():
    values = bare_metal_config(workers=2)
    values["hosts"][0]["role"] = "controller+worker"
    values["hosts"].append(values["hosts"].pop(0))  # the controller last in the list
    settings = loads(values)
    assert [h.name for h in settings.controllers] == ["controller"]
    assert settings.controller is settings.controllers[0]
    assert [h.name for h in settings.workers] == ["gpu000", "gpu001"]


@pytest.mark.parametrize("values, address", [
    (bare_metal_config(), "192.168.2.1"),                     # the controller host's
    (hybrid_config(), "10.20.0.10"),                          # .10 of the first subnet
    (cloud_config(), "10.20.0.10"),
], ids=["bare-metal", "hybrid", "cloud"])
def test_the_endpoint_is_the_first_controllers_address(values, address):
    values.setdefault("kubernetes", {})["apiSans"] = ["api.example.org"]
    settings = loads(values)
    endpoint = settings.control_plane_endpoint
    assert (endpoint.node_address, endpoint.port) == (address, 6443)
    assert endpoint.node_url == f"https://{address}:6443"
    assert endpoint.sans(["203.0.113.9"]) == [address, "203.0.113.9", "api.example.org"]


def test_a_configured_private_address_is_the_endpoint():
    values = cloud_config()
    values["aws"]["controlPlane"] = {"privateIp": "10.20.0.99"}
    assert loads(values).control_plane_endpoint.node_address == "10.20.0.99"


@pytest.mark.parametrize("distribution", ["k0s", "rke2"])
def test_the_distributions_name_the_endpoint(distribution):
    values = hybrid_config()
    values["kubernetes"] = {"distribution": distribution, "apiSans": ["api.example.org"]}
    settings = loads(values)
    dist = distribution_for(distribution_settings(settings))
    host = settings.hosts[0].model_copy(update={"address": "10.20.0.10"})
    config = yaml.safe_load(dist.cluster_config(host, ["203.0.113.9"]))
    sans = config["spec"]["api"]["sans"] if distribution == "k0s" else config["tls-san"]
    assert sans == ["10.20.0.10", "203.0.113.9", "api.example.org"]
    if distribution == "rke2":
        agent = yaml.safe_load(dist.agent_config(settings.hosts[0], ""))
        assert agent["server"] == "https://10.20.0.10:9345"
