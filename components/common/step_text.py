"""A step's text: the scripts under components/scripts/ and how a step's inputs and the
files it runs are written for bash.

`bundle_stdin` is a step's stdin when its machine holds the step bundle
(components/common/bundle.py): its inputs as exports, then a loader that checks
bundle/run-step.sh by its sha256 and hands it, for each action, the bundle files the step
runs with theirs. A change to a file the step runs (its script or a library it sources)
changes that stdin; a change to any other file of the bundle leaves it alone.

`render_envelope` renders a step whole, its scripts pasted in: the preview's build folder,
which the doctor sends as it is, and the commands that run where `pulumi up` runs;
`whole_text` turns a bundle stdin into that same text. Every value is single-quoted, and
`step_inputs` reads them back.
"""

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pulumi

from components.common.bundle import SCRIPTS_DIR, Bundle, script_path, step_bundle
from contract.names import ENVELOPE_BRANCH
from components.common.script_inputs import check_step_inputs

# The check mode of steps (check/lib.sh) and their additions; SSH envelopes only.
CHECK_FOLDER = "check"


@dataclass(frozen=True)
class Script:
    """A script under components/scripts/ plus the libraries it sources."""

    path: str  # relative to components/scripts/, e.g. "k0s/join-worker.sh"
    # Libraries of other folders it runs with though its own text does not source them
    # (reboot-if-needed.sh on a drained worker: "upgrade/lib.sh"); what it sources it gets.
    extra_libraries: tuple[str, ...] = ()
    # Whether its envelope answers `check`: the script in check mode (check/lib.sh), then
    # its additions check/<name> when there are any. Only for scripts whose changes all
    # go through what check/lib.sh intercepts; any other script answers `unknown action`.
    checks: bool = False
    # Sources no library (bundle/receive.sh, which runs before the machine has any).
    standalone: bool = False

    @property
    def libraries(self) -> list[str]:
        if self.standalone:
            return []
        libraries = ["lib.sh"]
        folder = Path(self.path).parent
        if str(folder) != "." and script_path(f"{folder}/lib.sh").exists():
            libraries.append(str(folder / "lib.sh"))
        ordered: list[str] = []
        for library in libraries + list(self.extra_libraries):
            # What a library sources of another folder (k0s/lib.sh: node/lib.sh) comes first.
            for needed in [*sourced_libraries(library), library]:
                if needed not in ordered:
                    ordered.append(needed)
        # Then what the script itself sources (os/lib.sh): one declaration, its source line,
        # which a standalone run follows too (a step only a given bundle holds has none here).
        own = sourced_libraries(self.path) if script_path(self.path).exists() else ()
        return ordered + [library for library in own if library not in ordered]

    @property
    def files(self) -> list[str]:
        """What its create (or delete) runs, in order: its libraries, then itself."""
        return self.libraries + [self.path]

    @property
    def check_files(self) -> list[str]:
        """What its check runs: the script in check mode and its additions, after which
        check_result gives the verdict (exit 0 in sync, 3 drifted)."""
        additions = f"{CHECK_FOLDER}/{Path(self.path).name}"
        return (self.libraries + [f"{CHECK_FOLDER}/lib.sh", self.path]
                + ([additions] if script_path(additions).exists() else []))


# An include-guarded `source` of a library, relative to the sourcing file's folder.
_SOURCE_LINE = re.compile(r'^\[\[ -n "\$\{GPU_CLUSTER_\w+_LOADED:-\}" \]\] \|\| '
                          r'source "\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)/([a-z0-9./-]+)"$', re.M)


@functools.lru_cache(maxsize=None)
def sourced_libraries(library: str) -> tuple[str, ...]:
    """The libraries `library` (a library or a step script) sources beyond lib.sh (its own
    `source` lines, which only run standalone: a step's envelope and bundle load them as its
    files), those first."""
    found: list[str] = []
    folder = (SCRIPTS_DIR / library).parent
    for relative in _SOURCE_LINE.findall(read_script(library)):
        path = str((folder / relative).resolve().relative_to(SCRIPTS_DIR.resolve()))
        if path != "lib.sh":
            found += [*sourced_libraries(path), path]
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class DataFile:
    """A file under components/scripts/ that steps get as an input, not as a script."""

    path: str

    def text(self) -> str:
        return read_script(self.path)


# Reads an SSM parameter with the instance's role on images without the AWS CLI; steps
# that read one get it as SSM_READER.
SSM_READER = DataFile("ssm-parameter.py")


