"""The release file, its airgap image bundle, Ubuntu's and NVIDIA's apt repositories from the
site's own places: the keys reach the steps that download (k0s and RKE2 alike; the scripts'
side is in tests/scripts/install-controller.bats, rke2-server.bats, airgap-bundle.bats,
configure-apt.bats and install-nvidia.bats), bad values name their key, and nothing changes
for a stack without them."""

import pytest

from components.common.step_text import step_inputs
from components.distributions import distribution_for, distribution_settings
from components.hosts.steps import (
    REMOVE_CONFIGURE_APT,
    HostProfile,
    HostSettings,
    preparation_steps,
)
from config.model import PackageSettings
from preview.engine import unwrap_secrets
from tests.config.loading import loads, problem_lines
from tests.builders import bare_metal_config, preview


def step_env(plan, suffix: str) -> dict:
    [resource] = [r for r in plan.of_type("command:remote:Command") if r.name == suffix]
    return step_inputs(unwrap_secrets(resource.inputs["stdin"]))


@pytest.mark.parametrize("distribution, variable", [("k0s", "K0S_RELEASE_URL"),
                                                    ("rke2", "RKE2_RELEASE_URL")])
def test_the_release_and_the_toolkit_come_from_the_sites_places(distribution, variable):
    values = bare_metal_config(workers=1)
    values["kubernetes"] = {"distribution": distribution,
                            "releaseUrl": f"https://files.example.internal/{distribution}"}
    values["nvidia"] = {"aptMirror": "file:///srv/mirror/nvidia"}
    plan = preview(values)
    installs = [step_inputs(unwrap_secrets(r.inputs["stdin"]))
                for r in plan.of_type("command:remote:Command")
                if variable in step_inputs(unwrap_secrets(r.inputs["stdin"]))]
    assert len(installs) >= 2  # the controller's install and the worker's join
    assert {env[variable] for env in installs} == {f"https://files.example.internal/{distribution}"}
    # The pinned sha256 goes with it: the same check as from GitHub.
    assert all(env[f"{variable.split('_')[0]}_SHA256_AMD64"] for env in installs)
    assert step_env(plan, "gpu000-install-nvidia")["NVIDIA_APT_MIRROR"] == "file:///srv/mirror/nvidia"


def test_without_them_the_steps_name_none():
    plan = preview(bare_metal_config(workers=1))
    for resource in plan.of_type("command:remote:Command"):
        inputs = step_inputs(unwrap_secrets(resource.inputs["stdin"]))
        assert not {"K0S_RELEASE_URL", "NVIDIA_APT_MIRROR"} & set(inputs)


@pytest.mark.parametrize("key, value", [
    ("kubernetes.releaseUrl", "ftp://files.example.internal/k0s"),
    ("kubernetes.releaseUrl", "https://user:pw@files.example.internal/k0s"),
    ("kubernetes.releaseUrl", "https://files.example.internal/k0s?ref=1"),
    ("kubernetes.releaseUrl", "file:///srv/../etc"),
    ("nvidia.aptMirror", "https://apt.example.internal/nvidia $(id)"),
    ("nvidia.aptMirror", "file://"),
])
def test_a_bad_download_location_names_its_key(key, value):
    values = bare_metal_config(workers=1)
    section, field = key.split(".")
    values[section] = {field: value}
    problems = problem_lines(values)
    assert any(p.startswith(f"gpu-cluster:{key}: ") and "is not a download location" in p
               for p in problems), problems


def test_ubuntus_packages_come_from_the_sites_mirror_before_anything_installs_one():
    values = bare_metal_config(workers=1)
    values["packages"] = {"aptMirror": "https://apt.example.internal/ubuntu",
                          "aptSecurityMirror": "file:///srv/mirror/ubuntu-security"}
    plan = preview(values)
    for host in ("controller", "gpu000"):
        env = step_env(plan, f"{host}-configure-apt")
        assert env["UBUNTU_APT_MIRROR"] == "https://apt.example.internal/ubuntu"
        assert env["UBUNTU_APT_SECURITY_MIRROR"] == "file:///srv/mirror/ubuntu-security"
        [prepare] = [r for r in plan.of_type("command:remote:Command")
                     if r.name == f"{host}-prepare-host"]
        assert any(urn.endswith(f"::{host}-configure-apt") for urn in prepare.dependencies), \
            prepare.dependencies


