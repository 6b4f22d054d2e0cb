"""`make bench`'s measurements at a small size: the replay registers the stack's graph, as
many resources with the same dependencies, so the two compare like for like."""

import sys

from tests.builders import PROJECT_DIR

sys.path.insert(0, str(PROJECT_DIR / "benchmarks"))
import preview_scale  # noqa: E402


def test_the_replay_registers_the_stacks_graph():
    stack = preview_scale.measure_stack(2, full=False)
    replay = preview_scale.measure_replay(2, full=False)
    floor = preview_scale.measure_floor(stack["resources"], full=False)
    assert stack["resources"] == replay["resources"] == floor["resources"] > 50
    assert replay["edges"] == stack["edges"] > floor["edges"] == 0


def test_the_typed_floor_registers_as_many_commands_without_edges():
    typed = preview_scale.measure_typed_floor(40, full=False)
    assert typed["resources"] == 40 and typed["edges"] == 0
