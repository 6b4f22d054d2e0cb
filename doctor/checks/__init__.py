"""The checks: pure functions from what was read (the stack's outputs, the API's objects,
the hosts' command outputs) to findings. One module per area, each importing what they
share from here; `every.py` runs them all, in the report's order (so this package imports
none of them)."""

import datetime
from dataclasses import dataclass, field
from typing import Callable, Optional

from contract.stack import Stack
from doctor.drift import Drift
from doctor.findings import Finding, unchecked
from doctor.kubeapi import Snapshot


@dataclass
class Context:
    stack: Stack
    snapshot: Snapshot
    # host name -> command name -> its output (doctor/hosts.py); empty: host checks skipped.
    hosts: dict[str, dict[str, Optional[str]]] = field(default_factory=dict)
    # The steps that can check and their results (doctor/drift.py); None: not asked for.
    drift: Optional[Drift] = None

    @property
    def now(self) -> datetime.datetime:
        return self.snapshot.now

    def missing(self, check: str, *names: str) -> list[Finding]:
        """could-not-check findings for the lists a check needs and the API refused."""
        return [unchecked(check, "cluster", f"cannot list {name}: {self.snapshot.errors[name]}",
                          "read access to them is needed (the admin kubeconfig has it)")
                for name in names if name in self.snapshot.errors]

    def listed(self, check: str, name: str) -> tuple[list[dict], list[Finding]]:
        """The objects of one list, and the could-not-check finding if the API refused it."""
        return (self.snapshot.items(name) or []), self.missing(check, name)


Check = Callable[[Context], list[Finding]]


def name_of(obj: dict) -> str:
    return obj["metadata"]["name"]


def namespaced(obj: dict) -> str:
    metadata = obj["metadata"]
    return f"{metadata.get('namespace', '')}/{metadata['name']}"


def parse_time(value: Optional[str]) -> Optional[datetime.datetime]:
    """An RFC 3339 time as the API writes it ("2026-11-23T06:24:44Z")."""
    if not value:
        return None
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
