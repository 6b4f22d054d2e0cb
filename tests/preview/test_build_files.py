"""What build/<stack>/ holds, as a reviewer reads it: values unknown until `pulumi up`
marked as such (never a Python repr)."""

import dataclasses
import json
from pathlib import Path

import pytest
from pulumi.output import Unknown

from preview.engine import run_program

from preview.plan import Plan, UNKNOWN
from preview.report import write_artifacts
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.builders import PROJECT_DIR

STACKS = list(EXAMPLE_STACKS)


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, tuple[Plan, Path]]:
    root = tmp_path_factory.mktemp("builds")
    found = {}
    for stack in STACKS:
        plan = run_program(PROJECT_DIR, read_stack(PROJECT_DIR, stack))
        write_artifacts(plan, root / stack)
        found[stack] = (plan, root / stack)
    return found


def unknown_paths(value, path=()) -> list[tuple]:
    """Where in an input value the SDK left a value unknown until `pulumi up`."""
    if isinstance(value, Unknown):
        return [path]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in unknown_paths(item, path + (key,))]
    if isinstance(value, (list, tuple)):
        return [p for index, item in enumerate(value)
                for p in unknown_paths(item, path + (index,))]
    return []


def at(value, path: tuple):
    for key in path:
        value = value[key]
    return value


@pytest.mark.parametrize("stack", STACKS)
def test_no_build_file_holds_a_python_repr(builds, stack):
    _, build = builds[stack]
    for path in sorted(p for p in build.rglob("*") if p.is_file()):
        text = path.read_text()
        assert " object at 0x" not in text and "<pulumi." not in text, path


@pytest.mark.parametrize("stack", STACKS)
def test_values_unknown_until_up_read_as_such_in_plan_json(builds, stack):
    plan, build = builds[stack]
    document = json.loads((build / "plan.json").read_text())
    shown = {(r["type"], r["name"]): r["inputs"] for r in document["resources"]}
    found = 0
    for resource in plan.resources:
        for path in unknown_paths(resource.inputs):
            assert at(shown[resource.type, resource.name], path) == UNKNOWN, (resource.name, path)
            found += 1
    if stack == "dev":
        # An instance profile's role, a pool's launch template version, ...
        assert found >= 10
        profile = shown["aws:iam/instanceProfile:InstanceProfile", "dev-a10g-node"]
        assert profile["role"] == UNKNOWN


def files_of(build: Path) -> dict[str, bytes]:
    return {str(p.relative_to(build)): p.read_bytes() for p in sorted(build.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("stack", ["dev", "lab"])
def test_two_previews_write_the_same_files(stack, provider_state, tmp_path):
    """Same stack, same provider state: the same file names with the same bytes, whatever
    order the resources registered in (it varies: registration goes through a thread
    pool). lab has one ResourceQuota name in two namespaces."""
    stack_file = read_stack(PROJECT_DIR, stack)
    first = run_program(PROJECT_DIR, stack_file)
    second = run_program(PROJECT_DIR, stack_file)
    reordered = dataclasses.replace(first, resources=first.resources[::-1])
    for plan, folder in ((first, "first"), (second, "second"), (reordered, "reordered")):
        write_artifacts(plan, tmp_path / folder)
    written = files_of(tmp_path / "first")
    for other in ("second", "reordered"):
        again = files_of(tmp_path / other)
        assert sorted(again) == sorted(written), other
        assert [name for name in written if again[name] != written[name]] == [], other
