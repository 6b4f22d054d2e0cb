"""The credential rotation keys: access.certificateGeneration and
kubernetes.adminCertificateGeneration, whole numbers from 0."""

import pytest

from config import ConfigError, load
from tests.conftest import as_cli_config, bare_metal_config

KEYS = [("access", "certificateGeneration"), ("kubernetes", "adminCertificateGeneration")]


def problems(values: dict) -> list[str]:
    cli = as_cli_config(values)
    with pytest.raises(ConfigError) as caught:
        load(cli.config, cli.secret_keys, stack="test")
    return [str(problem) for problem in caught.value.problems]


def test_generations_load_and_default_to_zero():
    values = bare_metal_config()
    cli = as_cli_config(values)
    settings = load(cli.config, cli.secret_keys, stack="test")
    assert settings.access.certificate_generation == 0
    assert settings.kubernetes.admin_certificate_generation == 0
    values.update(access={"certificateGeneration": 2},
                  kubernetes={"adminCertificateGeneration": 5})
    cli = as_cli_config(values)
    settings = load(cli.config, cli.secret_keys, stack="test")
    assert settings.access.certificate_generation == 2
    assert settings.kubernetes.admin_certificate_generation == 5


@pytest.mark.parametrize("value, why", [
    (-1, "greater than or equal to 0"), (1.5, "whole number"), (True, "whole number"),
    (1_000_001, "less than or equal to 1000000")])
def test_bad_generations_are_named_together(value, why):
    values = bare_metal_config()
    for section, key in KEYS:
        values[section] = {key: value}
    found = problems(values)
    for section, key in KEYS:
        assert any(p.startswith(f"gpu-cluster:{section}.{key}: ") and why in p
                   for p in found), found
