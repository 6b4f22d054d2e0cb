"""The machine lifecycle keys: hosts[].maintenance and hosts[].generation."""

import pytest

from config import ConfigError, load
from tests.builders import as_cli_config, bare_metal_config


def problems(values: dict) -> list[str]:
    cli = as_cli_config(values)
    with pytest.raises(ConfigError) as caught:
        load(cli.config, cli.secret_keys, stack="test")
    return [str(problem) for problem in caught.value.problems]


def test_maintenance_and_generation_load_on_workers():
    values = bare_metal_config()
    values["hosts"][1].update(maintenance=True, generation=3)
    values["kubernetes"] = {"drainTimeoutSeconds": 900}
    cli = as_cli_config(values)
    settings = load(cli.config, cli.secret_keys, stack="test")
    assert settings.hosts[1].maintenance is True and settings.hosts[1].generation == 3
    assert settings.hosts[2].maintenance is None and settings.hosts[2].generation == 0
    assert settings.kubernetes.drain_timeout_seconds == 900


def test_a_controller_has_no_node_to_drain_and_cannot_be_rejoined():
    values = bare_metal_config()
    values["hosts"][0].update(maintenance=True, generation=1)
    found = problems(values)
    assert any(p.startswith("gpu-cluster:hosts[0] (controller).maintenance") and "no node" in p
               for p in found), found
    assert any(p.startswith("gpu-cluster:hosts[0] (controller).generation") for p in found), found


@pytest.mark.parametrize("key, value", [("generation", -1), ("maintenance", "drain")])
def test_bad_values_name_the_key(key, value):
    values = bare_metal_config()
    values["hosts"][2][key] = value
    found = problems(values)
    assert any(p.startswith(f"gpu-cluster:hosts[2] (gpu001).{key}") for p in found), found


def test_the_drain_timeout_is_bounded():
    values = bare_metal_config()
    values["kubernetes"] = {"drainTimeoutSeconds": 5}
    assert any(p.startswith("gpu-cluster:kubernetes.drainTimeoutSeconds")
               for p in problems(values))


def test_drain_force_is_off_by_default_and_a_boolean():
    values = bare_metal_config()
    cli = as_cli_config(values)
    assert load(cli.config, cli.secret_keys, stack="test").kubernetes.drain_force is False
    values["kubernetes"] = {"drainForce": "sometimes"}
    found = problems(values)
    assert any(p.startswith("gpu-cluster:kubernetes.drainForce") for p in found), found
