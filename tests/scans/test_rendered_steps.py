"""The shortcut tests/scans/rendered_steps.py takes finds what shellcheck finds over every
file: a finding in a shared body, and one in the export block of a file whose body was
checked in another file."""

import re
import subprocess

from components.common.step_text import Script, render_envelope
from tests.builders import require_tool
from tests.scans.rendered_steps import shellcheck_rendered_steps, split_step

# A real step with few inputs (SSH_USER; AUTHORIZED_KEYS optional): the render checks them.
STEP = Script("authorized-keys.sh")


def write_step(folder, host: str, env: dict, tail: str = ""):
    path = folder / host / "authorized-keys.sh"
    path.parent.mkdir(parents=True)
    path.write_text("#!/usr/bin/env bash\n# Rendered by the offline preview.\n"
                    + render_envelope(host, "authorized-keys", STEP, env) + tail)
    return path


def codes(output: str) -> set[str]:
    return set(re.findall(r"SC\d{4}", output))


def test_a_step_splits_after_its_last_export(tmp_path):
    path = write_step(tmp_path, "gpu01", {"SSH_USER": "it's", "AUTHORIZED_KEYS": "two\nlines"})
    block, names, body = split_step(path.read_text())
    assert names == ("GPU_CLUSTER_HOST", "GPU_CLUSTER_STEP", "SSH_USER", "AUTHORIZED_KEYS")
    assert block.endswith("export AUTHORIZED_KEYS='two\nlines'\n")
    assert body.startswith("gpu_cluster_create() {")


def test_the_shortcut_finds_what_a_run_over_every_file_finds(tmp_path):
    shellcheck = require_tool("shellcheck")
    # The same body on both hosts, with a finding of its own (an unquoted expansion); the
    # second host's value ends in a backslash, which shellcheck reads as a mistaken escape.
    tail = 'rm $GPU_CLUSTER_HOST\n'
    first = write_step(tmp_path, "gpu01", {"SSH_USER": "ops"}, tail)
    second = write_step(tmp_path, "gpu02", {"SSH_USER": "C:\\"}, tail)
    excludes = "SC1091,SC2034,SC2317"
    found = shellcheck_rendered_steps(shellcheck, [first, second], excludes)
    every = subprocess.run([shellcheck, "--shell=bash", f"--exclude={excludes}",
                            str(first), str(second)], capture_output=True, text=True).stdout
    assert codes(found) == codes(every) == {"SC1003", "SC2086"}
    # Each finding names the host and step it is in.
    [escape] = [line for line in found.splitlines() if "SC1003" in line]
    assert "gpu02-authorized-keys.sh:" in escape


def test_clean_steps_have_no_findings(tmp_path):
    shellcheck = require_tool("shellcheck")
    steps = [write_step(tmp_path, host, {"SSH_USER": "ops"}) for host in ("gpu01", "gpu02")]
    assert shellcheck_rendered_steps(shellcheck, steps, "SC1091,SC2034,SC2317") == ""
