"""Upgrades by version bump: the steps around a worker's upgrade and the controller's
version check. A raised kubernetes.version changes only these steps' inputs (and the
controller's install step, which upgrades the controller first); each worker is drained
from the controller, upgraded on its host and uncordoned once Ready, a batch of
kubernetes.upgrade.maxUnavailable workers at a time."""

from collections.abc import Sequence

import pulumi
from pulumi_command import remote

from components.common.remote_step import Script, Ssh, run_step
from components.distributions.base import Distribution
from config.model import Host

CHECK_VERSION = Script("upgrade/check-version.sh")
DRAIN_NODE = Script("upgrade/drain-node.sh")
UNCORDON_NODE = Script("upgrade/uncordon-node.sh")


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


def worker_upgrade(host: Host, distribution: Distribution, *, controller: Ssh, node: Ssh,
                   drain_timeout_seconds: int, node_ready_timeout_seconds: int,
                   after: Sequence[pulumi.Resource], node_ready: Sequence[pulumi.Resource],
                   parent: pulumi.Resource) -> tuple[remote.Command, remote.Command]:
    """drain-node (controller) -> upgrade-node (host) -> uncordon-node (controller).
    `after`: the controller's install and the previous batch's uncordon steps; Pulumi
    runs no resource whose dependency failed, so the first failure stops the rollout
    (https://www.pulumi.com/docs/iac/cli/commands/pulumi_up/, --continue-on-error:
    "resources that depend on failed resources will not be updated"). Returns
    (upgrade-node, uncordon-node): the join of a new host follows the first, the next
    batch the second."""
    kubectl = {"KUBECTL": distribution.kubectl_path}
    drain = run_step(host.name, "drain-node", on=controller, create=DRAIN_NODE, env={
        "NODE_NAME": host.name,
        "KUBERNETES_VERSION": kubernetes_version(distribution),
        "DRAIN_TIMEOUT": str(drain_timeout_seconds),
        **kubectl,
    }, depends_on=after, parent=parent)
    upgrade = run_step(host.name, "upgrade-node", on=node, create=distribution.upgrade_node,
                       env=distribution.version_env(),
                       depends_on=[drain, *node_ready], parent=parent)
    uncordon = run_step(host.name, "uncordon-node", on=controller, create=UNCORDON_NODE, env={
        "NODE_NAME": host.name,
        "NODE_READY_TIMEOUT": str(node_ready_timeout_seconds),
        **kubectl,
        # Changes with the version, so the node is waited for after each upgrade.
        "KUBERNETES_VERSION": kubernetes_version(distribution),
    }, depends_on=[upgrade], parent=parent)
    return upgrade, uncordon
