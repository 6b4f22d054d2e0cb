"""What a preview records: every resource (type, name, parent, dependencies, inputs) and
the stack outputs, and how they are shown (secrets hidden, unknowns marked, tree order).
preview/engine.py fills it by running the program under the SDK's mocks."""

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Optional

from pulumi.output import Unknown
from pulumi.runtime import rpc

from components.common.step_text import quoted_text
from contract.names import REDACTED, UNKNOWN
from preview.redaction import Redactor

# UNKNOWN (contract/names.py): an input that is another resource's output the mocks do not
# make up (a role's name, a launch template's version): the SDK sends rpc.UNKNOWN, it reads
# back as pulumi.output.Unknown, and `pulumi preview` shows it as output<string> (pulumi
# sdk/go/common/resource/properties.go, PropertyValue.TypeString).


@dataclass
class ResourceRecord:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    dependencies: list[str]
    inputs: dict[str, Any]
    protect: bool = False
    retain_on_delete: bool = False
    # input property -> URNs of the resources its value comes from
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    # inputs whose changes `pulumi up` does not apply (ignoreChanges)
    ignore_changes: list[str] = field(default_factory=list)
    # earlier identities (`aliases`): a URN, or a spec of the fields that differ
    aliases: list[Any] = field(default_factory=list)
    # the provider it is created with, as `URN::ID` ("": its package's default provider)
    provider: str = ""
    # the replacementTrigger option: a change of it replaces the resource (None: unset)
    replacement_trigger: Any = None


