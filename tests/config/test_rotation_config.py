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


@pytest.mark.parametrize("value", [-1, 1.5, True, 1_000_001])
def test_bad_generations_are_named_together(value):
    values = bare_metal_config()
    for section, key in KEYS:
        values[section] = {key: value}
    found = problems(values)
    for section, key in KEYS:
        assert any(p.startswith(f"gpu-cluster:{section}.{key}") for p in found), found
