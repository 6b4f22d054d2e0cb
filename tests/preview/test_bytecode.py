"""After the set-up's `python -m preview.bytecode` (Makefile), a preview compiles next to
nothing again, even where PYTHONDONTWRITEBYTECODE keeps Python from writing what it
compiles. Run in a cache of its own (PYTHONPYCACHEPREFIX), so the one under test starts
empty: the warm-up fills it, then a preview with writing allowed adds only what it had to
compile."""

import os
import subprocess
import sys
from pathlib import Path

from tests.builders import PROJECT_DIR


def compiled(cache) -> set[str]:
    return {str(path) for path in cache.rglob("*.pyc")}


def run(command: list[str], cache, write_bytecode: bool) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    subprocess.run([sys.executable, *command], cwd=PROJECT_DIR, env=env, check=True,
                   capture_output=True)


def test_a_preview_after_set_up_compiles_none_of_the_program_or_its_sdks(tmp_path):
    cache = tmp_path / "pycache"
    run(["-m", "preview.bytecode"], cache, write_bytecode=False)
    warmed = compiled(cache)
    run(["-m", "preview", "prod", "--quiet", "--build-dir", str(tmp_path / "build")], cache,
        write_bytecode=True)
    again = compiled(cache) - warmed
    assert len(warmed) > 1000
    # What is left: a few modules whose import fails on purpose (requests' optional SOCKS
    # support), which are compiled and then dropped.
    ours = [path for path in again
            if f"{PROJECT_DIR}/" in path and f"{Path(sys.prefix)}/" not in path]
    sdks = [path for path in again if "/site-packages/pulumi" in path
            or "/site-packages/pydantic" in path or "/site-packages/grpc/" in path]
    assert ours == sdks == [] and len(again) < 10, sorted(again)