def read_script(relative: str) -> str:
    """The text of a file under components/scripts/."""
    return _read_file(script_path(relative))


@functools.lru_cache(maxsize=None)
def _read_file(path: Path) -> str:
    # Each script is read once per run, not once per host.
    return path.read_text()


_HEADER = "# gpu-cluster step "
_SHELLCHECK_LITERAL_DOLLAR = "# shellcheck disable=SC2016"


def envelope(
    host: str,
    step: str,
    create: Script,
    env: Mapping[str, pulumi.Input[str]],
    delete: Optional[Script] = None,
    render=None,
) -> pulumi.Input[str]:
    """The stdin of a step: its inputs as exports, then what it runs wrapped in functions
    so bash has read all of stdin before any command runs (an apt-get reading stdin
    cannot swallow the rest of the script). `render`: render_envelope (the scripts
    pasted in, the default) or bundle_stdin."""
    render = render or render_envelope
    # Checked here too, for inputs that are Outputs: before the apply, which a preview may
    # never run.
    check_step_inputs(host, step, _step_files(create, delete), env, read_script)
    if all(isinstance(value, str) for value in env.values()):
        # The same text, without the Outputs an apply over plain values would make (most
        # host steps' inputs are plain: a large stack registers faster).
        return render(host, step, create, dict(env), delete)
    names = list(env.keys())
    return pulumi.Output.all(*env.values()).apply(
        lambda values: render(host, step, create, dict(zip(names, values)), delete))


def render_envelope(host: str, step: str, create: Script, env: Mapping[str, str],
                    delete: Optional[Script] = None) -> str:
    """The envelope's text, for inputs that are all known: its header and inputs, then
    each action's scripts as a function. A script that `checks` gets gpu_cluster_check and
    the `check` action."""
    texts = {action: [read_script(path) for path in paths]
             for action, paths in _actions(create, delete).items()}
    return step_header(host, step, create, env, delete) + _step_body(texts)


def _step_body(texts: Mapping[str, list[str]]) -> str:
    """The functions gpu_cluster_ACTION, each the texts of its action's files, and the case
    that calls the one asked for."""
    lines = []
    for action in ("create", "delete"):
        if action in texts:
            lines += [f"gpu_cluster_{action}() {{", "\n".join(texts[action]), "}"]
    if "check" in texts:
        # check/lib.sh redefines the lib.sh functions it intercepts, so their first
        # definitions in this function are never called.
        lines += ["# shellcheck disable=SC2329", "gpu_cluster_check() {", *texts["check"],
                  "check_result", "}"]
    return "\n".join(lines + _case_lines(texts)) + "\n"


def step_header(host: str, step: str, create: Script, env: Mapping[str, str],
                delete: Optional[Script] = None, read: Callable[[str], str] = read_script
                ) -> str:
    """A step's header comment and its inputs as exports, each value single-quoted; the
    inputs are those its scripts declare (components/common/script_inputs.py), as `read`
    gives their text: the checkout's, or the bundle's the step runs from."""
    check_step_inputs(host, step, _step_files(create, delete), env, read)
    lines = [
        f"{_HEADER}'{_in_comment(step)}' on host '{_in_comment(host)}' ({create.path}"
        + (f", delete: {delete.path})" if delete else ")"),
    ]
    for name, value in {"GPU_CLUSTER_HOST": host, "GPU_CLUSTER_STEP": step, **env}.items():
        if "$" in str(value) and "\n" not in str(value):
            # A `$` in a value (a URN's parent types) is literal on purpose.
            lines.append(_SHELLCHECK_LITERAL_DOLLAR)
        lines.append(f"export {name}={single_quoted(str(value))}")
    return "\n".join(lines) + "\n"


# One export line as step_header writes it: inside the quotes every `'` is the
# escape `'\''`, so the value ends at the first `'` that is not one.
_EXPORT = re.compile(rf"(?:{_SHELLCHECK_LITERAL_DOLLAR}\n)?export (\w+)='([^']*(?:'\\''[^']*)*)'\n")


def step_inputs(text: str) -> dict[str, str]:
    """The exports of a step's envelope or boot part (GPU_CLUSTER_HOST, GPU_CLUSTER_STEP
    and its inputs), decoded: the inverse of step_header. Only the block after
    the step's header is read, never an `export` in the scripts; {} without a header."""
    header = re.search(rf"^{_HEADER}.*\n", text, re.M)
    if header is None:
        return {}
    inputs, position = {}, header.end()
    while (line := _EXPORT.match(text, position)) is not None:
        inputs[line[1]] = line[2].replace("'\\''", "'")
        position = line.end()
    return inputs