@dataclass
class Plan:
    project: str
    stack: str
    resources: list[ResourceRecord] = field(default_factory=list)
    outputs: dict[str, tuple[Any, bool]] = field(default_factory=dict)
    # Plain text of every secret value seen, to be redacted wherever it appears; a new
    # set on each change (add_secrets), so the redactor knows when to rebuild.
    secrets: frozenset[str] = frozenset()
    placeholders: list[str] = field(default_factory=list)
    # Secrets the stack file does not set (placeholders too, but `pulumi up` refuses).
    missing_secrets: list[str] = field(default_factory=list)
    # (token, arguments) of every provider function the program called (look-ups).
    invokes: list[tuple[str, dict]] = field(default_factory=list)
    # What the program warns about (pulumi.log.warn), as `pulumi preview` shows it.
    warnings: list[str] = field(default_factory=list)
    # What it says besides (pulumi.log.info: each EC2 pool's price an hour), likewise.
    info: list[str] = field(default_factory=list)
    # (type, name) -> (inputs, replacement trigger, outputs) of each generated resource.
    generated: dict[tuple[str, str], tuple[dict, Any, Any]] = field(default_factory=dict)
    # Values the mocks made up where the provider makes them at `pulumi up` (ids, addresses,
    # generated names, keys and certificates): real-looking, so dependents render.
    provider_made: set[str] = field(default_factory=set)
    _redactor: Optional[tuple[frozenset[str], Redactor]] = field(
        default=None, init=False, repr=False, compare=False)
    _secrets_lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False)

    def add_secrets(self, strings: Iterable[str]) -> None:
        """Adds to `secrets`. The mocks run on the SDK's thread pool (pulumi 3.272.0
        sdk/python/lib/pulumi/runtime/resource.py, register_resource: run_in_executor), and
        `secrets |= ...` is a read, a union and a write: two threads at once would each
        write the set they read plus their own, and one's secrets would be lost (shown
        unredacted). Only the union and the write are under the lock."""
        strings = frozenset(strings)
        with self._secrets_lock:
            self.secrets = self.secrets | strings

    @cached_property
    def by_urn(self) -> dict[str, ResourceRecord]:
        return {resource.urn: resource for resource in self.resources}

    @cached_property
    def children(self) -> dict[str, list[ResourceRecord]]:
        """Parent URN -> its children, by name (the order registration took varies)."""
        found: dict[str, list[ResourceRecord]] = {}
        for resource in self.resources:
            found.setdefault(resource.parent, []).append(resource)
        for resources in found.values():
            resources.sort(key=_stable_key)
        return found

    @cached_property
    def roots(self) -> list[ResourceRecord]:
        return sorted((r for r in self.resources if r.parent not in self.by_urn), key=_stable_key)

    @cached_property
    def in_tree_order(self) -> list[ResourceRecord]:
        """Every resource, each after its parent and before its next sibling, siblings by
        name: the same order on every run, unlike the order of registration."""
        found: list[ResourceRecord] = []
        todo = list(reversed(self.roots))
        while todo:
            resource = todo.pop()
            found.append(resource)
            todo += reversed(self.children.get(resource.urn, []))
        return found

    def named(self, name: str) -> ResourceRecord:
        return next(r for r in self.resources if r.name == name)

    def of_type_in_tree_order(self, type_: str) -> list[ResourceRecord]:
        return [r for r in self.in_tree_order if r.type == type_]

    def of_type(self, type_: str) -> list[ResourceRecord]:
        return [r for r in self.resources if r.type == type_]

    def boot_steps(self, user_data: str) -> list[tuple[str, str]]:
        """(name, stdin) of each step an EC2 machine's user data runs at boot, from the
        boot plan object it names (components/aws/boot.py)."""
        # Imported here: only a stack with EC2 machines loads the AWS SDK.
        from components.aws.boot import boot_scripts, plan_steps
        from components.common.step_text import step_inputs

        key = step_inputs(boot_scripts(user_data)[0])["BOOT_PLAN_KEY"]
        [plan] = [r for r in self.of_type("aws:s3/bucketObjectv2:BucketObjectv2")
                  if r.inputs.get("key") == key]
        return plan_steps(plan.inputs["content"])

    def custom_dependencies(self, resource: ResourceRecord) -> set[str]:
        """Dependencies as custom resources (a component stands for its descendants), and
        the resource's provider, which the engine counts as one (pulumi/pulumi
        pkg/resource/graph/dependency_graph.go, DependingOn)."""
        found: set[str] = set()
        provider = resource.provider.rsplit("::", 1)[0] if resource.provider else None
        for urn in [*resource.dependencies, *filter(None, [provider])]:
            target = self.by_urn.get(urn)
            if target is None:
                continue
            if target.custom:
                found.add(urn)
            else:
                found |= {d.urn for d in self.descendants(target) if d.custom}
        return found

    def all_dependencies(self, resource: ResourceRecord) -> set[str]:
        """Names of every custom resource `resource` waits for, directly or not."""
        seen: set[str] = set()
        todo = list(self.custom_dependencies(resource))
        while todo:
            urn = todo.pop()
            if urn not in seen:
                seen.add(urn)
                todo += self.custom_dependencies(self.by_urn[urn])
        return {self.by_urn[urn].name for urn in seen}

    def descendants(self, resource: ResourceRecord) -> list[ResourceRecord]:
        children = self.children.get(resource.urn, [])
        return children + [d for child in children for d in self.descendants(child)]

    def depth_of(self, resource: ResourceRecord) -> int:
        return self._depths[resource.urn]

    @cached_property
    def _depths(self) -> dict[str, int]:
        depths: dict[str, int] = {}

        def depth(urn: str) -> int:
            if urn not in depths:
                deps = self.custom_dependencies(self.by_urn[urn])
                depths[urn] = 1 + max((depth(d) for d in deps), default=0)
            return depths[urn]

        for resource in self.resources:
            if resource.custom:
                depth(resource.urn)
        return depths

    @property
    def depth(self) -> int:
        """Length of the longest dependency chain: the number of sequential waves."""
        return max(self._depths.values(), default=0)

    def redact(self, value: Any) -> Any:
        """`value` as a reviewer may read it: every secret replaced by [secret] (secret-
        wrapped values whose secret parts are unknown hidden whole), every value unknown
        until `pulumi up` by UNKNOWN."""
        if isinstance(value, Unknown):
            return UNKNOWN
        if rpc.is_rpc_secret(value):
            inner = rpc.unwrap_rpc_secret(value)
            if self._holds_known_secret(inner):
                return self.redact(inner)
            return _hidden(inner)
        if isinstance(value, str):
            return self.redactor.redact(value)
        return _each_item(value, self.redact)

    def provider_made_hidden(self, value: Any) -> Any:
        """`value` with every provider-made value in it (whole, or inside a longer string:
        an endpoint URL, an S3 path) shown as UNKNOWN."""
        if isinstance(value, str):
            for made in sorted(self.provider_made, key=len, reverse=True):
                value = value.replace(made, UNKNOWN)
            return UNKNOWN if value.strip() == UNKNOWN else value
        return _each_item(value, self.provider_made_hidden)

    def _holds_known_secret(self, value: Any) -> bool:
        """Whether a secret the plan knows is in `value`: then what makes it secret is
        known, and the rest of it may be shown."""
        if isinstance(value, str):
            return self.redactor.holds_secret(value)
        if isinstance(value, dict):
            value = list(value.values())
        return isinstance(value, (list, tuple)) and any(
            self._holds_known_secret(item) for item in value)

    @property
    def redactor(self) -> Redactor:
        """Built once for the secrets as they are (the run adds some as it goes)."""
        if self._redactor is None or self._redactor[0] is not self.secrets:
            # A step's stdin holds a secret with a ' in its quoted form only.
            written = {quoted_text(secret) for secret in self.secrets if "'" in secret}
            self._redactor = (self.secrets, Redactor(self.secrets | written))
        return self._redactor[1]


def _stable_key(resource: ResourceRecord) -> tuple[str, str, str]:
    return resource.name, resource.type, resource.urn


def _hidden(value: Any) -> Any:
    """A secret whole: a map or list keeps its shape (which keys a Secret has), every
    value in it is hidden."""
    if isinstance(value, (dict, list, tuple)):
        return _each_item(value, _hidden)
    return REDACTED


def _each_item(value: Any, change: Callable[[Any], Any]) -> Any:
    """A mapping or list with `change` applied to each item (a tuple becomes a list);
    anything else as it is."""
    if isinstance(value, dict):
        return {key: change(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [change(item) for item in value]
    return value
