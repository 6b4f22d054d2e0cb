"""The order in which controllers are upgraded, one at a time, and what the workers wait
for. Pure: the plan's wiring (later, once controllers join) turns it into dependencies.

- Controller n's etcd-quorum check waits for controller n-1's install: one member is down
  at a time, and each check sees the one before back and healthy.
- Every worker's upgrade waits for the LAST controller's install: a kubelet must never be
  newer than the oldest API server (kubernetes.io/releases/version-skew-policy, "kubelet":
  "kubelet must not be newer than kube-apiserver"; in HA, "the oldest instance").
- One controller: no quorum check (a single member has nothing to keep), and workers wait
  for its install as today (upgrade.py worker_upgrade)."""

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ControllerStep:
    """One controller's turn: whether an etcd-quorum check precedes its install (not with a
    single controller) and which controller's install that check, or the install, waits
    for."""

    controller: str
    quorum_check: bool
    after: str | None  # the install of the controller before it, by name


@dataclass(frozen=True)
class UpgradeOrder:
    controllers: tuple[ControllerStep, ...]
    workers_after: str  # the controller whose install every worker's upgrade waits for


def upgrade_order(controllers: Sequence[str]) -> UpgradeOrder:
    """The controllers in config order (the first initialises the cluster), one at a time,
    then the workers after the last."""
    if not controllers:
        raise ValueError("a cluster has at least one controller")
    if len(set(controllers)) != len(controllers):
        raise ValueError(f"controllers named twice: {list(controllers)}")
    several = len(controllers) > 1
    steps = tuple(ControllerStep(name, several, controllers[i - 1] if i else None)
                  for i, name in enumerate(controllers))
    return UpgradeOrder(steps, controllers[-1])