# The runner every bundle stdin sources (bundle/run-step.sh), and the line that lists an
# action's files: 'ACTION PATH SHA256'.
RUNNER = "bundle/run-step.sh"
_FILE_LINE = re.compile(r"^  '(create|delete|check) ([a-z0-9._/-]+) ([0-9a-f]{64})'(?: \\)?$", re.M)
# Where the loader looks for the runner: the step's own copy (kept for its delete), the
# current bundle, then any bundle on the machine.
_LOADER_START = "\ngpu_cluster_step() {\n"
_LOADER = """\
gpu_cluster_step() {{
  local root="${{GPU_CLUSTER_ROOT:-}}/var/lib/gpu-cluster" runner="" candidate
  for candidate in "$root/steps/$GPU_CLUSTER_HOST/$GPU_CLUSTER_STEP" "$root/bundles/current" \\
    "$root"/bundles/*; do
    if [[ "$(sha256sum -- "$candidate/{runner}" 2>/dev/null | cut -c1-64)" == {sha} ]]; then
      runner="$candidate/{runner}"
      break
    fi
  done
  if [[ -z "$runner" ]]; then
    echo "gpu-cluster: $GPU_CLUSTER_HOST: $GPU_CLUSTER_STEP: refused: no step bundle on this" \\
      "host holds {runner} {sha}: the bundle step installs it before any other step" >&2
    exit 1
  fi
  # shellcheck source=/dev/null
  source "$runner"
  gpu_cluster_run_step "$1" \\
{files}
}}
gpu_cluster_step "${{1:-create}}"
"""


def _actions(create: Script, delete: Optional[Script]) -> dict[str, list[str]]:
    """The bundle files each action of a step runs, in order."""
    actions = {"create": create.files}
    if delete:
        actions["delete"] = delete.files
    if create.checks:
        actions["check"] = create.check_files
    return actions


def _step_files(create: Script, delete: Optional[Script]) -> list[str]:
    return [path for paths in _actions(create, delete).values() for path in paths]


def bundle_stdin(host: str, step: str, create: Script, env: Mapping[str, str],
                 delete: Optional[Script] = None, bundle: Optional[Bundle] = None) -> str:
    """A step's stdin when its machine holds the step bundle: its header and inputs as
    step_header writes them, then the loader, which checks the runner's sha256,
    and the files of each action with theirs."""
    bundle = bundle or step_bundle()
    lines = [f"  '{action} {path} {bundle.sha256(path)}'"
             for action, paths in _actions(create, delete).items() for path in paths]
    return step_header(host, step, create, env, delete, bundle.text) + _LOADER.format(
        runner=RUNNER, sha=bundle.sha256(RUNNER), files=" \\\n".join(lines))


def whole_text(stdin: str, bundle: Optional[Bundle] = None) -> str:
    """A bundle stdin rendered whole, as render_envelope would have rendered the step: the
    files of each action pasted in. Any other text is returned as it is."""
    # The loader comes last: an input's value never reaches past it.
    header_end = stdin.rfind(_LOADER_START) + 1
    files = _FILE_LINE.findall(stdin[header_end:]) if header_end else []
    if not files:
        return stdin
    bundle = bundle or step_bundle()
    texts: dict[str, list[str]] = {}
    for action, path, _ in files:
        texts.setdefault(action, []).append(bundle.text(path))
    return stdin[:header_end] + _step_body(texts)


def _case_lines(actions: Mapping[str, list[str]]) -> list[str]:
    return ['case "${1:-create}" in',
            *[ENVELOPE_BRANCH.format(action=action)
              for action in ("create", "delete", "check") if action in actions],
            '  *) echo "gpu-cluster: unknown action: $1" >&2; exit 2 ;;',
            "esac"]


def single_quoted(value: str) -> str:
    # Always quoted, so a value (or its redaction in the preview) is never word-split or globbed.
    return "'" + quoted_text(value) + "'"


def quoted_text(value: str) -> str:
    """`value` as it stands between the single quotes of an envelope's export: a ' closes
    the quotes, adds an escaped quote and opens them again."""
    return value.replace("'", "'\\''")


def _in_comment(value: str) -> str:
    # A line break or other control character would end the comment and run the rest:
    # the config refuses them, and here they are escaped regardless.
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in value)
