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
)

# The CLI runs this file from policy/; the rules import each other as the `policy` package.
# Appended, so nothing of the project shadows what the pack's virtualenv provides.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from policy.rules import RULES, Resource, Rule  # noqa: E402


def _validate(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        # The CLI tells a policy `protect` but not `retainOnDelete`.
        resource = Resource(type=args.resource_type, name=args.name, props=args.props,
                            protect=args.opts.protect)
        for message in rule.check(resource):
            report_violation(message, args.urn)
    return validate


PolicyPack(
    name="gpu-cluster",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[ResourceValidationPolicy(name=rule.name, description=rule.description,
                                       validate=_validate(rule)) for rule in RULES],
)
