"""A raised kubernetes.version through the offline preview: only the upgrade steps (and
the controller's install step, which upgrades the controller) change, the controller
first, the workers in batches of kubernetes.upgrade.maxUnavailable."""

import re

import pytest

from config import versions
from tests.conftest import bare_metal_config, preview

UPGRADE_STEPS = ("drain-node", "upgrade-node", "uncordon-node")
NEXT_K0S = "v1.37.0+k0s.0"


def _config(workers: int, max_unavailable=None, version=None, distribution=None) -> dict:
    values = bare_metal_config(workers=workers)
    kubernetes: dict = {}
    if distribution:
        kubernetes["distribution"] = distribution
    if version:
        kubernetes["version"] = version
    if max_unavailable is not None:
        kubernetes["upgrade"] = {"maxUnavailable": max_unavailable}
    if kubernetes:
        values["kubernetes"] = kubernetes
    return values


def _stdin(plan) -> dict[str, str]:
    # Tokens, the CA and generated secrets are fresh per preview: compare the rest.
    return {r.name: re.sub(r"(TOKEN|CA_CERT|CA_KEY)='[^']*'", "", plan.redact(r.inputs["stdin"]))
            for r in plan.of_type("command:remote:Command")}


def _changed(before, after) -> set[str]:
    a, b = _stdin(before), _stdin(after)
    assert set(a) == set(b)
    return {name for name in a if a[name] != b[name]}


def _deps(plan, name: str) -> set[str]:
    return {plan.by_urn[d].name for d in plan.custom_dependencies(plan.named(name))}


@pytest.mark.parametrize("distribution,version", [
    ("k0s", NEXT_K0S), ("rke2", "v1.37.0+rke2r1")])
def test_a_version_bump_changes_only_the_upgrade_steps(distribution, version):
    before = preview(_config(3, distribution=distribution))
    after = preview(_config(3, distribution=distribution, version=version))
    workers = [f"gpu{i:03d}" for i in range(3)]
    assert _changed(before, after) == {
        "controller-check-version", "controller-install-controller"} | {
        f"{w}-{step}" for w in workers for step in UPGRADE_STEPS}
    # Nothing is added, removed or renamed: no replacement, no reset.
    assert sorted(r.urn for r in before.resources) == sorted(r.urn for r in after.resources)


@pytest.mark.parametrize("max_unavailable,batches", [
    (None, [[0], [1], [2], [3], [4]]),
    (2, [[0, 1], [2, 3], [4]]),
    ("40%", [[0, 1], [2, 3], [4]]),
    ("10%", [[0], [1], [2], [3], [4]]),
    ("100%", [[0, 1, 2, 3, 4]]),
])
def test_workers_upgrade_in_batches_after_the_controller(max_unavailable, batches):
    plan = preview(_config(5, max_unavailable=max_unavailable))
    previous: list[str] = []
    for batch in batches:
        for index in batch:
            drain = _deps(plan, f"gpu{index:03d}-drain-node")
            # Controller first; then each batch after the whole previous one is Ready.
            assert drain == {"controller-install-controller"} | {
                f"gpu{p:03d}-uncordon-node" for p in previous}
            assert _deps(plan, f"gpu{index:03d}-upgrade-node") == {
                f"gpu{index:03d}-drain-node", f"gpu{index:03d}-verify-boot"}
            assert _deps(plan, f"gpu{index:03d}-uncordon-node") == {
                f"gpu{index:03d}-upgrade-node"}
        previous = batch
    assert _deps(plan, "controller-install-controller") >= {"controller-check-version"}


def test_the_steps_inputs_name_the_version_and_the_bounds():
    from preview.report import step_inputs

    values = _config(1, version=NEXT_K0S)
    values["kubernetes"]["upgrade"] = {"drainTimeoutSeconds": 120}
    plan = preview(values)

    def inputs(name):
        return step_inputs(plan.redact(plan.named(name).inputs["stdin"]))
    assert inputs("gpu000-drain-node").items() >= {
        "NODE_NAME": "gpu000", "KUBERNETES_VERSION": NEXT_K0S, "DRAIN_TIMEOUT": "120",
        "KUBECTL": "/usr/local/bin/k0s kubectl"}.items()
    assert inputs("gpu000-upgrade-node")["K0S_VERSION"] == NEXT_K0S
    assert inputs("gpu000-uncordon-node")["NODE_READY_TIMEOUT"] == "600"
    assert inputs("controller-check-version")["KUBERNETES_VERSION"] == NEXT_K0S
    # The join carries no version: a bump never re-runs it.
    assert "K0S_VERSION" not in inputs("gpu000-join-worker")
    assert inputs("controller-install-controller")["K0S_VERSION"] == NEXT_K0S
    assert versions.K0S != NEXT_K0S


@pytest.mark.parametrize("value", [0, "0%", "101%", "25", "25 %", True, "1.5"])
def test_max_unavailable_is_a_count_or_a_percentage(value):
    from config.model import UpgradeSettings
    from pydantic import ValidationError

    if value == "25":  # text digits are a count, as `pulumi config set --path` gives them
        assert UpgradeSettings(maxUnavailable=value).max_unavailable == 25
        return
    with pytest.raises(ValidationError, match="count of workers"):
        UpgradeSettings(maxUnavailable=value)
