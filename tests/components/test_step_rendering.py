"""The step renderers hold any host, step or user name they are given: the config refuses
line breaks and quotes there, and the scripts and the SSH command line do not rely on it."""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from components.common.remote_step import Script, _command, render_envelope, render_step_functions

MARKER = Path(tempfile.gettempdir()) / f"gpu-cluster-rendering-{os.getpid()}"


@pytest.fixture(autouse=True)
def _no_marker():
    MARKER.unlink(missing_ok=True)
    yield
    MARKER.unlink(missing_ok=True)


def _prologue(script: str) -> str:
    # Before the first function: comments and exports only, safe to run.
    return script.split("\ngpu_cluster_create() {", 1)[0] + "\n"


# The renderers hold whatever reaches them, config rules or not.
RENDERER_VALUES = {
    "line break, command": f"h\ntouch {MARKER} #",
    "quote, command": f"h'; touch {MARKER}; '",
    "carriage return": f"h\rtouch {MARKER} #",
}


@pytest.mark.parametrize("value", RENDERER_VALUES.values(), ids=RENDERER_VALUES.keys())
def test_a_step_script_header_holds_any_host_and_step(value, tmp_path):
    script = Script("preflight.sh")
    for text in (render_envelope(value, value, script, {"X": value}),
                 render_step_functions(value, value, script, {}, boot_libraries="/lib")):
        first_line = text.split("\n", 1)[0]
        assert first_line.startswith("# gpu-cluster step ") and "touch" in first_line
        subprocess.run(["bash", "--norc", "-c", _prologue(text)], capture_output=True,
                       cwd=tmp_path, timeout=30)
        assert not MARKER.exists()


@pytest.mark.parametrize("value", RENDERER_VALUES.values(), ids=RENDERER_VALUES.keys())
def test_the_ssh_command_line_holds_any_host_step_and_user(value, tmp_path):
    (tmp_path / "sudo").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "sudo").chmod(0o755)
    result = subprocess.run(["bash", "--norc", "-c", _command(value, value, "create", value)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=30,
                            env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert not MARKER.exists()
    assert result.returncode == 1 and "needs passwordless sudo" in result.stderr
