"""Runs the bats suites for the bootstrap scripts (temporary root, stubbed commands)."""

import subprocess
from pathlib import Path

from tests.conftest import PROJECT_DIR, require_tool


def test_bootstrap_scripts_bats_suite():
    bats = require_tool("bats")
    require_tool("shellcheck")
    suites = sorted(str(p) for p in Path(__file__).parent.glob("*.bats"))
    assert suites, "no bats suites found"
    result = subprocess.run([bats, "--print-output-on-failure", *suites], cwd=PROJECT_DIR,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    assert " 0 failures" in result.stdout or "not ok" not in result.stdout
