"""`autoscaling`: its one key's durations, the layout it belongs to, and where
cluster-autoscaler runs (the EC2 controllers, nodes with every distribution)."""

import pytest

from components.distributions import distribution_for, distribution_settings
from config import autoscaling
from config.autoscaling import duration_seconds
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


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_every_distribution_s_ec2_controllers_are_nodes_for_cluster_autoscaler(distribution):
    """Its home: on the AWS layouts each distribution's controllers run a kubelet (k0s's a
    tainted one there, only there), labelled with what CA's node selector names."""
    values = cloud_config()
    values["kubernetes"] = {"distribution": distribution}
    config = loads(values)
    on_aws = distribution_for(distribution_settings(config))
    assert on_aws.controller_runs_kubelet and on_aws.controller_node_labels
    assert not [w for w in warnings_of(values) if "autoscale" in w]
    bare_metal = bare_metal_config(workers=1)
    bare_metal["kubernetes"] = {"distribution": distribution}
    bare = distribution_for(distribution_settings(loads(bare_metal)))
    assert bare.controller_runs_kubelet == (distribution == "rke2")


def test_pools_autoscale_wherever_there_are_pools():
    assert autoscaling.autoscales(loads(cloud_config()).pools)
    assert not autoscaling.autoscales([])
