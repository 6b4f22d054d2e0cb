"""A command run as a user runs it, from the project folder: its exit code checked, and never
a traceback (every failure is one line, and a report)."""

import subprocess

from tests.builders import PROJECT_DIR


def run(argv: list, env: dict = None, expect: int = 0, cwd=PROJECT_DIR,
        timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([str(part) for part in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == expect, (
        f"{' '.join(map(str, argv))}: exit {done.returncode}, not {expect}\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    assert "Traceback" not in done.stderr, done.stderr
    return done
