"""A layout hands the cluster its results one way (components/layouts/contract.py): frozen
values it never changes after returning them; what it adds later (the cloud pools) comes as
a new value; what only it can check of the config is refused before anything is
registered."""

import dataclasses

import pulumi
import pytest

from components.layouts import layout_class
from components.layouts.cloud import Cloud
from components.layouts.contract import LayoutResult, SelfJoining
from config.problems import ConfigError
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


def registrations(monkeypatch) -> list:
    """The names of the resources the program registers (the stack itself left out)."""
    registered: list = []
    original = pulumi.Resource.__init__

    def record(self, t, name, *args, **kwargs):
        if t != "pulumi:pulumi:Stack":
            registered.append(name)
        original(self, t, name, *args, **kwargs)

    monkeypatch.setattr(pulumi.Resource, "__init__", record)
    return registered


def age_recipients(count: int) -> list[str]:
    """`count` real age public keys (age-keygen), their identities thrown away."""
    keygen = require_tool("age-keygen")
    return [next(line.split(": ", 1)[1] for line in run_checked(keygen).splitlines()
                 if line.startswith("# public key: ")) for _ in range(count)]


def test_what_only_the_layout_can_check_is_refused_before_anything_is_registered(
        monkeypatch):
    # The cloud controller's install-backup step carries the recipients and travels in 8
    # SSM parameters of 4,000 characters, at boot: 200 recipients are more than they hold.
    values = cloud_config()
    values["backup"]["recipients"] = age_recipients(200)
    registered = registrations(monkeypatch)
    with pytest.raises(ConfigError) as error:
        preview(values)
    assert "gpu-cluster:backup.recipients: the install-backup step is" in str(error.value)
    assert "over the 8 SSM parameters' 32000" in str(error.value)
    assert registered == []
