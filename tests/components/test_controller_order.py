"""components/kubernetes/controller_order.py: controllers one at a time, workers after the
last (kubernetes.io/releases/version-skew-policy: no kubelet newer than the oldest API
server)."""

import pytest

from components.kubernetes.controller_order import ControllerStep, upgrade_order


def test_one_controller_keeps_todays_order():
    order = upgrade_order(["kazan"])
    assert order.controllers == (ControllerStep("kazan", quorum_check=False, after=None),)
    assert order.workers_after == "kazan"


def test_each_controller_waits_for_the_one_before():
    order = upgrade_order(["c1", "c2", "c3"])
    assert [(s.controller, s.quorum_check, s.after) for s in order.controllers] == [
        ("c1", True, None), ("c2", True, "c1"), ("c3", True, "c2")]


@pytest.mark.parametrize("controllers", [["c1", "c2", "c3"], ["a", "b", "c", "d", "e"]])
def test_workers_wait_for_the_last_controller(controllers):
    assert upgrade_order(controllers).workers_after == controllers[-1]


@pytest.mark.parametrize("controllers", [[], ["c1", "c1", "c2"]])
def test_refuses_no_or_repeated_controllers(controllers):
    with pytest.raises(ValueError):
        upgrade_order(controllers)
