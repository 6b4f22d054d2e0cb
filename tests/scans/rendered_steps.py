"""shellcheck and checkov over the step scripts a preview writes
(build/<stack>/hosts/<host>/<step>.sh), reading every line of every file but the shared
text only once per kind of step.

A rendered step is its export block (the preview's comment, the step's header and one
`export NAME='value'` per input) and then the body: the libraries and the step's scripts,
the same bytes on every host that runs the step. The values are single-quoted literals, so
what shellcheck finds in a body depends on the names exported before it, never on their
values; and what it finds on an export line is about that line. checkov's secrets scan
reads line by line. So each distinct (names, body) is checked whole in one of its files,
and every file's export block is checked on its own: the same findings as one run over
every file, in a fraction of the time (most of a run is the body's 20-70 KB of
libraries, read again for each host)."""

import re
import subprocess
import tempfile
from pathlib import Path

from components.common.step_text import _EXPORT, _HEADER

_STEP_HEADER = re.compile(rf"^{_HEADER}.*\n", re.M)


def split_step(text: str) -> tuple[str, tuple[str, ...], str]:
    """(export block, exported names, body) of a rendered step."""
    header = _STEP_HEADER.search(text)
    assert header is not None, "not a rendered step"
    names, position = [], header.end()
    while (line := _EXPORT.match(text, position)) is not None:
        names.append(line[1])
        position = line.end()
    return text[:position], tuple(names), text[position:]


def keep_each_body_once(scripts: list[Path]) -> None:
    """Rewrites `scripts` in place (a copy of a build) so each (names, body) is left whole
    in its first file and the others keep their export blocks only."""
    seen = set()
    for script in sorted(scripts):
        block, names, body = split_step(script.read_text())
        if (names, body) in seen:
            script.write_text(block)
        seen.add((names, body))


def shellcheck_rendered_steps(shellcheck: str, scripts: list[Path], excludes: str) -> str:
    """shellcheck's findings over `scripts` (empty when clean), each named by its file."""
    with tempfile.TemporaryDirectory() as folder:
        # Copies named after the host and step they come from, as the findings name them.
        copies = [Path(folder) / f"{index:04d}-{script.parent.name}-{script.name}"
                  for index, script in enumerate(scripts)]
        for script, copy in zip(scripts, copies):
            copy.write_text(script.read_text())
        keep_each_body_once(copies)
        result = subprocess.run(
            # One line per finding, naming its file.
            [shellcheck, "--shell=bash", "--format=gcc", f"--exclude={excludes}",
             *map(str, copies)], capture_output=True, text=True)
    if result.returncode == 0:
        return ""
    return result.stdout + result.stderr or f"shellcheck exited {result.returncode}"
