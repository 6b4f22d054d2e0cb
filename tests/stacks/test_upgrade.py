"""A raised kubernetes.version through the offline preview: only the upgrade steps (and
the controller's install step, which upgrades the controller) change, the controller
first; no worker's steps wait for another's (the drain steps keep
kubernetes.upgrade.maxUnavailable on the controller, tests/scripts/upgrade.bats)."""


import pytest

from config import versions
from tests.stacks.steps import changed_steps, waits_for
from tests.builders import bare_metal_config, preview

UPGRADE_STEPS = ("drain-node", "upgrade-node", "uncordon-node")
NEXT_K0S = "v1.37.0+k0s.0"


# A release the project pins no sha256 for comes with its own (config/release_pins.py);
# these stand in for the release's files.
NEXT_RELEASE_SHA256 = {"releaseSha256": {"amd64": "a" * 64, "arm64": "b" * 64}}


def _config(workers: int, max_unavailable=None, version=None, distribution=None) -> dict:
    values = bare_metal_config(workers=workers)
    kubernetes: dict = {}
    if distribution:
        kubernetes["distribution"] = distribution
    if version:
        kubernetes["version"] = version
        values["versions"] = NEXT_RELEASE_SHA256
    if max_unavailable is not None:
        kubernetes["upgrade"] = {"maxUnavailable": max_unavailable}
    if kubernetes:
        values["kubernetes"] = kubernetes
    return values


@pytest.mark.parametrize("distribution,version", [
    ("k0s", NEXT_K0S), ("rke2", "v1.37.0+rke2r1")])
def test_a_version_bump_changes_only_the_upgrade_steps(distribution, version):
    before = preview(_config(3, distribution=distribution))
    after = preview(_config(3, distribution=distribution, version=version))
    workers = [f"gpu{i:03d}" for i in range(3)]
    assert changed_steps(before, after) == {
        "controller-check-version", "controller-install-controller"} | {
        f"{w}-{step}" for w in workers for step in UPGRADE_STEPS}
    # Nothing is added, removed or renamed: no replacement, no reset.
    assert sorted(r.urn for r in before.resources) == sorted(r.urn for r in after.resources)


def test_workers_steps_wait_for_the_controller_and_their_own_only():
    plan = preview(_config(5))
    workers = [f"gpu{i:03d}" for i in range(5)]
    for worker in workers:
        assert waits_for(plan, f"{worker}-drain-node") == {"controller-install-controller"}
        assert waits_for(plan, f"{worker}-upgrade-node") == {
            f"{worker}-drain-node", f"{worker}-verify-boot"}
        # After the node's admission too: a new host's node gets its host settings
        # recorded (tests/stacks/test_host_upgrade.py).
        assert waits_for(plan, f"{worker}-uncordon-node") == {
            f"{worker}-upgrade-node", f"{worker}-admit-node"}
        # No step of this worker waits for another worker's: a new cluster joins its
        # workers at once, whatever maxUnavailable is.
        for command in plan.of_type("command:remote:Command"):
            if command.name.startswith(f"{worker}-"):
                others = {d for d in waits_for(plan, command.name)
                          if d.split("-")[0] in workers and not d.startswith(f"{worker}-")}
                assert not others, (command.name, others)
    assert waits_for(plan, "controller-install-controller") >= {"controller-check-version"}


@pytest.mark.parametrize("max_unavailable,count", [
    (None, 1), (2, 2), ("40%", 2), ("10%", 1), ("100%", 5), (9, 5), ("59%", 2)])
def test_max_unavailable_reaches_the_drain_steps_as_a_count(max_unavailable, count):
    # A percentage of the 5 workers rounds down, at least 1; a count above the workers
    # is all of them.
    from components.common.step_text import step_inputs

    plan = preview(_config(5, max_unavailable=max_unavailable))
    for index in range(5):
        inputs = step_inputs(plan.redact(plan.named(f"gpu{index:03d}-drain-node").inputs["stdin"]))
        assert inputs["MAX_UNAVAILABLE"] == str(count)
        # One worker's whole upgrade: drain (600) + upgrade-node (900) + Ready (600).
        assert inputs["SLOT_WAIT_TIMEOUT"] == "2100"


def test_the_steps_inputs_name_the_version_and_the_bounds():
    from components.common.step_text import step_inputs

    values = _config(1, version=NEXT_K0S)
    values["kubernetes"]["drainTimeoutSeconds"] = 120
    plan = preview(values)

    def inputs(name):
        return step_inputs(plan.redact(plan.named(name).inputs["stdin"]))
    assert inputs("gpu000-drain-node").items() >= {
        "NODE_NAME": "gpu000", "KUBERNETES_VERSION": NEXT_K0S, "DRAIN_TIMEOUT": "120",
        "KUBECTL": "/usr/local/bin/k0s kubectl"}.items()
    assert inputs("gpu000-upgrade-node").items() >= {
        "K0S_VERSION": NEXT_K0S, "NODE_NAME": "gpu000"}.items()
    assert inputs("gpu000-uncordon-node")["NODE_READY_TIMEOUT"] == "600"
    assert inputs("controller-check-version")["KUBERNETES_VERSION"] == NEXT_K0S
    # The join carries no version: a bump never re-runs it.
    assert "K0S_VERSION" not in inputs("gpu000-join-worker")
    assert inputs("controller-install-controller")["K0S_VERSION"] == NEXT_K0S
    assert versions.K0S != NEXT_K0S


@pytest.mark.parametrize("value", [0, "0%", "101%", "25", "25 %", True, "1.5"])
def test_max_unavailable_is_a_count_or_a_percentage(value):
    from config.kubernetes import UpgradeSettings
    from pydantic import ValidationError

    if value == "25":  # text digits are a count, as `pulumi config set --path` gives them
        assert UpgradeSettings(maxUnavailable=value).max_unavailable == 25
        return
    with pytest.raises(ValidationError, match="count of workers"):
        UpgradeSettings(maxUnavailable=value)


@pytest.mark.parametrize("distribution,version", [
    ("k0s", NEXT_K0S), ("rke2", "v1.37.0+rke2r1")])
def test_cloud_upgrades_its_controller_over_ssh_before_the_pools_boot_the_new_version(
        distribution, version):
    from components.common.step_text import step_inputs
    from tests.builders import cloud_config

    def config(new_version=None):
        values = cloud_config()
        values["kubernetes"] = {"distribution": distribution,
                                **({"version": new_version} if new_version else {})}
        if new_version:
            values["versions"] = NEXT_RELEASE_SHA256
        return values
    before, after = preview(config()), preview(config(version))
    # The instance installs itself at boot; once its API answers, the same check and
    # install step run over SSH, which a raised version re-runs: the controller first.
    assert waits_for(after, "control-plane-check-version") >= {"control-plane-wait-for-api"}
    assert waits_for(after, "control-plane-install-controller") >= {
        "control-plane-wait-for-api", "control-plane-check-version"}
    assert changed_steps(before, after) == {
        "control-plane-check-version", "control-plane-install-controller"}
    install = step_inputs(after.redact(after.named("control-plane-install-controller")
                                       .inputs["stdin"]))
    assert version in install.values()
    # Each pool's launch template (the version in its user data) waits for that upgrade.
    templates = after.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert templates
    for template in templates:
        assert "control-plane-install-controller" in {
            after.by_urn[d].name for d in after.custom_dependencies(template)}
