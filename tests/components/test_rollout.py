"""The rollout policy: the drain settings, timeouts and maxUnavailable travel as one frozen
value, and the drain steps of an upgrade and of a host change are written from it once."""

import dataclasses

import pytest

from components.distributions import distribution_for, distribution_settings
from components.kubernetes.upgrade import (HOST_CHANGE_SECONDS, UPGRADE_NODE_SECONDS,
                                           RolloutPolicy, drain_node_env)
from tests.components.conftest import settings_for


def test_the_policy_is_one_frozen_value():
    policy = RolloutPolicy(drain_timeout_seconds=60, node_ready_timeout_seconds=30,
                           reboot_timeout_seconds=90, max_unavailable=2, drain_force=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_unavailable = 3  # type: ignore[misc]
    assert policy.drain_env() == {"DRAIN_TIMEOUT": "60", "DRAIN_FORCE": "true"}
    assert RolloutPolicy().drain_force_env() == {}


def test_an_upgrade_and_a_host_change_drain_alike_but_for_their_slot_wait():
    distribution = distribution_for(distribution_settings(settings_for()))
    policy = RolloutPolicy(drain_timeout_seconds=60, node_ready_timeout_seconds=30,
                           reboot_timeout_seconds=90, max_unavailable=2)
    upgrade = drain_node_env(policy, distribution, UPGRADE_NODE_SECONDS)
    change = drain_node_env(policy, distribution, HOST_CHANGE_SECONDS + 90)
    assert upgrade.pop("SLOT_WAIT_TIMEOUT") == str(60 + UPGRADE_NODE_SECONDS + 30)
    assert change.pop("SLOT_WAIT_TIMEOUT") == str(60 + HOST_CHANGE_SECONDS + 90 + 30)
    assert upgrade == change == {"DRAIN_TIMEOUT": "60", "MAX_UNAVAILABLE": "2",
                                 "KUBECTL": distribution.kubectl_path}
