"""time.ntpServers: every machine's clock follows the site's NTP servers (configure-time),
over SSH and in the EC2 boot plans, where the Amazon Time Sync Service is the default; bad
values name the key; a stack that looks air-gapped without time servers is warned. The
script's side, with the real chronyd and systemd-timesyncd: tests/scripts/configure-time.bats."""

import pytest

from components.aws.boot import boot_scripts
from components.common.step_text import step_inputs
from components.distributions import distribution_for, distribution_settings
from components.hosts.steps import (
    REMOVE_CONFIGURE_TIME,
    HostProfile,
    HostSettings,
    preparation_steps,
)
from config.model import PackageSettings
from config.timesync import TimeSettings
from config.warnings import preview_warnings
from preview.engine import unwrap_secrets
from preview.host_files import _user_data
from tests.builders import bare_metal_config, cloud_config, hybrid_config, preview
from tests.config.loading import loads, problem_lines

SITE = ["ntp1.example.internal", "192.168.2.5"]


def time_steps(plan) -> dict[str, dict]:
    """Per machine, configure-time's inputs, over SSH (`<host>-configure-time`) and at boot
    (the resource whose user data holds the plan)."""
    found = {r.name: _own(step_inputs(unwrap_secrets(r.inputs["stdin"])))
             for r in plan.of_type("command:remote:Command")
             if r.name.endswith("-configure-time")}
    for resource, user_data in _user_data(plan):
        boot_scripts(user_data)
        found.update({f"{resource.name}@boot": _own(step_inputs(stdin))
                      for name, stdin in plan.boot_steps(user_data) if name == "configure-time"})
    return found


def _own(env: dict) -> dict:
    """The step's own inputs, without the host and step names every step gets."""
    return {key: value for key, value in env.items() if not key.startswith("GPU_CLUSTER_")}


def test_bare_metal_hosts_follow_the_sites_servers_before_anything_checks_a_certificate():
    values = bare_metal_config(workers=1)
    values["packages"] = {"aptMirror": "https://apt.example.internal/ubuntu"}
    values["time"] = {"ntpServers": SITE}
    plan = preview(values)
    steps = time_steps(plan)
    assert steps == {f"{host}-configure-time": {"NTP_SERVERS": "ntp1.example.internal 192.168.2.5",
                                                "NTS": "false"}
                     for host in ("controller", "gpu000")}
    for host in ("controller", "gpu000"):
        [step] = [r for r in plan.of_type("command:remote:Command")
                  if r.name == f"{host}-configure-time"]
        assert any(urn.endswith(f"::{host}-configure-apt") for urn in step.dependencies)
        [prepare] = [r for r in plan.of_type("command:remote:Command")
                     if r.name == f"{host}-prepare-host"]
        assert any(urn.endswith(f"::{host}-configure-time") for urn in prepare.dependencies)


def test_without_time_servers_no_machine_runs_the_step():
    assert time_steps(preview(bare_metal_config(workers=1))) == {}
    assert time_steps(preview(cloud_config())) == {}


def test_ec2_machines_follow_amazon_time_sync_unless_told_otherwise():
    values = hybrid_config(workers=1)
    values["time"] = {"ntpServers": SITE, "nts": True}
    steps = time_steps(preview(values))
    assert steps["gpu000-configure-time"] == {"NTP_SERVERS": " ".join(SITE), "NTS": "true"}
    # The EC2 controller, prepared over SSH: link-local, plain NTP only.
    [controller] = [env for name, env in steps.items() if name != "gpu000-configure-time"]
    assert controller == {"NTP_SERVERS": "169.254.169.123", "NTS": "false"}
    values["time"]["amazonTimeSync"] = False
    steps = time_steps(preview(values))
    assert {env["NTP_SERVERS"] for env in steps.values()} == {" ".join(SITE)}
    assert len(steps) == 2


def test_the_cloud_layouts_boot_plans_run_it():
    values = cloud_config()
    values["time"] = {"ntpServers": SITE}
    steps = time_steps(preview(values))
    boots = {name for name in steps if name.endswith("@boot")}
    assert len(boots) >= 2, steps  # the controller and the pool
    assert {env["NTP_SERVERS"] for env in steps.values()} == {"169.254.169.123"}


def test_the_step_follows_configure_apt_and_is_undone_when_the_key_goes():
    distribution = distribution_for(distribution_settings(loads(bare_metal_config(workers=1))))
    machine = HostProfile(gpus=0, install_driver=True, nvswitch="auto", ssh_port=22)
    packages = PackageSettings(apt_mirror="https://a.example/ubuntu")
    plain = preparation_steps(HostSettings(packages=packages, time=TimeSettings()),
                              distribution, machine)
    assert "configure-time" not in [step.step for step in plain]
    timed = preparation_steps(HostSettings(packages=packages,
                                           time=TimeSettings(ntp_servers=SITE)),
                              distribution, machine)
    assert [step.step for step in timed][:3] == ["configure-apt", "configure-time", "prepare-host"]
    assert timed[1].delete is REMOVE_CONFIGURE_TIME


@pytest.mark.parametrize("time, message", [
    ({"ntpServers": ["ntp1.example.internal $(id)"]}, "is neither an IP address nor a DNS name"),
    ({"ntpServers": ["ntp1.example.internal\nserver evil"]}, ""),
    ({"ntpServers": ["-x"]}, "is neither an IP address nor a DNS name"),
    ({"ntpServers": ["ntp1.example.internal", "NTP1.example.internal"]}, "more than once"),
    ({"ntpServers": [f"10.0.0.{n}" for n in range(9)]}, "at most 8"),
    ({"nts": True}, "nts needs ntpServers"),
    ({"ntpServers": "ntp1.example.internal"}, ""),
])
def test_bad_time_settings_name_their_key(time, message):
    values = bare_metal_config(workers=1)
    values["time"] = time
    problems = problem_lines(values)
    assert any(p.startswith("gpu-cluster:time") and message in p for p in problems), problems


def test_a_stack_with_an_apt_mirror_and_no_time_servers_is_warned_naming_the_key():
    values = bare_metal_config(workers=1)
    values["packages"] = {"aptMirror": "https://apt.example.internal/ubuntu"}
    [warning] = [w for w in preview_warnings(loads(values)) if "time.ntpServers" in w]
    assert "gpu-cluster:time.ntpServers is empty" in warning and "ntp.ubuntu.com" in warning
    values["time"] = {"ntpServers": SITE}
    assert not [w for w in preview_warnings(loads(values)) if "time.ntpServers" in w]
    assert not [w for w in preview_warnings(loads(bare_metal_config(workers=1)))
                if "time.ntpServers" in w]
