"""The credential rotation keys: access.certificateGeneration and
kubernetes.adminCertificateGeneration, whole numbers from 0; vpn.pkiGeneration and
vpn.previousCaTrusted, which rotate the VPN's PKI."""

import pytest

from tests.builders import bare_metal_config, hybrid_config
from tests.config.loading import loads, problem_lines

KEYS = [("access", "certificateGeneration"), ("kubernetes", "adminCertificateGeneration")]


def test_generations_load_and_default_to_zero():
    values = bare_metal_config()
    settings = loads(values)
    assert settings.access.certificate_generation == 0
    assert settings.kubernetes.admin_certificate_generation == 0
    values.update(access={"certificateGeneration": 2},
                  kubernetes={"adminCertificateGeneration": 5})
    settings = loads(values)
    assert settings.access.certificate_generation == 2
    assert settings.kubernetes.admin_certificate_generation == 5


@pytest.mark.parametrize("value, why", [
    (-1, "greater than or equal to 0"), (1.5, "whole number"), (True, "whole number"),
    (1_000_001, "less than or equal to 1000000")])
def test_bad_generations_are_named_together(value, why):
    values = bare_metal_config()
    for section, key in KEYS:
        values[section] = {key: value}
    found = problem_lines(values)
    for section, key in KEYS:
        assert any(p.startswith(f"gpu-cluster:{section}.{key}: ") and why in p
                   for p in found), found


def hybrid_with_vpn(**fields) -> dict:
    values = hybrid_config()
    values["vpn"].update(fields)
    return values


def test_the_vpn_pki_generation_loads_and_defaults_to_zero():
    vpn = loads(hybrid_config()).vpn
    assert (vpn.pki_generation, vpn.previous_ca_trusted) == (0, False)
    vpn = loads(hybrid_with_vpn(pkiGeneration=3, previousCaTrusted=True)).vpn
    assert (vpn.pki_generation, vpn.previous_ca_trusted) == (3, True)


def test_bad_vpn_rotation_values_are_named_together():
    found = problem_lines(hybrid_with_vpn(pkiGeneration=-1, previousCaTrusted="perhaps"))
    assert any(p.startswith("gpu-cluster:vpn.pkiGeneration: ")
               and "greater than or equal to 0" in p for p in found), found
    assert any(p.startswith("gpu-cluster:vpn.previousCaTrusted: ") for p in found), found


def test_a_previous_ca_needs_a_raised_generation():
    found = problem_lines(hybrid_with_vpn(previousCaTrusted=True))
    assert found == ["gpu-cluster:vpn.previousCaTrusted: there is no previous CA at "
                     "vpn.pkiGeneration 0: raise vpn.pkiGeneration by one in the same change "
                     "to start a rotation"]


def test_an_existing_server_has_no_pki_of_ours_to_rotate():
    values = hybrid_config()
    values["vpn"] = {"mode": "client-to-existing", "existingServerAddress": "192.168.2.1",
                     "pkiGeneration": 1, "previousCaTrusted": True}
    values["vpnClientProfile"] = "client\ndev tun\nremote vpn.example.com 1194\n"
    found = problem_lines(values)
    for key in ("pkiGeneration", "previousCaTrusted"):
        assert f"gpu-cluster:vpn.{key}: is only used with vpn.mode server-on-ec2" in found, found
