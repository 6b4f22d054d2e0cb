"""The machine lifecycle keys: hosts[].maintenance and hosts[].generation."""

import pytest

from tests.builders import bare_metal_config
from tests.config.loading import loads, problem_lines


def test_maintenance_and_generation_load_on_workers():
    values = bare_metal_config()
    values["hosts"][1].update(maintenance=True, generation=3)
    values["kubernetes"] = {"drainTimeoutSeconds": 900}
    settings = loads(values)
    assert settings.hosts[1].maintenance is True and settings.hosts[1].generation == 3
    assert settings.hosts[2].maintenance is None and settings.hosts[2].generation == 0
    assert settings.kubernetes.drain_timeout_seconds == 900


def test_a_controller_has_no_node_to_drain_and_cannot_be_rejoined():
    values = bare_metal_config()
    values["hosts"][0].update(maintenance=True, generation=1)
    found = problem_lines(values)
    assert any(p.startswith("gpu-cluster:hosts[0] (controller).maintenance") and "no node" in p
               for p in found), found
    assert any(p.startswith("gpu-cluster:hosts[0] (controller).generation") for p in found), found


@pytest.mark.parametrize("key, value", [("generation", -1), ("maintenance", "drain")])
def test_bad_values_name_the_key(key, value):
    values = bare_metal_config()
    values["hosts"][2][key] = value
    found = problem_lines(values)
    assert any(p.startswith(f"gpu-cluster:hosts[2] (gpu001).{key}") for p in found), found


def test_the_drain_timeout_is_bounded():
    values = bare_metal_config()
    values["kubernetes"] = {"drainTimeoutSeconds": 5}
    assert any(p.startswith("gpu-cluster:kubernetes.drainTimeoutSeconds")
               for p in problem_lines(values))


def test_drain_force_is_off_by_default_and_a_boolean():
    values = bare_metal_config()
    assert loads(values).kubernetes.drain_force is False
    values["kubernetes"] = {"drainForce": "sometimes"}
    found = problem_lines(values)
    assert any(p.startswith("gpu-cluster:kubernetes.drainForce") for p in found), found
