"""shellcheck over every shell script the repository holds and every script the preview
renders, each checked once: tests/scripts/shellcheck.bats covers components/scripts and
the bats helpers, tests/stacks/test_artifacts.py the lab stack's rendered steps; this
file covers every other script and stack, and fails when a script is covered by none."""

import fnmatch
import subprocess

import pytest

from tests.builders import PROJECT_DIR, require_tool
from tests.scans.rendered_steps import shellcheck_rendered_steps
from tests.scans.test_checkov import repository_files
from preview.stack_file import EXAMPLE_STACKS

# What tests/scripts/shellcheck.bats checks, and the line there that proves it.
BATS = PROJECT_DIR / "tests" / "scripts" / "shellcheck.bats"
COVERED_BY_BATS = {
    "components/scripts/*.sh": "find components/scripts -name '*.sh'",
    "tests/scripts/stubs/stub": "tests/scripts/stubs/stub",
    "tests/scripts/helpers.bash": "tests/scripts/helpers.bash",
}
RENDERED_ELSEWHERE = {"lab": "tests/stacks/test_artifacts.py"}
# As in test_artifacts: the envelope inlines the libraries, so SC1091 (the guarded `source`
# lines are not taken), SC2034 (library variables serve other steps), SC2317 and SC2329
# (functions reached through the case dispatch or a boot part's runner, and library
# functions other steps use), SC2153 (a boot part's libraries are sourced from the
# instance's boot folder, where shellcheck cannot follow: their variables look unset);
# and SC2016, SC2089, SC2090: the envelope single-quotes
# every input on purpose, so a `$` or a quote inside one (a config file, a script passed as
# data) stays literal. The script files themselves are checked without excludes.
RENDERED_EXCLUDES = "SC1091,SC2016,SC2034,SC2089,SC2090,SC2153,SC2317,SC2329"


def is_shell_script(path: str) -> bool:
    if path.endswith((".sh", ".bash")):
        return True
    with open(PROJECT_DIR / path, "rb") as file:
        first = file.readline(200)
    return first.startswith(b"#!") and (b"bash" in first or first.rstrip().endswith(b"/sh"))


def shell_scripts() -> list:
    return sorted(p for p in repository_files() if not p.endswith(".bats") and is_shell_script(p))


def test_the_bats_suite_still_checks_what_this_file_leaves_to_it():
    text = BATS.read_text()
    for proof in COVERED_BY_BATS.values():
        assert proof in text, proof


def test_every_other_script_of_the_repository_is_shellcheck_clean():
    shellcheck = require_tool("shellcheck")
    scripts = shell_scripts()
    assert ".ci/run" in scripts and any(p.startswith("components/scripts/") for p in scripts)
    rest = [p for p in scripts if not any(fnmatch.fnmatch(p, g) for g in COVERED_BY_BATS)]
    assert ".ci/run" in rest
    result = subprocess.run([shellcheck, "-x", *rest], cwd=PROJECT_DIR, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout


STACKS = list(EXAMPLE_STACKS)


@pytest.mark.parametrize("stack", [s for s in STACKS if s not in RENDERED_ELSEWHERE])
def test_rendered_steps_of_the_other_stacks_are_shellcheck_clean(stack, tmp_path):
    from preview.__main__ import main

    shellcheck = require_tool("shellcheck")
    assert main([stack, "--build-dir", str(tmp_path), "--quiet"]) == 0
    scripts = sorted((tmp_path / stack).glob("hosts/*/*.sh"))
    assert scripts
    for script in scripts:
        syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert syntax.returncode == 0, (script, syntax.stderr)
    findings = shellcheck_rendered_steps(shellcheck, scripts, RENDERED_EXCLUDES)
    assert not findings, findings
