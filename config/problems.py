"""Config problems: each names the key path and what is wrong; all are reported at once."""

from dataclasses import dataclass

import pulumi

NAMESPACE = "gpu-cluster"


@dataclass(frozen=True, order=True)
class Problem:
    path: str  # e.g. "hosts[2].address", without the namespace
    message: str

    def __str__(self) -> str:
        return f"{NAMESPACE}:{self.path}: {self.message}"


class ConfigError(pulumi.RunError):
    """Invalid stack config. A RunError, so `pulumi up` prints it without a traceback."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(set(problems), key=lambda p: (_sort_key(p.path), p.message))
        super().__init__(str(self))

    def __str__(self) -> str:
        count = len(self.problems)
        lines = [f"invalid stack configuration ({count} problem{'s' if count != 1 else ''}):"]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)


def _sort_key(path: str) -> list:
    # Orders hosts[2] before hosts[10]. Only ASCII digits are indexes: a key like "²" is a
    # digit to str.isdigit() but not a number to int().
    key: list = []
    for part in path.replace("]", "").replace("[", ".").split("."):
        index = part.isascii() and part.isdigit()
        key.append((0, int(part), "") if index else (1, 0, part))
    return key
