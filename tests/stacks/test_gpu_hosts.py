"""GPU hosts that keep their own NVIDIA driver (nvidia.installDriver: false, or a host's
own installDriver: a vGPU guest with NVIDIA's guest driver, an image's driver) still get
the pinned container toolkit and containerd's `nvidia` runtime, which the device plugin's
and DCGM exporter's pods run with; verify-boot counts their GPUs; preflight keeps their
driver. A GPU host without the runtime (installToolkit: false) is named by a warning."""

import pytest

from components.common.step_text import step_inputs
from preview.engine import unwrap_secrets
from tests.config.loading import problem_lines
from tests.builders import bare_metal_config, own_warnings, shared_preview


def host_steps(plan, host: str) -> dict[str, dict[str, str]]:
    """The inputs of each preparation step of `host`, by step."""
    steps = {}
    for resource in plan.of_type("command:remote:Command"):
        if resource.name.startswith(f"{host}-"):
            steps[resource.name[len(host) + 1:]] = step_inputs(
                unwrap_secrets(resource.inputs["stdin"]))
    return steps


def own_driver(distribution: str = "k0s", **nvidia) -> dict:
    values = bare_metal_config(workers=2, gpus=2)
    values["nvidia"] = {"installDriver": False, **nvidia}
    values.setdefault("kubernetes", {})["distribution"] = distribution
    return values


@pytest.mark.parametrize("distribution", ["k0s", "rke2"])
def test_a_host_with_its_own_driver_gets_the_toolkit_and_runtime(distribution):
    steps = host_steps(shared_preview(own_driver(distribution)), "gpu000")
    assert "install-nvidia" in steps, "a host keeping its driver gets no container toolkit"
    install = steps["install-nvidia"]
    assert install["INSTALL_DRIVER"] == "false"
    # k0s: the drop-in adding the runtime; RKE2 adds it itself once the toolkit is there.
    assert bool(install["CONTAINERD_DROPIN_CONTENT"]) == (distribution == "k0s")
    assert steps["verify-boot"]["GPU_COUNT"] == "2", "verify-boot does not count the GPUs"
    # Its driver is the host's: of any branch, so not checked against nvidia.driverBranch.
    assert "CHECK_DRIVER_BRANCH" not in steps["verify-boot"]
    assert steps["preflight"]["INSTALL_DRIVER"] == "false"
    assert own_warnings(shared_preview(own_driver(distribution))) == []


def test_a_hosts_own_answer_overrides_the_stacks():
    values = bare_metal_config(workers=2, gpus=2)
    values["hosts"][2]["installDriver"] = False
    plan = shared_preview(values)
    managed, own = host_steps(plan, "gpu000"), host_steps(plan, "gpu001")
    assert managed["install-nvidia"]["INSTALL_DRIVER"] == "true"
    assert managed["verify-boot"]["CHECK_DRIVER_BRANCH"] == "true"
    assert "INSTALL_DRIVER" not in managed["preflight"]
    assert own["install-nvidia"]["INSTALL_DRIVER"] == "false"
    assert own["verify-boot"]["GPU_COUNT"] == "2"
    assert own["preflight"]["INSTALL_DRIVER"] == "false"


def test_a_host_that_brings_its_runtime_is_named_by_a_warning():
    plan = shared_preview(own_driver(installToolkit=False))
    steps = host_steps(plan, "gpu000")
    assert "install-nvidia" not in steps
    assert steps["verify-boot"]["GPU_COUNT"] == "2"
    assert own_warnings(plan) == [
        "gpu-cluster:nvidia.installToolkit is false: the program installs no NVIDIA Container "
        "Toolkit and no containerd `nvidia` runtime on gpu000, gpu001; the device plugin's and "
        "the DCGM exporter's pods (runtimeClassName: nvidia) start there only if the host has "
        "both; set it to true unless it does"]

    values = own_driver()
    del values["nvidia"]["installDriver"]
    values["hosts"][1].update(installDriver=False, installToolkit=False)
    [warning] = own_warnings(shared_preview(values))
    assert warning.startswith("gpu-cluster:hosts[1] (gpu000).installToolkit is false: ")
    assert "on gpu000;" in warning


def test_the_driver_without_the_toolkit_is_refused_naming_the_key():
    values = bare_metal_config(workers=2, gpus=2)
    values["nvidia"] = {"installToolkit": False}
    values["hosts"][2]["installDriver"] = False
    assert problem_lines(values) == [
        "gpu-cluster:nvidia.installToolkit: is false but the program installs the NVIDIA driver "
        "on gpu000 (installDriver: true), which comes with the container toolkit; set "
        "installDriver: false too when the host brings both"]
