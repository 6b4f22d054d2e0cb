"""The step renderers hold any host, step or user name they are given: the config refuses
line breaks and quotes there, and the scripts and the SSH command line do not rely on it."""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from components.aws.boot import bootstrap_part
import components.common.bundle as bundle
from components.common.bundle import collect
from components.common.script_inputs import StepInputsError, file_inputs
from components.common.remote_step import step_command
from components.common.step_text import (
    RUNNER,
    Script,
    bundle_stdin,
    render_envelope,
    step_inputs,
    whole_text,
)
from tests.builders import TEST_PRIVATE_KEY

MARKER = Path(tempfile.gettempdir()) / f"gpu-cluster-rendering-{os.getpid()}"


@pytest.fixture(autouse=True)
def _no_marker():
    MARKER.unlink(missing_ok=True)
    yield
    MARKER.unlink(missing_ok=True)


def _prologue(script: str) -> str:
    # Before the first function (gpu_cluster_create, _step, _receive): comments and
    # exports only, safe to run.
    return re.split(r"\ngpu_cluster_[a-z]+\(\) \{", script, maxsplit=1)[0] + "\n"


# The renderers hold whatever reaches them, config rules or not.
RENDERER_VALUES = {
    "line break, command": f"h\ntouch {MARKER} #",
    "quote, command": f"h'; touch {MARKER}; '",
    "carriage return": f"h\rtouch {MARKER} #",
}


@pytest.mark.parametrize("value", RENDERER_VALUES.values(), ids=RENDERER_VALUES.keys())
def test_a_step_script_header_holds_any_host_and_step(value, tmp_path):
    script = Script("preflight.sh")
    # The inputs each script requires, every one of them `value`.
    step_env, boot_env = ({name: value for name in file_inputs(path).required}
                          for path in (script.path, "boot/bootstrap.sh"))
    for text in (render_envelope(value, value, script, step_env),
                 bundle_stdin(value, value, script, step_env),
                 bootstrap_part(value, boot_env).split("\n", 1)[1]):
        first_line = text.split("\n", 1)[0]
        assert first_line.startswith("# gpu-cluster step ") and "touch" in first_line
        subprocess.run(["bash", "--norc", "-c", _prologue(text)], capture_output=True,
                       cwd=tmp_path, timeout=30)
        assert not MARKER.exists()


