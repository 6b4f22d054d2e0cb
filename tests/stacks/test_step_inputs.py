"""What every example stack renders for each step, over SSH, at boot and where `pulumi up`
runs, passes its scripts' declared inputs (components/common/script_inputs.py): no name
they do not declare, every name they require. Read back from the rendered text, apart
from the check the rendering makes itself."""

import re

import pytest

from components.common.script_inputs import EVERY_STEP, file_inputs, step_declared
from components.common.step_text import step_inputs
from preview.engine import unwrap_secrets as unwrap
from preview.stack_file import EXAMPLE_STACKS
from tests.builders import example_plan

# The header step_header writes, and the files a bundle stdin lists for each action.
_HEADER = re.compile(r"^# gpu-cluster step '[^']*' on host '[^']*' \(([^,)]+)(?:, delete: ([^)]+))?\)",
                     re.M)
_FILE = re.compile(r"^  '(?:create|delete|check) ([a-z0-9._/-]+) [0-9a-f]{64}'", re.M)
_DATA = ("userData", "userDataBase64")


def rendered_steps(plan) -> dict[str, str]:
    """Each step's text by name: remote and local commands, and each EC2 machine's boot
    part and the steps of its boot plan."""
    steps = {r.name: unwrap(r.inputs.get("stdin", "")) for kind in ("remote", "local")
             for r in plan.of_type(f"command:{kind}:Command") if r.inputs.get("stdin")}
    for kind in ("aws:ec2/instance:Instance", "aws:ec2/launchTemplate:LaunchTemplate"):
        for resource in plan.of_type(kind):
            data = next((resource.inputs[key] for key in _DATA if resource.inputs.get(key)), None)
            if data is None:
                continue
            from components.aws.boot import boot_scripts
            steps[f"{resource.name} boot"] = boot_scripts(unwrap(data))[0]
            for name, stdin in plan.boot_steps(data):
                steps[f"{resource.name} {name}"] = stdin
    return steps


def files_of(text: str) -> list[str]:
    """The scripts a step runs: the bundle files it lists, or those its header names."""
    listed = _FILE.findall(text)
    if listed:
        return listed
    header = _HEADER.search(text)
    assert header, text[:200]
    return [path for path in header.groups() if path]


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_rendered_steps_pass_what_their_scripts_declare(stack: str):
    steps = rendered_steps(example_plan(stack))
    assert len(steps) > 10
    problems = []
    for name, text in sorted(steps.items()):
        files = files_of(text)
        passed = set(step_inputs(text)) - EVERY_STEP
        declared = step_declared(files)
        undeclared = sorted(n for n in passed if not declared.declares(n))
        missing = sorted(set().union(*(file_inputs(f).required for f in files)) - passed)
        if undeclared or missing:
            problems.append(f"{name} ({', '.join(files)}): passes undeclared {undeclared}, "
                            f"lacks required {missing}")
    assert not problems, "\n".join(problems)
