"""Imports are paid only where used: a stack without AWS never loads the AWS SDK (about a
third of a preview's import time), and the program never loads test-only code. Each case
runs in a fresh interpreter, since this one has imported everything already."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parents[2]

# Runs the program for a stack under the mocks, or the whole preview command (artifacts
# included), and prints the top-level packages loaded.
_PROBE = """
import json, sys
from pathlib import Path
project, stack, what, build = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
if what == "program":
    from preview.engine import run_program
    from preview.stack_file import read_stack
    run_program(project, read_stack(project, stack))
else:
    from preview.__main__ import main
    assert main([stack, "--quiet", "--build-dir", build]) == 0
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""

# Packages only the tests and the benchmarks use, and the acceptance checks (which the
# preview command renders, the program never).
TEST_ONLY = {"acceptance", "tests", "benchmarks", "pytest", "_pytest", "hypothesis", "xdist"}


def loaded_packages(stack: str, what: str, build: Path) -> set[str]:
    result = subprocess.run([sys.executable, "-c", _PROBE, str(PROJECT_DIR), stack, what,
                             str(build)],
                            cwd=PROJECT_DIR, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_a_bare_metal_preview_does_not_import_the_aws_sdk(tmp_path):
    packages = loaded_packages("lab", "preview", tmp_path)
    assert (tmp_path / "lab" / "plan.json").is_file()
    assert "pulumi_aws" not in packages
    # The probe sees the program's imports: the Kubernetes SDK is one of them.
    assert "pulumi_kubernetes" in packages


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_program_imports_no_test_only_code(stack, tmp_path):
    assert not loaded_packages(stack, "program", tmp_path) & TEST_ONLY
