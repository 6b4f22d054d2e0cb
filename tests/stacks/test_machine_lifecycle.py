"""Machine lifecycle through whole stacks: maintenance (hosts[].maintenance) cordons and
drains from the controller, a replaced machine (hosts[].generation) runs its steps again
after its old node is removed, and neither replaces a resource or touches another host."""

import copy

import pytest

from preview.plan import Plan
from tests.builders import bare_metal_config, preview
from components.common.step_text import whole_text

HOST = "gpu001"


def changed_inputs(before: Plan, after: Plan) -> set[str]:
    """Names of the resources in both plans whose inputs differ."""
    old = before.by_urn
    return {r.name for r in after.resources if r.urn in old and old[r.urn].inputs != r.inputs}


@pytest.fixture(scope="module")
def baseline() -> tuple[dict, Plan, set[str]]:
    """The stack, its plan, and what differs between two previews of it (new keys and
    tokens each run), which no comparison can hold against a change."""
    values = bare_metal_config()
    plan = preview(values)
    return values, plan, changed_inputs(plan, preview(values))


def with_host(values: dict, **fields) -> dict:
    values = copy.deepcopy(values)
    host = next(h for h in values["hosts"] if h["name"] == HOST)
    host.update(fields)
    return values


def stdin(plan: Plan, name: str) -> str:
    """The step rendered whole (the bundle's files it runs pasted in)."""
    return whole_text(plan.redact(plan.named(name).inputs["stdin"]))


@pytest.mark.parametrize("wanted", [True, False])
def test_maintenance_is_one_step_on_the_controller_after_the_node_is_admitted(baseline, wanted):
    values, before, noise = baseline
    plan = preview(with_host(values, maintenance=wanted))
    added = {r.name for r in plan.resources} - {r.name for r in before.resources}
    assert added == {f"{HOST}-maintenance"}
    step = plan.named(f"{HOST}-maintenance")
    assert plan.redact(step.inputs["connection"])["host"] == "192.168.2.1"
    text = stdin(plan, f"{HOST}-maintenance")
    assert f"export MAINTENANCE='{str(wanted).lower()}'" in text
    assert "export DRAIN_TIMEOUT='600'" in text
    assert "export KUBECTL='/usr/local/bin/k0s kubectl'" in text
    # Taking the key out runs the delete: it uncordons.
    assert "gpu_cluster_delete()" in text and "uncordon" in text
    assert f"{HOST}-apply-worker-profile" in plan.all_dependencies(step)
    # Nothing else changes: no resource is replaced or re-run for it.
    assert not changed_inputs(before, plan) - noise
    assert "triggers" not in step.inputs


def test_maintenance_false_to_true_only_updates_the_step(baseline):
    values, _, _ = baseline
    off = preview(with_host(values, maintenance=False))
    on = preview(with_host(values, maintenance=True, ))
    noise = changed_inputs(off, preview(with_host(values, maintenance=False)))
    assert changed_inputs(off, on) - noise == {f"{HOST}-maintenance"}


def test_the_drain_timeout_comes_from_config(baseline):
    values, _, _ = baseline
    values = with_host(values, maintenance=True)
    values["kubernetes"] = {"drainTimeoutSeconds": 900}
    assert "export DRAIN_TIMEOUT='900'" in stdin(preview(values), f"{HOST}-maintenance")


def test_a_replaced_machine_runs_its_steps_again_after_its_old_node_is_removed(baseline):
    values, before, noise = baseline
    plan = preview(with_host(values, generation=2))
    added = {r.name for r in plan.resources} - {r.name for r in before.resources}
    assert added == {f"{HOST}-retire-node"}
    assert {r.name for r in before.resources} <= {r.name for r in plan.resources}
    retire = plan.named(f"{HOST}-retire-node")
    assert plan.redact(retire.inputs["connection"])["host"] == "192.168.2.1"
    assert "export MACHINE_GENERATION='2'" in stdin(plan, f"{HOST}-retire-node")
    # In order: the new machine prepared, the old node removed, then the join.
    join = plan.named(f"{HOST}-join-worker")
    assert f"{HOST}-verify-boot" in plan.all_dependencies(retire)
    assert f"{HOST}-retire-node" in plan.all_dependencies(join)
    # Every step of the host runs again (an update: the input changed), nothing else does.
    steps = {r.name for r in before.resources
             if r.name.startswith(f"{HOST}-") and r.type == "command:remote:Command"}
    assert {f"{HOST}-preflight", f"{HOST}-install-nvidia", f"{HOST}-join-worker",
            f"{HOST}-admit-node", f"{HOST}-apply-worker-profile",
            f"{HOST}-create-join-token"} <= steps
    for name in steps:
        assert "export MACHINE_GENERATION='2'" in stdin(plan, name), name
    # The new machine gets the bundle uploaded again (a replaced CopyToRemote deletes nothing).
    assert changed_inputs(before, plan) - noise - steps == {f"{HOST}-node-metadata",
                                                           f"{HOST}-bundle-upload"}
    assert plan.named(f"{HOST}-node-metadata").inputs["metadata"]["labels"][
        "gpu-cluster/machine-generation"] == "2"
    # An update, never a replacement: no step gets triggers. Only the upload does: a
    # CopyToRemote has no delete, so its replacement just copies the tarball again.
    assert [r.name for r in plan.resources if r.inputs.get("triggers")] == [
        f"{HOST}-bundle-upload"]


def test_hosts_without_a_generation_keep_their_steps_unchanged(baseline):
    values, before, _ = baseline
    for name in ("gpu000-prepare-host", "gpu000-admit-node", "gpu002-install-nvidia"):
        assert "MACHINE_GENERATION" not in stdin(before, name)


DRAINING_STEPS = ("drain-node", "drain-host", "admit-node", "maintenance", "retire-node")


def test_drain_force_reaches_every_drain_and_the_preview_warns(baseline):
    """kubernetes.drainForce: every step that drains gets DRAIN_FORCE (admit-node for
    remove-node, its delete) and runs drain/lib.sh; off, their inputs are as before."""
    values, before, noise = baseline
    values = with_host(values, maintenance=True, generation=1)
    off = preview(values)
    values["kubernetes"] = {"drainForce": True}
    on = preview(values)
    for step in DRAINING_STEPS:
        name = f"{HOST}-{step}"
        assert "export DRAIN_FORCE='true'" in stdin(on, name), name
        assert "export DRAIN_FORCE=" not in stdin(off, name), name
        # The drain is drain/lib.sh's, with its messages.
        assert "drain_node_with" in stdin(on, name) and "DRAIN_UNMANAGED=" in stdin(on, name)
    assert [w for w in on.warnings if "drainForce" in w] == [
        "gpu-cluster:kubernetes.drainForce is true: drains (upgrades, maintenance, removed "
        "and replaced machines) delete pods no controller manages, such as an interactive "
        "`kubectl run` GPU pod, and nothing recreates them"]
    assert not [w for w in off.warnings if "drainForce" in w]
    # Only the draining steps change, of every worker.
    changed = {name.split("-", 1)[-1] for name in changed_inputs(off, on) - noise}
    assert changed == set(DRAINING_STEPS), changed