@pytest.mark.parametrize("value", RENDERER_VALUES.values(), ids=RENDERER_VALUES.keys())
def test_the_ssh_command_line_holds_any_host_step_and_user(value, tmp_path):
    (tmp_path / "sudo").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "sudo").chmod(0o755)
    result = subprocess.run(["bash", "--norc", "-c", step_command(value, value, "create", value)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=30,
                            env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert not MARKER.exists()
    assert result.returncode == 1 and "needs passwordless sudo" in result.stderr


# Values a step's inputs may hold: the renderers quote them, step_inputs reads them back.
HOSTILE_INPUTS = {
    "SINGLE_QUOTES": "it's 'quoted'",
    "ESCAPE_ITSELF": "'\\''",
    "ENDS_WITH_QUOTE": "x'",
    "ONLY_QUOTES": "''",
    "COMMAND_SUBSTITUTION": "$(touch marker) `touch marker` ${HOME}",
    "PEM": TEST_PRIVATE_KEY,
    "EXPORT_LINE_INSIDE": "a\nexport GPU_CLUSTER_STEP='forged'\n'\nexport B='c",
    "FUNCTION_LINE_INSIDE": "\ngpu_cluster_create() {\n}\n",
    "BACKSLASHES_AND_CR": "C:\\path\\\r\n\\'",
    "EMPTY": "",
    "NEWLINES_ONLY": "\n\n",
}


def _with_exports_in_its_scripts(monkeypatch, tmp_path) -> Script:
    """A step whose scripts export variables of their own, as scripts may."""
    (tmp_path / "lib.sh").write_text("export GPU_CLUSTER_STEP='from-the-library'\n")
    (tmp_path / "step.sh").write_text(f"# Optional inputs: {' '.join(HOSTILE_INPUTS)}\n"
                                      "export EXTRA='from-the-script'\necho done\n")
    (tmp_path / "bundle").mkdir()
    shutil.copy(bundle.SCRIPTS_DIR / RUNNER, tmp_path / RUNNER)
    monkeypatch.setattr(bundle, "SCRIPTS_DIR", tmp_path)
    return Script("step.sh")


def test_step_inputs_reads_back_what_the_renderers_wrote(monkeypatch, tmp_path):
    script = _with_exports_in_its_scripts(monkeypatch, tmp_path)
    host, step = "gpu-01", "install-nvidia"
    expected = {"GPU_CLUSTER_HOST": host, "GPU_CLUSTER_STEP": step, **HOSTILE_INPUTS}
    texts = {
        "ssh stdin": render_envelope(host, step, script, HOSTILE_INPUTS, delete=script),
        "bundle stdin": bundle_stdin(host, step, script, HOSTILE_INPUTS, delete=script,
                                     bundle=collect(tmp_path)),
    }
    for where, text in texts.items():
        assert step_inputs(text) == expected, where
    assert step_inputs("#!/bin/bash\nexport A='b'\n") == {}


def test_step_inputs_agrees_with_bash(monkeypatch, tmp_path):
    """What step_inputs decodes is what the step's script sees when bash runs the
    envelope from stdin, as the SSH command does."""
    names = ["GPU_CLUSTER_HOST", "GPU_CLUSTER_STEP", *HOSTILE_INPUTS]
    (tmp_path / "lib.sh").write_text("")
    (tmp_path / "dump.sh").write_text(f"# Optional inputs: {' '.join(HOSTILE_INPUTS)}\n" + "".join(
        f'printf "%s\\0" "${name}"\n' for name in names))
    monkeypatch.setattr(bundle, "SCRIPTS_DIR", tmp_path)
    text = render_envelope("gpu-01", "join-worker", Script("dump.sh"), HOSTILE_INPUTS)
    result = subprocess.run(["bash", "--norc", "-s", "--", "create"], input=text.encode(),
                            capture_output=True, cwd=tmp_path, timeout=30, check=True)
    seen = dict(zip(names, result.stdout.decode().split("\0")[:-1]))
    assert step_inputs(text) == seen == {"GPU_CLUSTER_HOST": "gpu-01",
                                         "GPU_CLUSTER_STEP": "join-worker", **HOSTILE_INPUTS}
    assert not (tmp_path / "marker").exists()


def test_a_bundle_step_is_held_to_the_headers_of_the_bundle_it_runs(tmp_path):
    """bundle_stdin reads the declared inputs from the bundle's files, which the step
    runs, not from the checkout's: a step only that bundle holds renders with what it
    declares, and an input it does not declare is refused."""
    (tmp_path / "lib.sh").write_text("")
    (tmp_path / "bundle").mkdir()
    shutil.copy(bundle.SCRIPTS_DIR / RUNNER, tmp_path / RUNNER)
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "step.sh").write_text("# Inputs: OWN_INPUT\n")
    own, step = collect(tmp_path), Script("own/step.sh")

    stdin = bundle_stdin("gpu-01", "own", step, {"OWN_INPUT": "x"}, bundle=own)

    assert step_inputs(stdin)["OWN_INPUT"] == "x"
    with pytest.raises(StepInputsError, match="^step 'own' on 'gpu-01': OTHER not declared "
                       "by own/step.sh"):
        bundle_stdin("gpu-01", "own", step, {"OWN_INPUT": "x", "OTHER": "y"}, bundle=own)


def test_a_step_gets_the_libraries_its_own_source_lines_name(tmp_path, monkeypatch):
    """A step script that sources a library of another folder (os/lib.sh), with the guarded
    line libraries use, runs with it: in its envelope, as a bundle file the runner checks by
    sha256, and in whole_text, in the order a standalone run sources them (lib.sh first)."""
    import components.common.step_text as step_text
    (tmp_path / "lib.sh").write_text("GPU_CLUSTER_LIB_LOADED=1\n")
    (tmp_path / "bundle").mkdir()
    shutil.copy(bundle.SCRIPTS_DIR / RUNNER, tmp_path / RUNNER)
    (tmp_path / "os").mkdir()
    (tmp_path / "os" / "x.sh").write_text(
        '[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"\n'
        "GPU_CLUSTER_OS_X_LOADED=1\nos_x() { echo os-x; }\n")
    (tmp_path / "step.sh").write_text(
        "# Inputs: OWN_INPUT\n"
        '[[ -n "${GPU_CLUSTER_LIB_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"\n'
        '[[ -n "${GPU_CLUSTER_OS_X_LOADED:-}" ]] || source "$(dirname "${BASH_SOURCE[0]}")/os/x.sh"\n'
        "main() { os_x; }\nmain\n")
    for module in (bundle, step_text):
        monkeypatch.setattr(module, "SCRIPTS_DIR", tmp_path)
    # Both caches hold the checkout's files by path: emptied before and after.
    step_text.sourced_libraries.cache_clear()
    step_text._read_file.cache_clear()
    try:
        step, own = Script("step.sh"), collect(tmp_path)
        assert step.files == ["lib.sh", "os/x.sh", "step.sh"]

        envelope_text = render_envelope("gpu-01", "own", step, {"OWN_INPUT": "x"})
        stdin = bundle_stdin("gpu-01", "own", step, {"OWN_INPUT": "x"}, bundle=own)
    finally:
        step_text.sourced_libraries.cache_clear()
        step_text._read_file.cache_clear()

    assert "os_x() { echo os-x; }" in envelope_text
    assert f"  'create os/x.sh {own.sha256('os/x.sh')}' \\\n  'create step.sh " in stdin
    assert whole_text(stdin, bundle=own) == envelope_text
    run = subprocess.run(["bash", "-c", envelope_text], capture_output=True, text=True)
    assert run.stdout == "os-x\n", run.stderr
