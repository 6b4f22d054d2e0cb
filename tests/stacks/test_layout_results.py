"""A layout hands the cluster its results one way (components/layouts/contract.py): frozen
values it never changes after returning them; what it adds later (the cloud pools) comes as
a new value."""

import dataclasses

import pytest

from components.common.step_text import step_inputs
from components.layouts import layout_class
from components.layouts.cloud import Cloud
from components.layouts.contract import LayoutResult, SelfJoining
from tests.builders import bare_metal_config, cloud_config, preview, require_tool, run_checked


def capture(monkeypatch, cls, method: str) -> list:
    """What `cls.method` returns during a preview."""
    seen: list = []
    original = getattr(cls, method)

    def spy(self, *args, **kwargs):
        seen.append(original(self, *args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(cls, method, spy)
    return seen


def test_the_pools_join_without_changing_what_the_layout_returned(monkeypatch):
    results = capture(monkeypatch, Cloud, "result")
    joined = capture(monkeypatch, Cloud, "self_joining")
    plan = preview(cloud_config())
    [result], [pools] = results, joined
    assert isinstance(result, LayoutResult) and isinstance(pools, SelfJoining)
    # The controller's image only: the pools' are in the later value, which the cluster
    # exports over it.
    assert list(result.outputs["images"]) == ["controlPlane"]
    assert "pools" not in result.outputs
    assert list(plan.outputs["images"][0]) == ["controlPlane", "gpu"]
    assert [pool["name"] for pool in plan.outputs["pools"][0]] == ["gpu"]
    assert len(pools.nodes) == 1


def test_a_layouts_result_cannot_be_changed(monkeypatch):
    results = capture(monkeypatch, layout_class("bare-metal"), "result")
    preview(bare_metal_config(workers=1))
    [result] = results
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.workers = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.services.backup = None
    with pytest.raises(TypeError):
        result.outputs["nodes"] = []
    assert [w.host.name for w in result.workers] == ["gpu000"]


def age_recipients(count: int) -> list[str]:
    """`count` real age public keys (age-keygen), their identities thrown away."""
    keygen = require_tool("age-keygen")
    return [next(line.split(": ", 1)[1] for line in run_checked(keygen).splitlines()
                 if line.startswith("# public key: ")) for _ in range(count)]


def test_the_cloud_controller_takes_as_many_backup_recipients_as_the_config_does():
    # Its install-backup step is a step of its boot plan (an S3 object), no longer an
    # envelope in 8 SSM parameters of 4,000 characters that 200 recipients overflowed.
    values = cloud_config()
    values["backup"]["recipients"] = age_recipients(200)
    plan = preview(values)
    [instance] = plan.of_type("aws:ec2/instance:Instance")
    [(_, stdin)] = [step for step in plan.boot_steps(instance.inputs["userDataBase64"])
                    if step[0] == "install-backup"]
    assert step_inputs(stdin)["BACKUP_RECIPIENTS"].split() == values["backup"]["recipients"]
