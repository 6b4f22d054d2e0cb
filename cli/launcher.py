"""Writes the `gpu-cluster` command into the venv's bin folder (`make` runs it once): a
console script that runs cli.__main__ from this checkout, with the venv's Python.
`python -m cli.launcher BIN_DIR`."""

import os
import sys
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent


def script(python: str, project: Path) -> str:
    return (f"#!{python}\n"
            "# The gpu-cluster command of the checkout below (written by cli/launcher.py).\n"
            "import sys\n"
            f"sys.path.insert(0, {str(project)!r})\n"
            "from cli.__main__ import run\n"
            "run()\n")


def install(bin_dir: Path) -> Path:
    target = bin_dir / "gpu-cluster"
    # The venv's own python (not the resolved interpreter), so the venv's packages load.
    target.write_text(script(str(bin_dir.absolute() / "python"), PROJECT_DIR))
    os.chmod(target, 0o755)
    return target


if __name__ == "__main__":
    print(install(Path(sys.argv[1])))
