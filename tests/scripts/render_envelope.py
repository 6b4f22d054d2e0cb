"""Prints a step's envelope as the program renders it (render_envelope), for the bats tests:
`render_envelope.py HOST STEP SCRIPT [NAME=VALUE...]`. SCRIPT is a path under
components/scripts/; the program's own Script for it is used (with its check support)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from components.common.step_text import Script, render_envelope  # noqa: E402
from components.hosts import authorized_keys, steps  # noqa: E402
from components.network import vpn_bridge  # noqa: E402

PROGRAM_SCRIPTS = {script.path: script for module in (steps, authorized_keys, vpn_bridge)
                   for script in vars(module).values() if isinstance(script, Script)}


def main(host: str, step: str, path: str, *assignments: str) -> None:
    env = dict(assignment.split("=", 1) for assignment in assignments)
    sys.stdout.write(render_envelope(host, step, PROGRAM_SCRIPTS.get(path, Script(path)), env))


if __name__ == "__main__":
    main(*sys.argv[1:])
