"""The example stacks are a list (preview/stack_file.py EXAMPLE_STACKS), not whatever
Pulumi.<stack>.yaml files lie in the project: a user's own stack, half written, is
previewed when named and never read by the tests or the policy run."""

import re
from pathlib import Path

from policy import offline
from preview.stack_file import EXAMPLE_STACKS, read_stack

PROJECT_DIR = Path(__file__).resolve().parents[2]
_STACK_GLOB = re.compile(r"""glob\(\s*["']Pulumi\.\*""")


def test_every_example_stack_has_its_file_and_the_layouts_are_covered():
    layouts = set()
    for stack in EXAMPLE_STACKS:
        layouts.add(read_stack(PROJECT_DIR, stack).config["gpu-cluster:layout"])
    assert layouts == {"bare-metal", "hybrid", "cloud"}


def test_the_policy_run_reads_the_example_stacks_only():
    assert offline.example_stacks() == list(EXAMPLE_STACKS)


def test_no_test_or_tool_globs_the_stack_files():
    found = [str(path.relative_to(PROJECT_DIR))
             for folder in ("tests", "policy", "preview", "benchmarks", "doctor", "distribute")
             for path in (PROJECT_DIR / folder).rglob("*.py")
             if _STACK_GLOB.search(path.read_text())]
    assert found == [], f"use preview.stack_file.EXAMPLE_STACKS in {found}"
