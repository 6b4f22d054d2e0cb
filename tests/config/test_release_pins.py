"""Every release file the distribution scripts download is checked against a sha256 pinned
in config/versions.py (or given in `gpu-cluster:versions`), never against a checksum file
of the same release; a version without one is refused before anything is planned."""

import pytest

from components.distributions import distribution_for, distribution_settings
from config import versions
from tests.builders import bare_metal_config
from tests.config.loading import loads, problems_of

SHA = "0123456789abcdef" * 4


def with_kubernetes(distribution: str, version: str = "", **extra) -> dict:
    values = bare_metal_config()
    values["kubernetes"] = {"distribution": distribution, **({"version": version} if version else {})}
    values.update(extra)
    return values


@pytest.mark.parametrize("distribution", sorted(versions.DISTRIBUTIONS))
def test_each_pin_has_a_sha256_per_architecture(distribution):
    pin = versions.DISTRIBUTIONS[distribution].pin
    sums = versions.RELEASE_SHA256[distribution][pin]
    assert sorted(sums) == sorted(versions.RELEASE_ARCHITECTURES)
    assert all(len(value) == 64 and set(value) <= set("0123456789abcdef") for value in sums.values())
    assert len(set(sums.values())) == len(sums)


@pytest.mark.parametrize("distribution", sorted(versions.DISTRIBUTIONS))
def test_the_scripts_get_the_pinned_sha256(distribution):
    prefix = distribution.upper()
    env = distribution_for(distribution_settings(loads(with_kubernetes(distribution)))).version_env()
    pin = versions.DISTRIBUTIONS[distribution].pin
    assert env == {f"{prefix}_VERSION": pin,
                   f"{prefix}_SHA256_AMD64": versions.RELEASE_SHA256[distribution][pin]["amd64"],
                   f"{prefix}_SHA256_ARM64": versions.RELEASE_SHA256[distribution][pin]["arm64"]}


def test_a_version_without_a_pinned_sha256_is_refused_naming_the_key():
    problems = problems_of(with_kubernetes("k0s", "v1.36.4+k0s.0"))
    assert [path for path, _ in problems] == ["versions.releaseSha256"]
    assert "k0s v1.36.4+k0s.0 has no pinned sha256" in problems[0][1]
    assert "k0s-<version>-<arch>" in problems[0][1]


def test_a_version_with_its_sha256_in_config_reaches_the_scripts():
    values = with_kubernetes("rke2", "v1.36.4+rke2r1", versions={"releaseSha256": {"amd64": SHA}})
    env = distribution_for(distribution_settings(loads(values))).version_env()
    assert env == {"RKE2_VERSION": "v1.36.4+rke2r1", "RKE2_SHA256_AMD64": SHA,
                   "RKE2_SHA256_ARM64": ""}


def test_a_configured_sha256_replaces_the_pinned_one():
    values = with_kubernetes("k0s", versions={"releaseSha256": {"arm64": SHA}})
    env = distribution_for(distribution_settings(loads(values))).version_env()
    assert env["K0S_SHA256_ARM64"] == SHA
    assert env["K0S_SHA256_AMD64"] == versions.RELEASE_SHA256["k0s"][versions.K0S]["amd64"]


@pytest.mark.parametrize("value", [SHA.upper(), SHA[:63], SHA + "0", SHA + "\n", " " + SHA,
                                   SHA[:60] + "; rm", ""])
def test_a_sha256_is_matched_whole(value):
    values = with_kubernetes("k0s", versions={"releaseSha256": {"amd64": value}})
    paths = [path for path, _ in problems_of(values)]
    # A line break is refused by the rule for all text, at the map.
    assert paths in (["versions.releaseSha256.amd64"], ["versions.releaseSha256"]), paths


def test_only_known_architectures():
    values = with_kubernetes("k0s", versions={"releaseSha256": {"riscv64": SHA}})
    assert [path for path, _ in problems_of(values)] == ["versions.releaseSha256.riscv64 (the key)"]


def test_install_nvidia_gets_the_pinned_repository_key():
    from components.hosts.steps import install_nvidia_env
    settings = loads(with_kubernetes("k0s"))
    env = install_nvidia_env(settings.nvidia,
                             distribution_for(distribution_settings(settings)))
    assert env["NVIDIA_REPO_KEY_FINGERPRINT"] == versions.NVIDIA_CONTAINER_TOOLKIT_KEY_FINGERPRINT
    assert len(versions.NVIDIA_CONTAINER_TOOLKIT_KEY_FINGERPRINT) == 40
