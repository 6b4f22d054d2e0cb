"""The offline preview's files, byte for byte. With `--seed` every throwaway key, token
and certificate is drawn from the seed (preview/entropy.py), so what build/<stack>/ holds
depends on the program and the stack file alone: the sha256 of every file of every example
stack is recorded in tests/preview/builds/<stack>.sha256, and a change that is meant to
change nothing (a speed-up, a refactoring) must leave every one of them as it is.

A change meant to change files: UPDATE_BUILDS=1 pytest tests/preview/test_reproducible.py,
and the diff of the .sha256 files names each changed file in review. To see what changed
in one: `python -m preview STACK --seed gpu-cluster --build-dir DIR` before and after,
then `diff -r`. Cloud user data is gzipped: the record names the zlib it was made with,
and another zlib (zlib-ng compresses differently) skips the comparison."""

import hashlib
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from preview import entropy
from preview.credentials import ssh_private_key
from preview.stack_file import EXAMPLE_STACKS
from tests.builders import BUILD_SEED as SEED, PROJECT_DIR

RECORDS = Path(__file__).parent / "builds"


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


ZLIB = f"# zlib {zlib.ZLIB_RUNTIME_VERSION}"


def sha256sum_format(found: dict[str, str]) -> str:
    return ZLIB + "\n" + "".join(f"{digest}  {name}\n" for name, digest in sorted(found.items()))


def read_record(path: Path) -> tuple[str, dict[str, str]]:
    header, *lines = path.read_text().splitlines() if path.exists() else [ZLIB]
    return header, {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_build_file_is_the_recorded_one(stack, seeded_build):
    found = digests(seeded_build(stack))
    record = RECORDS / f"{stack}.sha256"
    if os.environ.get("UPDATE_BUILDS"):
        record.parent.mkdir(exist_ok=True)
        record.write_text(sha256sum_format(found))
    made_with, recorded = read_record(record)
    if made_with != ZLIB:
        pytest.skip(f"{record.name} was recorded with {made_with[2:]}, this is {ZLIB[2:]}")
    changed = sorted(n for n in set(found) & set(recorded) if found[n] != recorded[n])
    new, gone = sorted(set(found) - set(recorded)), sorted(set(recorded) - set(found))
    assert not (changed or new or gone), (
        f"build/{stack} against {record.relative_to(PROJECT_DIR)}: changed {changed}, new "
        f"{new}, gone {gone}; if that is meant, UPDATE_BUILDS=1 records it (this file's "
        "docstring)")


def test_a_seeded_run_is_the_same_in_another_process_and_path(tmp_path):
    """Another interpreter (another hash seed: no set's order may reach a file) in another
    checkout path writes the same bytes as this one."""
    copy = tmp_path / "checkout"
    shutil.copytree(PROJECT_DIR, copy, ignore=shutil.ignore_patterns(
        ".git", "venv", "build", "__pycache__", ".pytest_cache"))
    stack = "lab"
    for where, build in ((PROJECT_DIR, tmp_path / "here"), (copy, tmp_path / "there")):
        subprocess.run([sys.executable, "-m", "preview", stack, "--quiet", "--seed", SEED,
                        "--build-dir", str(build)], cwd=where, check=True,
                       env={**os.environ, "PYTHONHASHSEED": "random"}, capture_output=True)
    assert digests(tmp_path / "there" / stack) == digests(tmp_path / "here" / stack)


def test_without_a_seed_keys_differ_between_runs():
    assert ssh_private_key() != ssh_private_key()
    with entropy.reproducible("a"):
        first, again = ssh_private_key(), ssh_private_key()
    with entropy.reproducible("b"):
        other = ssh_private_key()
    assert first == again != other