def test_the_steps_run_configure_apt_only_with_a_mirror_and_undo_it_when_it_goes():
    distribution = distribution_for(distribution_settings(loads(bare_metal_config(workers=1))))
    machine = HostProfile(gpus=0, install_driver=True, nvswitch="auto", ssh_port=22)
    plain = preparation_steps(HostSettings(packages=PackageSettings()), distribution, machine)
    assert "configure-apt" not in [step.step for step in plain]
    mirrored = preparation_steps(HostSettings(packages=PackageSettings(
        apt_mirror="https://a.example/ubuntu")), distribution, machine)
    assert [step.step for step in mirrored][:2] == ["configure-apt", "prepare-host"]
    assert mirrored[0].delete is REMOVE_CONFIGURE_APT


@pytest.mark.parametrize("distribution, prefix", [("k0s", "K0S"), ("rke2", "RKE2")])
def test_the_airgap_bundles_sha256_reaches_install_and_join(distribution, prefix):
    values = bare_metal_config(workers=1)
    values["kubernetes"] = {"distribution": distribution,
                            "releaseUrl": f"https://files.example.internal/{distribution}"}
    values["versions"] = {"airgapBundleSha256": {"amd64": "a" * 64}}
    plan = preview(values)
    installs = [step_inputs(unwrap_secrets(r.inputs["stdin"]))
                for r in plan.of_type("command:remote:Command")
                if f"{prefix}_RELEASE_URL" in step_inputs(unwrap_secrets(r.inputs["stdin"]))]
    assert len(installs) >= 2  # the controller's install and the worker's join
    assert all(env[f"{prefix}_AIRGAP_SHA256_AMD64"] == "a" * 64 for env in installs)
    assert not any(f"{prefix}_AIRGAP_SHA256_ARM64" in env for env in installs)


def test_without_an_airgap_sha256_no_step_names_one():
    plan = preview(bare_metal_config(workers=1))
    for resource in plan.of_type("command:remote:Command"):
        assert not any("AIRGAP" in key for key in step_inputs(unwrap_secrets(resource.inputs["stdin"])))


@pytest.mark.parametrize("key, value, message", [
    ("packages.aptMirror", "https://apt.example.internal/ubuntu $(id)", "is not a download location"),
    ("packages.aptSecurityMirror", "ftp://apt.example.internal/ubuntu", "is not a download location"),
    ("versions.airgapBundleSha256", {"amd64": "ABC"}, "String should match pattern"),
    ("versions.airgapBundleSha256", {"s390x": "a" * 64}, ""),
])
def test_a_bad_mirror_or_bundle_sum_names_its_key(key, value, message):
    values = bare_metal_config(workers=1)
    section, field = key.split(".")
    values[section] = {"aptMirror": "https://apt.example.internal/ubuntu", field: value} \
        if section == "packages" else {field: value}
    problems = problem_lines(values)
    assert any(p.startswith(f"gpu-cluster:{key}") and message in p for p in problems), problems


def test_an_epel_mirror_needs_epel_and_must_be_a_download_location():
    values = bare_metal_config(workers=1)
    values["packages"] = {"epelMirror": "https://rpm.example.internal/epel"}
    assert problem_lines(values) == [
        "gpu-cluster:packages: epelMirror needs epel: true: configure-dnf adds EPEL only then"]
    values["packages"] = {"epel": True, "epelMirror": "https://rpm.example.internal/epel $(id)"}
    problems = problem_lines(values)
    assert any(p.startswith("gpu-cluster:packages.epelMirror") and "is not a download location"
               in p for p in problems), problems


def test_a_security_mirror_needs_the_archive_mirror():
    values = bare_metal_config(workers=1)
    values["packages"] = {"aptSecurityMirror": "https://apt.example.internal/ubuntu"}
    assert problem_lines(values) == [
        "gpu-cluster:packages: aptSecurityMirror needs aptMirror: apt reads both from the file "
        "configure-apt writes"]
