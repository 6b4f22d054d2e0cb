"""What a script reads from its environment and which inputs it checks, read from its
text: bash's parameter expansions (`$NAME`, `${NAME...}`), names it gives the input checks
of lib.sh (require_env, check_missing_env, require_set, and functions that pass "$@" on to
them), less the names its files assign; os.environ in the Python files. A library counts
with its top-level code and the functions the step reaches from its script."""

import re
from dataclasses import dataclass, field

from components.common.bundle import SCRIPTS_DIR
from components.common.step_text import read_script, sourced_libraries

# Set by bash itself, the login, or lib.sh's callers' shell: never a step's input.
SHELL_NAMES = frozenset("""BASH_SOURCE BASH_REMATCH BASH_COMMAND BASH_VERSION BASHPID LINENO
FUNCNAME PIPESTATUS SECONDS RANDOM EUID UID HOME PATH PWD IFS HOSTNAME OSTYPE OPTARG OPTIND
REPLY EPOCHSECONDS EPOCHREALTIME TMPDIR USER""".split())
# The checks of lib.sh that die, or add to INPUT_PROBLEMS, when a name is unset or empty
# (require_set: unset only).
CHECKS = ("require_env", "check_missing_env", "require_set")
_FUNCTION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(\) \{\n(.*?)^\}\n", re.M | re.S)
_READ = re.compile(r"(?<!\\)\$\{?#?!?([A-Z][A-Z0-9_]*)(?![a-z])| -v ([A-Z][A-Z0-9_]*)")
_WORD_LIST = r"((?:[ \t]+(?:\\\n[ \t]*)?[A-Za-z0-9_\"$@{}:=+-]+)+)"
_ASSIGN = re.compile(
    r"(?:^|[;&|]|\bthen|\bdo|\belse|\bexport)[ \t]*"
    r"([A-Z][A-Z0-9_]*)(?:\[[^]]*\])?\+?=", re.M)
_DECLARE = re.compile(r"\b(?:local|declare(?: -\w+)*|readonly)((?:[ \t]+[A-Za-z_][A-Za-z0-9_]*"
                      r"(?:=\S*)?)+)")
_READ_INTO = re.compile(r"\b(?:read(?: -[a-z]+)*(?: -d \S+)?|mapfile(?: -[a-z]+)*|"
                        r"printf -v|for)[ \t]+([A-Z][A-Z0-9_]*)")
# Checks without a checker: an array handed to one ("${required[@]}"), and a loop over
# names that collects the empty ones (the pool services, which source no library).
_CHECKED_ARRAY = re.compile(r"\brequired\+?=\(([^)]*)\)")
_CHECKED_LOOP = re.compile(r"\bfor (\w+) in ([A-Z0-9_ \t\\\n]+); do\s*\[\[ -n \"\$\{!\1:-\}\" \]\]")
# How a script sources its libraries when run on its own: the step's files, in order.
_SOURCE = re.compile(r'source "\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)/([^"]+)"')
_PY_READ = re.compile(r"os\.(?:environ(?:\.get\(|\[)|getenv\()[\"']([A-Z][A-Z0-9_]*)")


def code_of(text: str) -> str:
    """`text` without its comment lines and line-end comments."""
    lines = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        lines.append(re.sub(r"\s+#\s.*$", "", line))
    return "\n".join(lines) + "\n"


def functions_of(code: str) -> tuple[dict[str, str], str]:
    """(name -> body) of the functions defined at column 0, and the rest of the code."""
    functions = {m[1]: m[2] for m in _FUNCTION.finditer(code)}
    return functions, _FUNCTION.sub("", code)


def _checkers(functions: dict[str, str]) -> set[str]:
    """The checks, and the functions that pass their own arguments on to one."""
    names = set(CHECKS)
    for name, body in functions.items():
        if re.search(rf"\b(?:{'|'.join(CHECKS)})\b[^\n]*\"\$@\"", body):
            names.add(name)
    return names


@dataclass
class Scan:
    reads: set[str] = field(default_factory=set)
    assigned: set[str] = field(default_factory=set)
    checked: set[str] = field(default_factory=set)
    # Names its code spells out (given to a function that reads ${!1}), and the prefixes
    # and suffixes of names it builds ("K0S_SHA256_${arch}", "${1}_SSM_PARAMETER"): what
    # it may read indirectly.
    named: set[str] = field(default_factory=set)
    prefixes: set[str] = field(default_factory=set)
    suffixes: set[str] = field(default_factory=set)

    def reads_name(self, name: str) -> bool:
        return (name in self.reads or name in self.named
                or any(name.startswith(prefix) for prefix in self.prefixes)
                or any(name.endswith(suffix) and name[:-len(suffix)] in self.named
                       for suffix in self.suffixes)
                # "${prefix}_SHA256_${arch^^}": a stem, then more, the prefix spelled out
                # where it is passed (install_pinned_release K0S ...).
                or any(name.startswith(stem + suffix) for suffix in self.suffixes
                       if suffix.endswith("_") for stem in self.named))

    @property
    def environment(self) -> set[str]:
        """What it reads that none of its files sets: its inputs."""
        return {name for name in self.reads - self.assigned - SHELL_NAMES
                if not name.startswith("GPU_CLUSTER_")}


