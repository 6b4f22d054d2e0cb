"""What a script takes from its environment, as its header declares it: within its first
40 lines, `# Inputs: NAME...` (every step that runs it passes them) and, when it has any,
`# Optional inputs: NAME...` (a step may pass them; `<n>` in an optional name stands for a
number from 1, as in REGISTRY_FILE_<n>_PATH). The one declaration both sides read:
a step's rendering refuses inputs its files do not declare and required ones it lacks
(check_step_inputs), and tests/scripts/test_script_inputs.py holds each script to its
header (every name it reads is declared, every required one is checked).

A step's files (Script.files) are its libraries and its script: what it may be passed is
what any of them declares, for its create and its delete alike (both run with the
step's inputs)."""

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from components.common.bundle import script_path

HEADER_LINES = 40
_NAME = r"[A-Z][A-Z0-9_]*(?:<n>[A-Z0-9_]*)*"
_LINE = re.compile(rf"^# (Inputs|Optional inputs):((?: {_NAME})+)$")
_NUMBER = "<n>"
# Inputs no script declares: the step's own (step_header writes them), and the machine's,
# which run_step adds to every step of a replaced machine so that each runs again there
# (remote_step.machine_env); a script that reads one declares it.
EVERY_STEP = frozenset({"GPU_CLUSTER_HOST", "GPU_CLUSTER_STEP", "MACHINE_GENERATION"})


@dataclass(frozen=True)
class Declared:
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()

    @property
    def names(self) -> frozenset[str]:
        return self.required | self.optional

    def declares(self, name: str) -> bool:
        """Whether `name` is one of its inputs, or one of its numbered ones."""
        return name in self.names or any(
            re.fullmatch(re.escape(pattern).replace(_NUMBER, "[1-9][0-9]*"), name)
            for pattern in self.optional if _NUMBER in pattern)

    def __or__(self, other: "Declared") -> "Declared":
        return Declared(self.required | other.required, self.optional | other.optional)


class StepInputsError(ValueError):
    """A step rendered with inputs its scripts do not declare, or without required ones."""


@functools.lru_cache(maxsize=None)
def declared_inputs(text: str) -> Declared:
    """The inputs the header of a script's `text` declares; a line repeated is refused."""
    found: dict[str, frozenset[str]] = {}
    for line in text.splitlines()[:HEADER_LINES]:
        match = _LINE.match(line)
        if match is None:
            continue
        if match[1] in found:
            raise StepInputsError(f"a second '# {match[1]}:' line: {line!r}")
        found[match[1]] = frozenset(match[2].split())
    if any(_NUMBER in name for name in found.get("Inputs", ())):
        raise StepInputsError(f"a numbered input is optional: {found['Inputs']}")
    return Declared(found.get("Inputs", frozenset()), found.get("Optional inputs", frozenset()))


def _read(relative: str) -> str:
    # The renderers hand their own reader in (a bundle's files); this one serves the tests
    # that ask of a script directly.
    return script_path(relative).read_text()


def file_inputs(path: str, read: Callable[[str], str] = _read) -> Declared:
    """The inputs the file components/scripts/`path` declares."""
    return declared_inputs(read(path))


def step_declared(files: Iterable[str], read: Callable[[str], str] = _read) -> Declared:
    """What a step whose actions run `files` declares: any file's inputs."""
    declared = Declared()
    for path in files:
        declared |= file_inputs(path, read)
    return declared


def check_step_inputs(host: str, step: str, files: Iterable[str], names: Iterable[str],
                      read: Callable[[str], str] = _read) -> None:
    """Refuses, naming host, step, script and every variable at once, `names` (the inputs a
    step is rendered with) that its files do not declare, or that lack a required one."""
    files = list(dict.fromkeys(files))
    names = set(names)
    problems = []
    declared = step_declared(files, read)
    undeclared = {name for name in names - EVERY_STEP if not declared.declares(name)}
    if undeclared:
        scripts = [path for path in files if not path.endswith("lib.sh")]
        problems.append(f"{', '.join(sorted(undeclared))} not declared by "
                        f"{' or '.join(scripts)} nor their libraries (the '# Inputs:' and "
                        "'# Optional inputs:' lines)")
    for path in files:
        missing = file_inputs(path, read).required - names
        if missing:
            problems.append(f"{path} requires {', '.join(sorted(missing))} (its '# Inputs:' line)")
    if problems:
        raise StepInputsError(f"step '{step}' on '{host}': " + "; ".join(problems))
