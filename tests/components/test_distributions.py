"""Every distribution offers what the rest of the program may use (the Distribution
protocol, components/distributions/base.py), with the protocol's signatures, and each
kubernetes.distribution value has one."""

import inspect
import typing

import pytest

from components.distributions import DISTRIBUTIONS, distribution_for, distribution_settings
from components.distributions.base import Distribution
from config.kubernetes import KubernetesSettings
from tests.components.conftest import settings_for
from tests.builders import bare_metal_config

MEMBERS = [name for name in vars(Distribution)
           if not name.startswith("_") and callable(vars(Distribution)[name])]
ATTRIBUTES = list(typing.get_type_hints(Distribution))


def test_every_configurable_distribution_has_a_class():
    allowed = typing.get_args(KubernetesSettings.model_fields["distribution"].annotation)
    assert set(DISTRIBUTIONS) == set(allowed)


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_it_has_every_attribute_of_the_protocol(name):
    values = bare_metal_config()
    values["kubernetes"] = {"distribution": name}
    distribution = distribution_for(distribution_settings(settings_for(values)))
    assert distribution.name == name
    missing = [attribute for attribute in ATTRIBUTES if not hasattr(distribution, attribute)]
    assert not missing
    for attribute in ("kubectl_path", "controller_service", "node_services",
                      "kubelet_root_dir", "containerd_dropin_dir"):
        assert getattr(distribution, attribute), attribute
    for ports in (distribution.control_plane_ports, distribution.node_ports):
        assert all(isinstance(port, int) and protocol in ("tcp", "udp")
                   for port, protocol in ports.values())


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("method", MEMBERS)
def test_its_methods_take_the_protocols_parameters(name, method):
    if method == "shared_join_token" and DISTRIBUTIONS[name].create_join_token is not None:
        # Only a distribution without per-node tokens has a shared one (the protocol's doc).
        assert not hasattr(DISTRIBUTIONS[name], method)
        return
    wanted = list(inspect.signature(getattr(Distribution, method)).parameters)
    offered = list(inspect.signature(getattr(DISTRIBUTIONS[name], method)).parameters)
    assert offered[:len(wanted)] == wanted


def test_a_distribution_without_a_token_step_makes_the_cluster_token():
    for cls in DISTRIBUTIONS.values():
        values = bare_metal_config()
        values["kubernetes"] = {"distribution": cls.name}
        distribution = cls(distribution_settings(settings_for(values)))
        secrets = {secret: "0" * 64 for secret in distribution.cluster_secrets}
        if distribution.create_join_token is None:
            assert distribution.shared_join_token("https://10.0.0.1:6443",
                                                  "-----BEGIN CERTIFICATE-----\n", secrets)
            assert set(distribution.cluster_secrets_env(secrets).values()) == {"0" * 64}
        else:
            assert distribution.cluster_secrets_env(secrets) == {}
