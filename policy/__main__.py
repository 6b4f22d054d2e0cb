"""The policy pack the Pulumi CLI runs: `pulumi preview --policy-pack policy`.

PolicyPack() serves the CLI and blocks, so this file only builds it: the rules live in
policy/rules.py, where tests and the offline runner (`python -m policy.offline`) use them."""

import sys
from pathlib import Path

from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

# The CLI runs this file from policy/ (`python -m pulumi.policy ENGINE policy/` in that folder:
# pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go RunPlugin, and
# sdk/python/lib/pulumi/policy/__main__.py runpy.run_path); the rules import each other as
# the `policy` package and the ports they guard from `contract` (both in the project's
# folder). Appended, so nothing of the project shadows what the pack's virtualenv provides.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from policy.rules import RULES, Resource, Rule  # noqa: E402
from policy.stack_rules import STACK_RULES, StackResource, StackRule  # noqa: E402


def _validate(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        # The CLI tells a policy `protect` but not `retainOnDelete`.
        resource = Resource(type=args.resource_type, name=args.name, props=args.props,
                            protect=args.opts.protect)
        for message in rule.check(resource):
            report_violation(message, args.urn)
    return validate


def _validate_stack(rule: StackRule):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [StackResource(
            id=r.urn, type=r.resource_type, name=r.name, props=r.props,
            property_dependencies={key: [d.urn for d in deps]
                                   for key, deps in r.property_dependencies.items()})
            for r in args.resources]
        urns = {r.name: r.urn for r in args.resources}
        for name, message in rule.check(resources):
            report_violation(message, urns.get(name))
    return validate


PolicyPack(
    name="gpu-cluster",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[ResourceValidationPolicy(name=rule.name, description=rule.description,
                                       validate=_validate(rule)) for rule in RULES]
    + [StackValidationPolicy(name=rule.name, description=rule.description,
                             validate=_validate_stack(rule)) for rule in STACK_RULES],
)
