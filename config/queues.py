"""Where a team's queued GPUs come from: Kueue's flavors (`access.flavorOrder`,
`access.teams[].quota.flavors`). A flavor is one kind of capacity the stack has: `on-prem`,
the hosts that run workloads (nodes labelled gpu-cluster/capacity=on-prem), and each EC2
pool by its name (gpu-cluster/pool=<name>). A team's ClusterQueue lists the flavors it has
GPUs on in the cluster's order; Kueue tries them in that order (docs/teams.md)."""

from collections.abc import Sequence
from typing import Optional

from pydantic import Field

from contract.names import CAPACITY_KINDS

from config.model_base import Section
from config.node_labels import pool_capacity
from config.partial import PartialConfig
from config.problems import Problem
from config.types import DnsLabel

# The values of the capacity label (contract/names.py; unpacking fails on a new kind).
ON_PREM, ON_DEMAND, SPOT, RESERVED = CAPACITY_KINDS
# The flavor of the on-prem hosts is named as the value of their capacity label.
ON_PREM_FLAVOR = ON_PREM
# The flavor of a team without per-flavor quotas: no node labels, as before flavors
# (components/access/queues.py). A pool may not take either name.
DEFAULT_FLAVOR = "default-flavor"
RESERVED_FLAVOR_NAMES = (ON_PREM_FLAVOR, DEFAULT_FLAVOR)
# The default order: capacity already paid for first (the hosts, then reserved pools), then
# On-Demand, then Spot, which AWS may take back.
CAPACITY_PREFERENCE = (ON_PREM, RESERVED, ON_DEMAND, SPOT)
# ResourceFlavor spec.tolerations: at most 8 (kueue v0.19.2 apis/kueue/v1beta2/
# resourceflavor_types.go:98); the flavor of a pool tolerates its NoSchedule/NoExecute taints.
MAX_FLAVOR_TOLERATIONS = 8
# A resource group lists at most 64 flavors (clusterqueue_types.go:279).
MAX_GROUP_FLAVORS = 64


class FlavorQuota(Section):
    """The GPUs a team's queue has on one flavor."""

    name: DnsLabel
    """`on-prem` (the hosts that run workloads) or a pool's name."""
    gpus: int = Field(ge=0, le=100_000)
    """GPUs of this flavor the team's queue may use (its nominal quota there)."""
    borrow_gpus: int = Field(default=0, ge=0, le=100_000)
    """GPUs of this flavor beyond `gpus` the queue may borrow from the others' idle quota."""


def stack_flavors(hosts: Sequence, pools: Sequence) -> list[str]:
    """The flavors the stack has in the default order: `on-prem` when a host runs
    workloads, then the pools by CAPACITY_PREFERENCE, each kind in config order."""
    flavors = [ON_PREM_FLAVOR] if any(host.runs_workloads for host in hosts) else []
    return flavors + [pool.name for pool in sorted(
        pools, key=lambda pool: CAPACITY_PREFERENCE.index(pool_capacity(pool)))]


def flavor_order(order: Sequence[str], hosts: Sequence, pools: Sequence) -> list[str]:
    """`access.flavorOrder` when it is set, else the stack's flavors in the default order."""
    return list(order) if order else stack_flavors(hosts, pools)


def unsplit_teams_warning(access) -> Optional[str]:
    """Teams without per-flavor GPUs beside teams with them: the first's queued jobs get no
    node selector (DEFAULT_FLAVOR), so they may take the pools' or on-prem nodes the others'
    quotas count on."""
    if not (access.queues and any(team.quota.flavors for team in access.teams)):
        return None
    unsplit = [team.name for team in access.teams if not team.quota.flavors]
    if not unsplit:
        return None
    return (f"gpu-cluster:access.teams: {', '.join(unsplit)} set no quota.flavors while other "
            "teams do: their queued jobs are given no node selector and may run on any node, "
            "pools included; give them quota.flavors (docs/teams.md, \"Where a team's GPUs "
            "come from\")")


def queue_checks(cfg: PartialConfig) -> list[Problem]:
    access = cfg.access
    if access is None or not (cfg.complete("hosts") and cfg.complete("pools")):
        return []
    hosts = [host for _, host in cfg.hosts or []]
    indexed_pools = list(cfg.pools or [])
    pools = [pool for _, pool in indexed_pools]
    # The order names flavors of the stack whether or not queues use it (the program
    # builds the flavors from it).
    problems = _order_problems(access.flavor_order, stack_flavors(hosts, pools))
    if not (access.queues and access.teams):
        return problems
    for index, pool in indexed_pools:
        if pool.name in RESERVED_FLAVOR_NAMES:
            problems.append(Problem(f"pools[{index}].name", f"'{pool.name}' names a Kueue "
                                    "flavor of its own (access.queues); name the pool otherwise"))
    order = flavor_order(access.flavor_order, hosts, pools)
    used: set[str] = set()
    for t, team in enumerate(access.teams):
        for f, flavor in enumerate(team.quota.flavors):
            used.add(flavor.name)
            if flavor.name not in order:
                where = "access.flavorOrder" if access.flavor_order else "this stack's flavors"
                problems.append(Problem(
                    f"access.teams[{t}] ({team.name}).quota.flavors[{f}].name",
                    f"'{flavor.name}' is not in {where} ({', '.join(order) or 'none'})"))
    if len(order) > MAX_GROUP_FLAVORS:
        problems.append(Problem("access.flavorOrder", f"{len(order)} flavors; a Kueue "
                                f"ClusterQueue lists at most {MAX_GROUP_FLAVORS}"))
    for index, pool in indexed_pools:
        tolerated = [t for t in pool.taints if t.effect != "PreferNoSchedule"]
        if pool.name in used and len(tolerated) > MAX_FLAVOR_TOLERATIONS:
            problems.append(Problem(f"pools[{index}].taints", f"{len(tolerated)} "
                                    "NoSchedule/NoExecute taints; its Kueue flavor tolerates at "
                                    f"most {MAX_FLAVOR_TOLERATIONS}"))
    return problems


def _order_problems(order: Sequence[str], available: list[str]) -> list[Problem]:
    problems = []
    seen: set[str] = set()
    for index, name in enumerate(order):
        key = f"access.flavorOrder[{index}]"
        if name not in available:
            problems.append(Problem(key, f"'{name}' is not a flavor of this stack (flavors: "
                                    f"{', '.join(available) or 'none'})"))
        elif name in seen:
            problems.append(Problem(key, f"'{name}' is listed twice"))
        seen.add(name)
    return problems
