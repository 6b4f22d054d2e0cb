"""What a rule checks (`Resource`), a rule, and the readers of property values the rules
share. Standard library only (policy/rules.py)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    props: Mapping[str, Any]
    # None where the caller cannot know (the CLI passes no retainOnDelete to a policy).
    protect: Optional[bool] = None
    retain_on_delete: Optional[bool] = None
    # Plain values of the stack's secrets, when the caller has them (the offline preview).
    known_secrets: tuple = ()


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    check: Callable[[Resource], list]


def get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def items(value: Any) -> list:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def port_number(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
