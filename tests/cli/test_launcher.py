"""The `gpu-cluster` command `make` writes into the venv runs this checkout's CLI with the
venv's Python, from any folder."""

import subprocess
import sys
from pathlib import Path

from cli.launcher import install


def test_the_written_command_runs_from_anywhere(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    command = install(bin_dir)
    result = subprocess.run([str(command), "init", "--help"], cwd="/", capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: gpu-cluster init")
    assert command.read_text().startswith(f"#!{bin_dir / 'python'}\n")


def test_usage_errors_exit_2():
    result = subprocess.run([sys.executable, "-m", "cli", "init"], capture_output=True,
                            text=True, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 2 and "required" in result.stderr
