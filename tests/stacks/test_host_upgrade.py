"""A raised nvidia.driverBranch (or container toolkit, or kernel arguments) on a running
cluster through the offline preview: each worker's node is drained from the controller
(`<host>-drain-host`) after its preflight and before its host steps change it, rebooted
by reboot-if-needed while drained, verified and uncordoned (tests/scripts/host-upgrade.bats
for the steps themselves); nothing is replaced."""

import dataclasses
import json

from preview.engine import run_program
from components.common.step_text import step_inputs
from preview.stack_file import read_stack
from tests.stacks.steps import changed_steps, waits_for
from tests.builders import PROJECT_DIR, bare_metal_config, example_plan, preview, shared_preview

LAB_GPU_WORKERS = ("moscow", "madrid", "campos")


def _lab(nvidia: dict | None = None):
    if not nvidia:
        return example_plan("lab")
    stack = read_stack(PROJECT_DIR, "lab")
    config = {**stack.config, "gpu-cluster:nvidia": json.dumps(nvidia)}
    return run_program(PROJECT_DIR, dataclasses.replace(stack, config=config))


def _inputs(plan, name: str) -> dict[str, str]:
    return step_inputs(plan.redact(plan.named(name).inputs["stdin"]))


def test_a_driver_branch_bump_of_the_lab_changes_only_the_gpu_workers_rollout_steps():
    before, after = _lab(), _lab({"driverBranch": "590"})
    # Every host's preflight checks the branch is packaged for its release (as before).
    assert changed_steps(before, after) == {"controller-preflight"} | {
        f"{worker}-{step}" for worker in LAB_GPU_WORKERS
        for step in ("preflight", "drain-host", "install-nvidia", "reboot-if-needed",
                     "verify-boot", "uncordon-node")}
    # Nothing is added, removed or renamed: no replacement, no reset.
    assert sorted(r.urn for r in before.resources) == sorted(r.urn for r in after.resources)
    drain = _inputs(after, "moscow-drain-host")
    assert drain["HOST_SETTINGS"].startswith("nvidia-driver=590,container-toolkit=")
    assert _inputs(after, "moscow-uncordon-node")["HOST_SETTINGS"] == drain["HOST_SETTINGS"]
    assert _inputs(after, "moscow-verify-boot").items() >= {
        "NVIDIA_DRIVER_BRANCH": "590", "CHECK_DRIVER_BRANCH": "true"}.items()


def test_a_container_toolkit_bump_drains_the_gpu_workers_too():
    before, after = _lab(), _lab({"containerToolkitVersion": "1.19.2-1"})
    changed = changed_steps(before, after)
    assert {f"{w}-{s}" for w in LAB_GPU_WORKERS for s in ("drain-host", "install-nvidia",
                                                          "uncordon-node")} <= changed
    assert not {name for name in changed if name.startswith("controller-")}


def test_a_workers_drain_comes_after_its_preflight_and_before_anything_changes_it():
    plan = shared_preview(bare_metal_config(workers=3))
    for worker in ("gpu000", "gpu001", "gpu002"):
        assert waits_for(plan, f"{worker}-drain-host") == {f"{worker}-preflight"}
        assert waits_for(plan, f"{worker}-prepare-host") == {f"{worker}-drain-host"}
        # It runs on the controller but waits for none of its steps: a new cluster
        # prepares every host at once (the step finds no controller installed yet).
        # Dialed for as long as a reboot of the controller may take (a new cluster's).
        connection = plan.named(f"{worker}-drain-host").inputs["connection"]["value"]
        assert connection["host"] == "192.168.2.1" and connection["dialErrorLimit"] > 100
        assert _inputs(plan, f"{worker}-drain-host").items() >= {
            "NODE_NAME": worker, "KUBECTL": "/usr/local/bin/k0s kubectl",
            "REBOOT_WHEN_NEEDED": "true", "MAX_UNAVAILABLE": "1",
            # drain 600 + the host's change 1800 + reboot 900 + Ready 600.
            "SLOT_WAIT_TIMEOUT": "3900"}.items()
        assert _inputs(plan, f"{worker}-reboot-if-needed")["NODE_KUBECTL"] == (
            "/usr/local/bin/k0s kubectl --kubeconfig /var/lib/k0s/kubelet.conf")
        # Recorded on the node after its upgrade and, for a new host, after its admission.
        assert waits_for(plan, f"{worker}-uncordon-node") == {
            f"{worker}-upgrade-node", f"{worker}-admit-node"}
    # The controller is not drained by the program (its own steps as before).
    assert "controller-drain-host" not in {r.name for r in plan.resources}
    assert "NODE_KUBECTL" not in _inputs(plan, "controller-reboot-if-needed")


def test_reboot_when_needed_off_reaches_the_drain_step():
    values = bare_metal_config(workers=1)
    values["tuning"] = {"rebootWhenNeeded": False}
    plan = preview(values)
    assert _inputs(plan, "gpu000-drain-host")["REBOOT_WHEN_NEEDED"] == "false"
