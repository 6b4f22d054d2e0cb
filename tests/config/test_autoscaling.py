"""`autoscaling`: its one key's durations, the layout it belongs to, and the preview's warning
where cluster-autoscaler cannot run (controllers without a kubelet)."""

import pytest

from components.distributions.k0s import K0s
from components.distributions.rke2 import Rke2
from config import autoscaling
from config.autoscaling import CONTROLLERS_WITHOUT_KUBELET, duration_seconds
from config.versions import DISTRIBUTIONS
from tests.builders import bare_metal_config, cloud_config, hybrid_config
from tests.config.loading import loads, problems_of
from tests.config.test_warnings import warnings_of


@pytest.mark.parametrize("value, seconds", [("30m", 1800), ("1h30m", 5400), ("90s", 90),
                                            ("168h", 604800), ("1m", 60), ("2h0m30s", 7230)])
def test_a_duration_in_go_s_form_is_taken(value, seconds):
    values = cloud_config()
    values["autoscaling"] = {"scaleDownUnneededTime": value}
    assert loads(values).autoscaling.scale_down_unneeded_time == value
    assert duration_seconds(value) == seconds


def test_the_default_is_half_an_hour():
    assert loads(cloud_config()).autoscaling.scale_down_unneeded_time == "30m"


@pytest.mark.parametrize("value, says", [
    ("30", "is not a duration"), ("30m\n", "line break"), ("1m30h", "is not a duration"),
    ("30m --scale-down-enabled=false", "is not a duration"), ("1.5h", "is not a duration"),
    ("-30m", "is not a duration"), ("", "is not a duration"), ("59s", "is not between"),
    ("169h", "is not between")])
def test_anything_else_is_refused_by_its_key(value, says):
    values = cloud_config()
    values["autoscaling"] = {"scaleDownUnneededTime": value}
    [(path, message)] = problems_of(values)
    assert path == "autoscaling.scaleDownUnneededTime" and says in message


def test_the_section_belongs_to_the_layouts_with_pools():
    values = bare_metal_config(workers=1)
    values["autoscaling"] = {"scaleDownUnneededTime": "1h"}
    assert ("autoscaling", "only the EC2 pools of the hybrid and cloud layouts autoscale; "
            "remove gpu-cluster:autoscaling from this stack") in problems_of(values)
    # The hybrid layout's pools autoscale too (with RKE2): the section is read there.
    values = hybrid_config()
    values["autoscaling"] = {"scaleDownUnneededTime": "1h"}
    loads(values)


def test_the_warning_follows_the_distributions_that_run_no_kubelet_on_controllers():
    """The config names the distributions; the distributions say it (controller_runs_kubelet,
    which the composition reads to install cluster-autoscaler)."""
    classes = {"k0s": K0s, "rke2": Rke2}
    assert set(classes) == set(DISTRIBUTIONS)
    assert set(CONTROLLERS_WITHOUT_KUBELET) == {
        name for name, cls in classes.items() if not cls.controller_runs_kubelet}
    values = cloud_config()
    [warning] = [w for w in warnings_of(values) if "autoscale" in w]
    assert "k0s runs without a kubelet" in warning and "keeps its configured size" in warning
    values["kubernetes"] = {"distribution": "rke2"}
    assert not [w for w in warnings_of(values) if "autoscale" in w]
    assert not [w for w in warnings_of(bare_metal_config(workers=1)) if "autoscale" in w]


def test_pools_autoscale_where_the_controllers_run_a_kubelet():
    """k0s's EC2 controllers run none: no cluster-autoscaler, whatever the pools say."""
    values = cloud_config()
    assert not autoscaling.autoscales(loads(values).pools, controller_runs_kubelet=False)
    assert autoscaling.autoscales(loads(values).pools, controller_runs_kubelet=True)
    assert not autoscaling.autoscales([], controller_runs_kubelet=True)
