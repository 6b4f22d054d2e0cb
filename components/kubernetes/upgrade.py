"""Upgrades by version bump: the steps around a worker's upgrade and the controller's
version check. A raised kubernetes.version changes only these steps' inputs (and the
controller's install step, which upgrades the controller first); each worker is drained
from the controller, upgraded on its host and uncordoned once Ready, at most
kubernetes.upgrade.maxUnavailable workers at a time (a bound the drain steps keep on the
controller, not the graph).

A changed host setting a drain is for (the NVIDIA driver branch, the container toolkit,
kernel arguments: hosts/steps.py host_settings) drains the worker the same way, from its
`<host>-drain-host` step before its preparation steps change it (host_drain), in the same
slots; reboot-if-needed reboots it while it is drained, verify-boot checks it, and
uncordon-node uncordons it and records the settings on the node."""

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi_command import remote

from components.common.remote_step import Ssh, run_step
from components.common.step_text import Script
from components.distributions.base import Distribution
from components.hosts.bootstrap import DrainFirst
from config.hosts import Host

CHECK_VERSION = Script("upgrade/check-version.sh")
DRAIN_NODE = Script("upgrade/drain-node.sh")
UNCORDON_NODE = Script("upgrade/uncordon-node.sh")
# upgrade-node's share of one worker's upgrade: a release download, then up to 300 s for
# the service to be active (SERVICE_ACTIVE_TIMEOUT in its scripts).
UPGRADE_NODE_SECONDS = 900
# A drained host's preparation: install-nvidia's downloads and the driver's kernel module
# build (DKMS), the other steps; its reboot is bounded by tuning.rebootTimeoutSeconds.
HOST_CHANGE_SECONDS = 1800


@dataclass(frozen=True)
class RolloutPolicy:
    """How workers are taken out of service and back, for an upgrade, a host change or
    maintenance: how long a drain and a node's return to Ready may take
    (kubernetes.drainTimeoutSeconds, nodeReadyTimeoutSeconds), how long a host's reboot may
    take (tuning.rebootTimeoutSeconds), how many workers may be out at once
    (kubernetes.upgrade.maxUnavailable as a count, layouts.rollout_policy) and whether a
    drain deletes pods no controller manages (kubernetes.drainForce)."""

    drain_timeout_seconds: int = 600
    node_ready_timeout_seconds: int = 300
    reboot_timeout_seconds: int = 600
    max_unavailable: int = 1
    drain_force: bool = False

    def drain_force_env(self) -> dict[str, str]:
        """DRAIN_FORCE (drain/lib.sh) only when set, so the steps of a stack without it keep
        their inputs."""
        return {"DRAIN_FORCE": "true"} if self.drain_force else {}

    def drain_env(self) -> dict[str, str]:
        """The inputs of every step that drains a node."""
        return {"DRAIN_TIMEOUT": str(self.drain_timeout_seconds), **self.drain_force_env()}

    def slot_wait_seconds(self, change_seconds: int) -> int:
        """How long a drain step waits without any slot freeing: one worker's whole change
        (its drain, `change_seconds` of work on the host, its wait for Ready)."""
        return self.drain_timeout_seconds + change_seconds + self.node_ready_timeout_seconds


def kubernetes_version(distribution: Distribution) -> str:
    """The release kubernetes.version names (the one value of version_env)."""
    return next(iter(distribution.version_env().values()))


def check_version(host: Host, distribution: Distribution, ssh: Ssh,
                  depends_on: Sequence[pulumi.Resource], parent: pulumi.Resource
                  ) -> remote.Command:
    """On the controller, before its install step: refuses a version the running cluster
    cannot take (a skipped minor, a downgrade)."""
    return run_step(host.name, "check-version", on=ssh, create=CHECK_VERSION, env={
        "KUBERNETES_VERSION": kubernetes_version(distribution),
        "KUBECTL": distribution.kubectl_path,
    }, depends_on=depends_on, parent=parent)


def drain_node_env(rollout: RolloutPolicy, distribution: Distribution,
                   change_seconds: int) -> dict[str, str]:
    """drain-node's settings, for an upgrade and for a host change alike: the drain, the
    slots it keeps on the controller, the kubectl it runs."""
    return {"DRAIN_TIMEOUT": str(rollout.drain_timeout_seconds),
            "MAX_UNAVAILABLE": str(rollout.max_unavailable),
            "SLOT_WAIT_TIMEOUT": str(rollout.slot_wait_seconds(change_seconds)),
            "KUBECTL": distribution.kubectl_path,
            **rollout.drain_force_env()}


def host_drain(distribution: Distribution, *, controller: Ssh, rollout: RolloutPolicy
               ) -> DrainFirst:
    """A worker's `<host>-drain-host` step on the controller, before its preparation; it
    waits for a slot for one worker's whole change (drain, preparation, reboot, Ready)."""
    return DrainFirst(controller, DRAIN_NODE, drain_node_env(
        rollout, distribution, HOST_CHANGE_SECONDS + rollout.reboot_timeout_seconds),
        distribution.node_kubectl)


def worker_upgrade(host: Host, distribution: Distribution, *, controller: Ssh, node: Ssh,
                   rollout: RolloutPolicy, after: Sequence[pulumi.Resource],
                   node_ready: Sequence[pulumi.Resource], parent: pulumi.Resource
                   ) -> remote.Command:
    """drain-node (controller) -> upgrade-node (host) -> uncordon-node (controller).
    `after`: the controller's install only. No worker's steps wait for another's in the
    graph (Pulumi's dependencies order creation too, so a chain between workers would
    join a new cluster's workers one batch at a time); the drain steps keep
    `max_unavailable` on the controller instead, and stop the rollout at the first
    failure (upgrade/drain-node.sh). Returns upgrade-node: a new host's join follows it;
    uncordon_worker comes after it and the node's admission."""
    drain = run_step(host, "drain-node", on=controller, create=DRAIN_NODE, env={
        "NODE_NAME": host.name,
        "KUBERNETES_VERSION": kubernetes_version(distribution),
        **drain_node_env(rollout, distribution, UPGRADE_NODE_SECONDS),
    }, depends_on=after, parent=parent)
    upgrade = run_step(host, "upgrade-node", on=node, create=distribution.upgrade_node,
                       env={**distribution.version_env(), "NODE_NAME": host.name},
                       depends_on=[drain, *node_ready], parent=parent)
    return upgrade


def uncordon_worker(host: Host, distribution: Distribution, *, controller: Ssh,
                    rollout: RolloutPolicy, host_settings: str,
                    after: Sequence[pulumi.Resource], parent: pulumi.Resource
                    ) -> remote.Command:
    """uncordon-node (controller), after upgrade-node and the node's admission (a new
    host's node exists then, and gets its host settings recorded)."""
    return run_step(host, "uncordon-node", on=controller, create=UNCORDON_NODE, env={
        "NODE_NAME": host.name,
        "NODE_READY_TIMEOUT": str(rollout.node_ready_timeout_seconds),
        "KUBECTL": distribution.kubectl_path,
        # Change with the version and the host settings, so the node is waited for (and
        # uncordoned) after each upgrade.
        "KUBERNETES_VERSION": kubernetes_version(distribution),
        **({"HOST_SETTINGS": host_settings} if host_settings else {}),
    }, depends_on=after, parent=parent)
