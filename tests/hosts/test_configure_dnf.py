"""packages.epel: every machine prepared over SSH gets configure-dnf (EPEL 9 and CRB on RHEL 9
family hosts; Ubuntu hosts log and change nothing) before anything installs a package, with
EPEL's pinned key and the mirror when one is set; no step without the key, none in the EC2
boot plans (their images are Ubuntu's). The script's side: tests/scripts/configure-dnf.bats
and configure-dnf-dnf.bats (the real dnf)."""

from components.common.step_text import step_inputs
from components.distributions import distribution_for, distribution_settings
from components.hosts.steps import (
    REMOVE_CONFIGURE_DNF,
    HostProfile,
    HostSettings,
    preparation_steps,
)
from config import versions
from config.model import PackageSettings
from preview.engine import unwrap_secrets
from preview.host_files import _user_data
from tests.builders import bare_metal_config, cloud_config, preview
from tests.config.loading import loads

PIN = "FF8AD1344597106ECE813B918A3872BF3228467C"


def dnf_steps(plan) -> dict[str, dict]:
    return {r.name: {key: value for key, value in
                     step_inputs(unwrap_secrets(r.inputs["stdin"])).items()
                     if not key.startswith("GPU_CLUSTER_")}
            for r in plan.of_type("command:remote:Command") if r.name.endswith("-configure-dnf")}


def test_the_pin_is_epel_9s_key():
    assert versions.EPEL_9_KEY_FINGERPRINT == PIN


def test_every_host_gets_configure_dnf_with_the_pinned_key_before_prepare_host():
    values = bare_metal_config(workers=1)
    values["packages"] = {"epel": True}
    plan = preview(values)
    assert dnf_steps(plan) == {f"{host}-configure-dnf": {"EPEL_KEY_FINGERPRINT": PIN}
                               for host in ("controller", "gpu000")}
    for host in ("controller", "gpu000"):
        [prepare] = [r for r in plan.of_type("command:remote:Command")
                     if r.name == f"{host}-prepare-host"]
        assert any(urn.endswith(f"::{host}-configure-dnf") for urn in prepare.dependencies), \
            prepare.dependencies


def test_the_mirror_reaches_the_step():
    values = bare_metal_config(workers=1)
    values["packages"] = {"epel": True, "epelMirror": "file:///srv/mirror/epel"}
    steps = dnf_steps(preview(values))
    assert {env["EPEL_MIRROR"] for env in steps.values()} == {"file:///srv/mirror/epel"}


def test_no_step_without_the_key():
    assert dnf_steps(preview(bare_metal_config(workers=1))) == {}


def test_the_ec2_boot_plans_get_none():
    values = cloud_config()
    values["packages"] = {"epel": True}
    plan = preview(values)
    names = [name for _, user_data in _user_data(plan)
             for name, _ in plan.boot_steps(user_data)]
    assert "prepare-host" in names and "configure-dnf" not in names


def test_the_step_comes_after_configure_apt_and_is_undone_when_the_key_goes():
    distribution = distribution_for(distribution_settings(loads(bare_metal_config(workers=1))))
    machine = HostProfile(gpus=1, install_driver=True, nvswitch="auto", ssh_port=22)
    packages = PackageSettings(apt_mirror="https://a.example/ubuntu", epel=True)
    over_ssh = preparation_steps(HostSettings(packages=packages), distribution, machine,
                                 preflight_env={})
    names = [step.step for step in over_ssh]
    assert names[:4] == ["preflight", "configure-apt", "configure-dnf", "prepare-host"]
    assert over_ssh[2].delete is REMOVE_CONFIGURE_DNF
    assert over_ssh[2].env == {"EPEL_KEY_FINGERPRINT": PIN}
    at_boot = preparation_steps(HostSettings(packages=packages), distribution, machine)
    assert "configure-dnf" not in [step.step for step in at_boot]
    plain = preparation_steps(HostSettings(), distribution, machine, preflight_env={})
    assert "configure-dnf" not in [step.step for step in plain]
