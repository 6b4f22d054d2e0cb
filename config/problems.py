"""Config problems: each names the key path and what is wrong; all are reported at once."""

import re
from dataclasses import dataclass

import pulumi

NAMESPACE = "gpu-cluster"
# A message or path longer than this is cut in the middle: a 20,000-character value
# quoted whole would bury every other problem.
MESSAGE_LIMIT = 400
PATH_LIMIT = 160


@dataclass(frozen=True, order=True)
class Problem:
    path: str  # e.g. "hosts[2] (gpu-03).address", without the namespace
    message: str
    # Another namespace only for a key outside the project's (a misspelt one).
    namespace: str = NAMESPACE

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _bounded(self.path, PATH_LIMIT))
        object.__setattr__(self, "message", _bounded(self.message, MESSAGE_LIMIT))

    def __str__(self) -> str:
        return f"{self.namespace}:{self.path}: {self.message}"


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, tail = text[:limit * 2 // 3], text[-(limit // 4):]
    return f"{head} [... {len(text) - len(head) - len(tail)} characters cut ...] {tail}"


class ConfigError(pulumi.RunError):
    """Invalid stack config. A RunError, so `pulumi up` prints it without a traceback."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(set(problems),
                               key=lambda p: (_sort_key(p.path), p.namespace, p.message))
        super().__init__(str(self))

    def __str__(self) -> str:
        count = len(self.problems)
        lines = [f"invalid stack configuration ({count} problem{'s' if count != 1 else ''}):"]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)


# The name after an entry's index: "hosts[2] (gpu-03)".
_ENTRY_NAME = re.compile(r"\] \([^()]*\)")


def _sort_key(path: str) -> list:
    # Orders hosts[2] before hosts[10]. Only ASCII digits are indexes: a key like "²" is a
    # digit to str.isdigit() but not a number to int().
    key: list = []
    path = _ENTRY_NAME.sub("]", path)
    for part in path.replace("]", "").replace("[", ".").split("."):
        index = part.isascii() and part.isdigit()
        key.append((0, int(part), "") if index else (1, 0, part))
    return key
