"""Kueue's flavors in the config (config/queues.py, access.flavorOrder and
access.teams[].quota.flavors): the totals they imply, the flavors a stack has, and the rules
across keys, each problem named by its key and reported at once."""

import pytest

from config.queues import CAPACITY_PREFERENCE, stack_flavors
from config.warnings import preview_warnings
from contract.names import CAPACITY_KINDS
from tests.builders import bare_metal_config, cloud_config
from tests.config.loading import loads, problems_of


def with_teams(values: dict, *teams: dict, **access) -> dict:
    values["access"] = {"teams": list(teams), **access}
    # A pool's flavor needs cluster-autoscaler, which runs with RKE2 (config/queues.py).
    values["kubernetes"] = {"distribution": "rke2"}
    return values


def test_the_preference_is_of_every_capacity_kind():
    assert sorted(CAPACITY_PREFERENCE) == sorted(CAPACITY_KINDS)


def test_gpus_and_borrow_gpus_default_to_the_sums_of_the_flavors():
    values = with_teams(cloud_config(), {"name": "vision", "quota": {"flavors": [
        {"name": "gpu", "gpus": 8, "borrowGpus": 2}]}})
    quota = loads(values).access.teams[0].quota
    assert (quota.gpus, quota.borrow_gpus) == (8, 2)
    values["access"]["teams"][0]["quota"].update(gpus=8, borrowGpus=2)
    assert loads(values).access.teams[0].quota.gpus == 8


@pytest.mark.parametrize("quota, message", [
    ({"gpus": 4, "flavors": [{"name": "gpu", "gpus": 8}]},
     "gpus (4) is not the sum of flavors[].gpus (8)"),
    ({"borrowGpus": 1, "flavors": [{"name": "gpu", "gpus": 8}]},
     "borrowGpus (1) is not the sum of flavors[].borrowGpus (0)"),
    ({"flavors": [{"name": "gpu", "gpus": 8}, {"name": "gpu", "gpus": 1}]},
     "flavors lists gpu twice"),
])
def test_totals_that_disagree_with_the_flavors_are_refused(quota, message):
    values = with_teams(cloud_config(), {"name": "vision", "quota": quota})
    [(path, text)] = problems_of(values)
    assert path == "access.teams[0].quota" and message in text


def test_a_bare_metal_stack_has_one_on_prem_flavor_and_a_cloud_stack_its_pools():
    lab = loads(bare_metal_config(workers=1))
    assert stack_flavors(lab.hosts, lab.pools) == ["on-prem"]
    # The controller runs no workloads.
    assert [host.name for host in lab.hosts if host.runs_workloads] == ["gpu000"]
    values = cloud_config()
    values["pools"].append({"name": "h100", "instanceType": "p5.48xlarge", "count": 0,
                            "gpus": 8})
    cloud = loads(values)
    assert stack_flavors(cloud.hosts, cloud.pools) == ["gpu", "h100"]


def test_flavors_the_stack_lacks_are_refused_by_key_together():
    values = with_teams(bare_metal_config(workers=1),
                        {"name": "vision", "quota": {"flavors": [
                            {"name": "on-prem", "gpus": 4}, {"name": "h100", "gpus": 8}]}},
                        flavorOrder=["on-prem", "spot", "on-prem"])
    assert sorted(problems_of(values)) == [
        ("access.flavorOrder[1]", "'spot' is not a flavor of this stack (flavors: on-prem)"),
        ("access.flavorOrder[2]", "'on-prem' is listed twice"),
        ("access.teams[0] (vision).quota.flavors[1].name",
         "'h100' is not in access.flavorOrder (on-prem, spot, on-prem)"),
    ]


def test_a_flavor_left_out_of_flavor_order_is_not_a_team_s():
    values = cloud_config()
    values["pools"].append({"name": "h100", "instanceType": "p5.48xlarge", "count": 0,
                            "gpus": 8})
    with_teams(values, {"name": "vision", "quota": {"flavors": [{"name": "gpu", "gpus": 4}]}},
               flavorOrder=["h100"])
    assert problems_of(values) == [("access.teams[0] (vision).quota.flavors[0].name",
                                     "'gpu' is not in access.flavorOrder (h100)")]


@pytest.mark.parametrize("name", ["on-prem", "default-flavor"])
def test_a_pool_may_not_take_a_flavor_s_name(name):
    values = with_teams(cloud_config(), {"name": "vision", "quota": {"gpus": 4}})
    values["pools"][0]["name"] = name
    [(path, message)] = problems_of(values)
    assert path == f"pools[0] ({name}).name" and "names a Kueue flavor of its own" in message


def test_without_queues_a_pool_may_be_named_on_prem_but_the_order_is_still_checked():
    values = with_teams(cloud_config(), {"name": "vision", "quota": {"gpus": 4}},
                        queues=False)
    values["pools"][0]["name"] = "on-prem"
    assert loads(values).pools[0].name == "on-prem"
    values["access"]["flavorOrder"] = ["spot"]
    assert problems_of(values) == [("access.flavorOrder[0]", "'spot' is not a flavor of this "
                                    "stack (flavors: on-prem)")]


def test_a_pool_flavor_tolerates_at_most_eight_taints():
    values = with_teams(cloud_config(), {"name": "vision", "quota": {"flavors": [
        {"name": "gpu", "gpus": 4}]}})
    values["pools"][0]["taints"] = [{"key": f"example.com/t{i}", "effect": "NoSchedule"}
                                    for i in range(9)]
    [(path, message)] = problems_of(values)
    assert path == "pools[0] (gpu).taints" and "at most 8" in message
    values["pools"][0]["taints"][8]["effect"] = "PreferNoSchedule"
    assert loads(values).pools[0].taints


@pytest.mark.parametrize("key", ["gpu-cluster/capacity", "gpu-cluster/pool"])
def test_a_host_may_not_set_the_labels_flavors_select_by(key):
    values = bare_metal_config(workers=1)
    values["hosts"][1]["labels"] = {key: "spot"}
    [(path, message)] = problems_of(values)
    assert path == f"hosts[1] (gpu000).labels.{key}" and "the program sets it" in message


def test_teams_left_unsplit_beside_split_ones_are_warned_about():
    values = with_teams(cloud_config(), {"name": "vision", "quota": {"flavors": [
        {"name": "gpu", "gpus": 4}]}}, {"name": "nlp", "quota": {"gpus": 4}})
    [warning] = [w for w in preview_warnings(loads(values)) if "quota.flavors" in w]
    assert warning.startswith("gpu-cluster:access.teams: nlp set no quota.flavors")
    values["access"]["teams"][1]["quota"] = {"flavors": [{"name": "gpu", "gpus": 4}]}
    assert not [w for w in preview_warnings(loads(values)) if "quota.flavors" in w]


@pytest.mark.parametrize("distribution", ["k0s", "rke2"])
def test_a_pool_flavor_is_taken_with_either_distribution(distribution):
    """cluster-autoscaler, which serves the pools' ProvisioningRequests, runs wherever there
    are pools (config/autoscaling.py autoscales), so no distribution leaves Kueue's
    admission check inactive."""
    values = with_teams(cloud_config(), {"name": "vision", "quota": {"flavors": [
        {"name": "gpu", "gpus": 4}]}})
    values["kubernetes"] = {"distribution": distribution}
    assert [t.name for t in loads(values).access.teams] == ["vision"]
