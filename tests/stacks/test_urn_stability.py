"""No change to the program may replace a user's resources: the identity of every resource
of every example stack — its URN, made of its type, its parents' types and its name — is
recorded in tests/stacks/urns/<stack>.txt, and the plan must keep each one, itself or as an
alias. A replaced `remote.Command` runs its delete (a k0s reset), a replaced EC2 instance
or file system loses its disk.

URNs as the Pulumi engine makes them (pulumi/pulumi sdk/python/lib/pulumi/runtime/
resource.py create_urn: the parent's URN up to its last "::", "$", the type, "::", the
name), so a child's type carries every ancestor's: the SDK's mock monitor keeps only the
parent's own type, which would hide a component moved under another. A resource added or
removed on purpose: UPDATE_URNS=1 pytest tests/stacks/test_urn_stability.py, and the diff of
the .txt file shows it in review."""

import os
from pathlib import Path

import pytest


from preview.plan import Plan, ResourceRecord
from preview.stack_file import EXAMPLE_STACKS
from tests.builders import example_plan

STACKS = list(EXAMPLE_STACKS)
RECORDS = Path(__file__).parent / "urns"


def identity(chain: str, name: str) -> str:
    return f"{chain}::{name}"


def _from_urn(urn: str) -> tuple[str, str]:
    """(qualified type, name) of an engine URN."""
    parts = urn.split("::")
    return parts[2], "::".join(parts[3:])


class Identities:
    """Every identity a resource of the plan answers to: its own, and its aliases, under
    each identity of its parent (the engine applies a parent's aliases to its children)."""

    def __init__(self, plan: Plan):
        self._by_urn = {r.urn: r for r in plan.resources}
        self._chains: dict[str, set[str]] = {}

    def current(self, record: ResourceRecord) -> str:
        parent = self._by_urn.get(record.parent)
        chain = f"{self._chain(parent)}${record.type}" if parent else record.type
        return identity(chain, record.name)

    def _chain(self, record: ResourceRecord) -> str:
        return _from_urn("urn:pulumi:s::p::" + self.current(record))[0]

    def all(self, record: ResourceRecord) -> set[str]:
        parent = self._by_urn.get(record.parent)
        parents = self._parent_chains(parent)
        found = {identity(f"{p}${record.type}" if p else record.type, record.name)
                 for p in parents}
        for alias in record.aliases:
            if isinstance(alias, str):
                found.add(identity(*_from_urn(alias)))
                continue
            name, kind = alias.get("name", record.name), alias.get("type", record.type)
            if alias.get("noParent"):
                options = {""}
            elif alias.get("parentUrn"):  # empty: the resource's own parent
                options = {_from_urn(alias["parentUrn"])[0]}
            else:
                options = parents
            found |= {identity(f"{p}${kind}" if p else kind, name) for p in options}
        return found

    def _parent_chains(self, parent) -> set[str]:
        if parent is None:
            return {""}
        return {_from_urn("urn:pulumi:s::p::" + i)[0] for i in self.all(parent)}


@pytest.fixture(scope="module", params=STACKS)
def stack_plan(request) -> tuple[str, Plan]:
    return request.param, example_plan(request.param)


def test_every_recorded_resource_keeps_its_urn(stack_plan):
    stack, plan = stack_plan
    identities = Identities(plan)
    current = {identities.current(r) for r in plan.resources}
    answered = set().union(*(identities.all(r) for r in plan.resources))
    path = RECORDS / f"{stack}.txt"
    if os.environ.get("UPDATE_URNS") == "1":
        # Old identities an alias still answers stay recorded: the alias stays needed.
        kept = {line for line in _read(path) if line in answered}
        path.write_text("".join(f"{line}\n" for line in sorted(current | kept)))
    recorded = _read(path)
    lost = [line for line in recorded if line not in answered]
    assert not lost, (f"{stack}: these resources would be deleted (or replaced): keep their "
                      "names and parents, or give the new ones `aliases`:\n" + "\n".join(lost))
    added = sorted(current - set(recorded))
    assert not added, (f"{stack}: new resources, not recorded in {path.name} (record them "
                       "with UPDATE_URNS=1 when they are meant to be):\n" + "\n".join(added))


def _read(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_an_alias_keeps_a_moved_resource(stack_plan):
    """The guard's own check: a resource renamed without an alias is lost; with one, kept."""
    _, plan = stack_plan
    record = next(r for r in plan.resources if r.custom and r.parent in {p.urn for p in plan.resources})
    renamed = ResourceRecord(**{**record.__dict__, "name": record.name + "-moved"})
    plan_after = Plan(project=plan.project, stack=plan.stack)
    plan_after.resources = [renamed if r is record else r for r in plan.resources]
    before = Identities(plan).current(record)
    assert before not in Identities(plan_after).all(renamed)
    renamed.aliases = [{"name": record.name}]
    assert before in Identities(plan_after).all(renamed)
