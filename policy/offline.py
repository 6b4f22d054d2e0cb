"""Runs the policy pack's rules without the Pulumi CLI.

    python -m policy.offline [STACK ...]          the offline preview of each stack (default: all)
    python -m policy.offline --plan build/prod/plan.json   a plan the preview wrote

From the preview engine the rules see every resource's real inputs, its protect and
retainOnDelete options, and the stack's secret values (to find them in user data). A
plan.json has secrets redacted as [secret]: a redacted value inside user data is reported
as secret material. Exits 1 when any rule is violated, 2 when a stack cannot be previewed."""

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from policy.rules import RULES, Resource, check
from policy.stack_rules import STACK_RULES, StackResource

PROJECT_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Violation:
    rule: str
    type: str
    name: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.type} {self.name}: {self.message.removeprefix(self.name + ': ')}"


def stack_resources_of_plan(plan) -> list:
    from preview.engine import unwrap_secrets

    return [StackResource(id=r.urn, type=r.type, name=r.name, props=unwrap_secrets(r.inputs),
                          property_dependencies=r.property_dependencies)
            for r in plan.resources]


def stack_resources_of_plan_json(document: dict) -> list:
    return [StackResource(id=r["name"], type=r["type"], name=r["name"],
                          props=r.get("inputs") or {},
                          property_dependencies=r.get("propertyDependencies") or {})
            for r in document.get("resources", [])]


def resources_of_plan(plan) -> list:
    """Resources of a preview engine Plan (preview.engine.Plan)."""
    from preview.engine import unwrap_secrets

    secrets = tuple(sorted(plan.secrets))
    return [Resource(type=r.type, name=r.name, props=unwrap_secrets(r.inputs), protect=r.protect,
                     retain_on_delete=r.retain_on_delete, known_secrets=secrets)
            for r in plan.resources]


def resources_of_plan_json(document: dict) -> list:
    """Resources of a plan.json; options it does not record count as unknown."""
    return [Resource(type=r["type"], name=r["name"], props=r.get("inputs") or {},
                     protect=r.get("protect"), retain_on_delete=r.get("retainOnDelete"))
            for r in document.get("resources", [])]


def evaluate(resources: Iterable[Resource], rules=RULES) -> list:
    return [Violation(rule, resource.type, resource.name, message)
            for resource in resources for rule, message in check(resource, rules)]


def evaluate_stack(resources: list, rules=STACK_RULES) -> list:
    types = {r.name: r.type for r in resources}
    return [Violation(rule.name, types.get(name, ""), name, message)
            for rule in rules for name, message in rule.check(resources)]


def preview_plan(stack: str, project_dir: Path = PROJECT_DIR):
    from preview.engine import run_program
    from preview.stack_file import read_stack

    return run_program(project_dir, read_stack(project_dir, stack))


def example_stacks() -> list:
    from preview.stack_file import EXAMPLE_STACKS

    return list(EXAMPLE_STACKS)


def _report(label: str, resources: list, stack_resources: list) -> int:
    violations = evaluate(resources) + evaluate_stack(stack_resources)
    print(f"{label}: {len(resources)} resources, {len(RULES) + len(STACK_RULES)} rules, "
          f"{len(violations)} violation{'s' if len(violations) != 1 else ''}")
    for violation in violations:
        print(f"  {violation}")
    return len(violations)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policy.offline",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("stacks", nargs="*", help="stacks to preview (default: the "
                        "example stacks, preview/stack_file.py EXAMPLE_STACKS)")
    parser.add_argument("--plan", type=Path, action="append", default=[],
                        help="a plan.json written by the offline preview (repeatable)")
    args = parser.parse_args(argv)
    if str(PROJECT_DIR) not in sys.path:
        sys.path.insert(0, str(PROJECT_DIR))
    from config import ConfigError
    from preview.stack_file import StackFileError

    failed = 0
    for path in args.plan:
        document = json.loads(path.read_text())
        failed += _report(str(path), resources_of_plan_json(document),
                          stack_resources_of_plan_json(document))
    for stack in args.stacks or ([] if args.plan else example_stacks()):
        try:
            plan = preview_plan(stack)
        except (FileNotFoundError, StackFileError, ConfigError) as error:
            print(f"stack {stack}: {error}", file=sys.stderr)
            return 2
        failed += _report(f"stack {stack}", resources_of_plan(plan),
                          stack_resources_of_plan(plan))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