def _scan_code(code: str, checkers: set[str], scan: Scan) -> None:
    scan.named.update(re.findall(r"(?<![\w$])[A-Z][A-Z0-9_]*[A-Z0-9](?![\w=])", code))
    scan.prefixes.update(re.findall(r"\b([A-Z][A-Z0-9_]*_)\$\{", code))
    scan.suffixes.update(re.findall(r"\$\{\w+\}(_[A-Z][A-Z0-9_]*)", code))
    for match in _READ.finditer(code):
        scan.reads.add(match[1] or match[2])
    for match in re.finditer(rf"\b(?:{'|'.join(sorted(checkers))})\b{_WORD_LIST}", code):
        words = re.findall(r"(?<![$\w{])[A-Z][A-Z0-9_]*\b", match[1])
        scan.checked.update(words)
        scan.reads.update(words)
    if re.search(rf"\b(?:{'|'.join(sorted(checkers))})\b[^\n]*\"\$\{{required\[@\]\}}\"", code):
        for match in _CHECKED_ARRAY.finditer(code):
            scan.checked.update(re.findall(r"[A-Z][A-Z0-9_]*", match[1]))
    for match in _CHECKED_LOOP.finditer(code):
        words = re.findall(r"[A-Z][A-Z0-9_]*", match[2])
        scan.checked.update(words)
        scan.reads.update(words)
    for match in _ASSIGN.finditer(code):
        scan.assigned.add(match[1])
    for match in _DECLARE.finditer(code):
        scan.assigned.update(re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]*)(?![\w}])", match[1]))
    for match in _READ_INTO.finditer(code):
        scan.assigned.add(match[1])
    # NAME=${NAME:-...}: a default for an input, not a name of its own.
    for match in re.finditer(r"^\s*([A-Z][A-Z0-9_]*)=\"?\$\{\1[:}-]", code, re.M):
        scan.assigned.discard(match[1])


def scan_files(files: list[str]) -> Scan:
    """What the step that runs `files` (libraries first, its script last) reads, sets and
    checks: its script whole, the libraries' top-level code and the functions reached."""
    *libraries, script = files
    scan = Scan()
    if script.endswith(".py"):
        scan.reads |= set(_PY_READ.findall(read_script(script)))
        return scan
    library_functions: dict[str, str] = {}
    reached = [code_of(read_script(script))]
    for library in libraries:
        functions, top = functions_of(code_of(read_script(library)))
        library_functions.update(functions)
        reached.append(top)
    checkers = _checkers(library_functions) | _checkers(functions_of(reached[0])[0])
    pending = "\n".join(reached)
    done: set[str] = set()
    while True:
        new = {name for name in library_functions if name not in done
               and re.search(rf"(?<![\w-]){name}\b", pending)}
        if not new:
            break
        done |= new
        pending = "\n".join(library_functions[name] for name in new)
        reached.append(pending)
    for code in reached:
        _scan_code(code, checkers, scan)
    return scan


# Files a script sources that are installed beside it from another file of the tree: the
# backup commands' cluster-state.sh is the distribution's (backup/install-backup.sh).
INSTALLED_FROM = {"backup/cluster-state.sh": ("k0s/cluster-state.sh", "rke2/cluster-state.sh")}


def script_files(path: str) -> list[str]:
    """The files a script runs with: the libraries it sources, then itself."""
    if not path.endswith(".sh"):
        return [path]
    folder = (SCRIPTS_DIR / path).parent
    libraries: list[str] = []
    for relative in _SOURCE.findall(read_script(path)):
        sourced = str((folder / relative).resolve().relative_to(SCRIPTS_DIR.resolve()))
        for library in INSTALLED_FROM.get(sourced, (sourced,)):
            # What a library sources of another folder (upgrade/lib.sh: node/lib.sh) first.
            libraries += [*sourced_libraries(library), library]
    if libraries and "lib.sh" not in libraries:
        # A folder's lib.sh loads lib.sh (tests/scripts/shellcheck.bats holds it), which
        # sourced_libraries leaves out: every step runs it first.
        libraries.insert(0, "lib.sh")
    return list(dict.fromkeys(libraries)) + [path]


def all_scripts() -> list[str]:
    """Every script under components/scripts/ but the libraries and check additions."""
    return sorted(str(p.relative_to(SCRIPTS_DIR)) for p in SCRIPTS_DIR.rglob("*")
                  if p.suffix in (".sh", ".py") and p.name != "lib.sh"
                  and p.parent.name != "check"
                  # Sourced by others, never run: run-step.sh, cluster-state.sh.
                  and not p.read_text().startswith("# shellcheck shell=bash"))
