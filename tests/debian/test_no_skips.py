"""Where `make test` runs as root, set-up has installed every Debian package the tests
need, so nothing may skip: a skip fails, giving its reason (tests/conftest.py), and so does
a bats test's skip (tests/scripts/test_bats.py). Elsewhere a skip says why."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import PROJECT_DIR
from tests.scripts import test_bats

PROBE = Path(__file__).with_name("skipping_probe.py")


def run_probe(**env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "GPU_CLUSTER_NO_SKIPS"}
    return subprocess.run([sys.executable, "-m", "pytest", "-n0", str(PROBE)], cwd=PROJECT_DIR,
                          env={**environ, **env}, capture_output=True, text=True, timeout=300)


def test_a_skip_fails_where_nothing_may_skip():
    result = run_probe(GPU_CLUSTER_NO_SKIPS="1")
    assert result.returncode == 1, result.stdout
    assert "1 failed" in result.stdout
    assert ("skipped where every tool the tests need is installed (GPU_CLUSTER_NO_SKIPS=1, "
            "make test as root): frobnicate is not installed") in result.stdout


def test_elsewhere_a_skip_says_why():
    result = run_probe()
    assert result.returncode == 0, result.stdout
    assert "SKIPPED" in result.stdout and "frobnicate is not installed" in result.stdout


TAP = ("1..2\nok 1 loads the ruleset # skip needs root, nft and nsenter\n"
       "ok 2 renders the ruleset\n")


def test_a_bats_skip_is_a_warning_elsewhere(monkeypatch):
    monkeypatch.setattr(test_bats, "NO_SKIPS", False)
    with pytest.warns(UserWarning, match="x.bats: 1 test.* loads the ruleset: needs root"):
        test_bats.report_skips(Path("x.bats"), TAP)


def test_a_bats_skip_fails_where_nothing_may_skip(monkeypatch):
    monkeypatch.setattr(test_bats, "NO_SKIPS", True)
    with pytest.raises(AssertionError, match="loads the ruleset: needs root"):
        test_bats.report_skips(Path("x.bats"), TAP)
    test_bats.report_skips(Path("x.bats"), "1..1\nok 1 renders the ruleset\n")


def make_test(tmp_path: Path, uid: int, **env) -> str:
    """`make test`'s recipe with a stand-in venv whose python prints what it was given, and
    an `id` that says who runs it; set-up is the real tests/debian/setup.sh over an empty
    list."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text('#!/bin/sh\necho "NO_SKIPS=${GPU_CLUSTER_NO_SKIPS:-unset} $*"\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for tool in (python, bin_dir / "id"):
        tool.chmod(0o755)
    for made in (".program", "bin/gpu-cluster", ".installed"):  # newer than what they need
        (venv / made).touch()
    empty = tmp_path / "packages.txt"
    empty.write_text("# nothing\n")
    outer = {k: v for k, v in os.environ.items() if k != "GPU_CLUSTER_NO_SKIPS"}
    result = subprocess.run(
        ["make", "--no-print-directory", "-s", "test", f"VENV={venv}"], cwd=PROJECT_DIR,
        env={**outer, "PATH": f"{bin_dir}:{os.environ['PATH']}",
             "DEBIAN_PACKAGES_LIST": str(empty), **env},
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_make_test_as_root_lets_nothing_skip(tmp_path):
    assert make_test(tmp_path, 0) == "NO_SKIPS=1 -m pytest"


def test_make_test_without_root_or_with_the_opt_out_keeps_skips(tmp_path):
    assert make_test(tmp_path / "user", 1000) == "NO_SKIPS=unset -m pytest"
    assert make_test(tmp_path / "opt-out", 0, GPU_CLUSTER_TESTS_WITHOUT_DEBIAN="1") == \
        "NO_SKIPS=unset -m pytest"
