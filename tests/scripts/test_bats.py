"""Runs the bats suites for the bootstrap scripts (temporary root, stubbed commands), one
test per suite file, so the suites run in parallel under pytest-xdist."""

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.builders import NO_SKIPS, PROJECT_DIR, require_tool

SUITES = sorted(Path(__file__).parent.glob("*.bats"))


def test_there_are_bats_suites():
    assert len(SUITES) > 20


@pytest.mark.parametrize("suite", SUITES, ids=lambda path: path.stem)
def test_bats_suite(suite: Path):
    bats = require_tool("bats")
    require_tool("shellcheck")
    # check.bats renders envelopes with the program (tests/scripts/render_envelope.py).
    env = {**os.environ, "GPU_CLUSTER_PYTHON": sys.executable}
    result = subprocess.run([bats, "--print-output-on-failure", str(suite)], cwd=PROJECT_DIR, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    assert "not ok" not in result.stdout
    report_skips(suite, result.stdout)


def report_skips(suite: Path, tap: str) -> None:
    """A bats test that skips (TAP `ok N name # skip reason`) is not a pytest skip, since
    the suite's other tests ran: it is a warning in pytest's summary, and a failure where
    nothing may skip (tests/conftest.py NO_SKIPS)."""
    skipped = re.findall(r"^ok \d+ (.*?) # skip ?(.*)$", tap, re.MULTILINE)
    if not skipped:
        return
    listing = "; ".join(f"{name}: {reason or 'no reason given'}" for name, reason in skipped)
    message = f"{suite.name}: {len(skipped)} test(s) skipped: {listing}"
    assert not NO_SKIPS, f"skipped where every tool the tests need is installed: {message}"
    warnings.warn(message, stacklevel=2)
