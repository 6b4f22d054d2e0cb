"""Runs the policy pack's rules without the Pulumi CLI.

    gpu-cluster policy [STACK ...]          the offline preview of each stack (default: all)
    gpu-cluster policy --plan build/prod/plan.json   a plan the preview wrote
    (`python -m policy.offline` is the same command)

From the preview engine the rules see every resource's real inputs, its protect and
retainOnDelete options, and the stack's secret values (to find them in user data). A
plan.json has secrets redacted as [secret]: a redacted value inside user data is reported
as secret material. Exits 1 when any rule is violated, 2 when a stack cannot be previewed or
a plan read (the others are still checked, and the report names why)."""

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from contract import command
from policy.rules import RULES, Resource, check
from policy.stack_rules import STACK_RULES, StackResource

PROJECT_DIR = Path(__file__).resolve().parent.parent
PROG = "python -m policy.offline"


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


def _report(args, label: str, resources: list, stack_resources: list) -> dict:
    violations = evaluate(resources) + evaluate_stack(stack_resources)
    command.say(args, f"{label}: {len(resources)} resources, {len(RULES) + len(STACK_RULES)} "
                      f"rules, {len(violations)} violation{'s' if len(violations) != 1 else ''}\n"
                + "".join(f"  {violation}\n" for violation in violations))
    return {"checked": label, "resources": len(resources),
            "violations": [vars(violation) for violation in violations]}


def _not_checked(label: str, error) -> dict:
    print(f"{label}: could not check: {error}", file=sys.stderr)
    return {"checked": label, "couldNotCheck": str(error)}


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0],
                                     epilog=command.EXIT_CODES_DOC)
    parser.add_argument("stacks", nargs="*", metavar="STACK", help="stacks to preview "
                        "(default: the example stacks, preview/stack_file.py EXAMPLE_STACKS)")
    parser.add_argument("--plan", type=Path, action="append", default=[],
                        help="a plan.json written by the offline preview (repeatable)")
    command.add_json(parser)
    return parser


def main(argv=None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    if str(PROJECT_DIR) not in sys.path:
        sys.path.insert(0, str(PROJECT_DIR))
    from config import ConfigError
    from preview.stack_file import StackFileError

    results = []
    for path in args.plan:
        try:
            document = json.loads(path.read_text())
        except OSError as error:
            results.append(_not_checked(str(path), f"cannot read it: {error.strerror}"))
            continue
        except ValueError:
            results.append(_not_checked(str(path), "not a plan.json (not JSON)"))
            continue
        results.append(_report(args, str(path), resources_of_plan_json(document),
                               stack_resources_of_plan_json(document)))
    for stack in args.stacks or ([] if args.plan else example_stacks()):
        try:
            plan = preview_plan(stack)
        except (FileNotFoundError, StackFileError, ConfigError) as error:
            results.append(_not_checked(f"stack {stack}", error))
            continue
        results.append(_report(args, f"stack {stack}", resources_of_plan(plan),
                               stack_resources_of_plan(plan)))
    code = command.exit_code(any(r.get("violations") for r in results),
                             any("couldNotCheck" in r for r in results))
    command.write_json(args, {"command": "policy", "exitCode": code, "results": results})
    return code


if __name__ == "__main__":
    sys.exit(main())
