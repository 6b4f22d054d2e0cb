"""The release file and NVIDIA's apt repository from the site's own places: the keys reach
the steps that download (k0s and RKE2 alike; the scripts' side is in
tests/scripts/install-controller.bats, rke2-server.bats and install-nvidia.bats), bad values
name their key, and nothing changes for a stack without them."""

import pytest

from components.common.step_text import step_inputs
from preview.engine import unwrap_secrets
from tests.config.loading import problem_lines
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
