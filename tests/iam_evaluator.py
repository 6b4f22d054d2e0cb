"""A small evaluator of AWS policies, for the statements the program writes: Allow and Deny,
Principal ("*", {"AWS": ARN or list}, an account's root, {"Federated": an OIDC provider's
ARN}), Action and Resource with the
wildcards * and ?, and the condition operators StringEquals, StringNotEquals, StringLike,
ArnEquals, ArnNotEquals and Bool. It follows AWS's documented logic; anything else in a policy is
refused (an evaluator that skipped an element would answer for a policy it did not read).

- An explicit deny in any policy that applies overrides every allow; without an allow the
  request is implicitly denied. Within one account, an allow in the identity-based or the
  resource-based policy suffices
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html,
  "Policy evaluation logic", "Evaluating policies within a single account").
- A resource policy that names the account (its root) delegates to the account: the
  principal's own policies must allow it too
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html#principal-accounts).
- KMS and role trust are stricter: the key policy (the trust policy) must allow, directly,
  or through the account and the principal's own policies
  (https://docs.aws.amazon.com/kms/latest/developerguide/determining-access-key-policy.html,
  https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_compare-resource-policies.html).
- aws:PrincipalTag/KEY is in the request of a principal with that tag
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principaltag).
- Conditions: all operators of a statement and all keys of an operator must match; the
  values of one key are OR'ed; a key absent from the request matches no operator but the
  negated ones (...Not...), which it matches
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html,
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html).
- Action names are case-insensitive; resource ARNs are not
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_action.html).
"""

import json
import re
from dataclasses import dataclass, field
from typing import Optional

ALLOW, EXPLICIT_DENY, IMPLICIT_DENY = "allow", "explicit deny", "implicit deny"
# Who makes a request without an identity: an NFS client that mounts EFS without `iam`.
ANONYMOUS = "anonymous"
_STATEMENT_KEYS = {"Sid", "Effect", "Principal", "Action", "Resource", "Condition"}


@dataclass(frozen=True)
class Principal:
    name: str
    # The ARN its requests carry as aws:PrincipalArn (a role's, for any of its sessions);
    # ANONYMOUS for none.
    arn: str
    # Its identity-based policies (documents).
    policies: tuple = ()
    # Its tags, as aws:PrincipalTag/KEY (a role's or a user's).
    tags: tuple = ()

    @property
    def account(self) -> Optional[str]:
        return None if self.arn == ANONYMOUS else self.arn.split(":")[4]


@dataclass
class Request:
    action: str
    resource: str
    context: dict = field(default_factory=dict)


# What an NFS client may do on an EFS file system, and what a mount through a mount target
# carries (https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html,
# "EFS actions for clients" and "EFS condition keys for clients").
EFS_CLIENT_ACTIONS = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite",
                      "elasticfilesystem:ClientRootAccess")


def efs_client_request(action: str, file_system: str, tls: bool = True) -> Request:
    """An NFS client's `action` on `file_system` through a mount target, with TLS or without."""
    return Request(action, file_system, {
        "aws:SecureTransport": "true" if tls else "false",
        "elasticfilesystem:AccessedViaMountTarget": "true"})


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _wildcard(pattern: str, value: str, case_sensitive: bool = True) -> bool:
    """* any run of characters, ? one; nothing else is special."""
    expression = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                         for c in pattern)
    return re.fullmatch(expression, value, 0 if case_sensitive else re.IGNORECASE) is not None


def _statements(policy) -> list[dict]:
    document = json.loads(policy) if isinstance(policy, str) else policy
    assert document.get("Version") == "2012-10-17", document
    statements = _listed(document["Statement"])
    for statement in statements:
        unknown = set(statement) - _STATEMENT_KEYS
        assert not unknown, f"the evaluator does not read {unknown}"
        assert statement["Effect"] in ("Allow", "Deny"), statement
    return statements


def _action_matches(statement: dict, action: str) -> bool:
    return any(_wildcard(p, action, case_sensitive=False) for p in _listed(statement["Action"]))


def _resource_matches(statement: dict, resource: str) -> bool:
    # A key policy's or a trust policy's statements name no resource: their own.
    return "Resource" not in statement or any(
        _wildcard(p, resource) for p in _listed(statement["Resource"]))


def _principal_match(statement: dict, principal: Principal) -> Optional[str]:
    """How a resource policy's statement names `principal`: "direct", "account" (its
    account's root: delegated to the account), or None."""
    named = statement["Principal"]
    if named == "*":
        return "direct"
    assert set(named) <= {"AWS", "Federated"}, f"the evaluator reads AWS and Federated " \
        f"principals only: {named}"
    # A web identity caller is its provider (its token's claims are condition keys).
    if principal.arn in _listed(named.get("Federated", [])):
        return "direct"
    for arn in _listed(named.get("AWS", [])):
        if arn == "*" or arn == principal.arn:
            return "direct"
        if principal.account and re.fullmatch(rf"arn:aws:iam::{principal.account}:root", arn):
            return "account"
    return None


def _string_equals(pattern: str, value: str) -> bool:
    return pattern == value


def _string_like(pattern: str, value: str) -> bool:
    return _wildcard(pattern, value)


def _bool(pattern: str, value: str) -> bool:
    return str(pattern).lower() == str(value).lower()


# operator -> (how one policy value matches one request value, negated)
_OPERATORS = {
    "StringEquals": (_string_equals, False),
    "StringNotEquals": (_string_equals, True),
    "StringLike": (_string_like, False),
    "ArnEquals": (_string_like, False),
    "ArnLike": (_string_like, False),
    "ArnNotEquals": (_string_like, True),
    "Bool": (_bool, False),
}


def _conditions_match(statement: dict, context: dict) -> bool:
    for operator, keys in statement.get("Condition", {}).items():
        assert operator in _OPERATORS, f"the evaluator does not read {operator}"
        compare, negated = _OPERATORS[operator]
        for key, patterns in keys.items():
            if key not in context:
                if not negated:
                    return False
                continue
            values = _listed(context[key])
            found = any(compare(p, v) for p in _listed(patterns) for v in values)
            if found == negated:
                return False
    return True


def _applies(statement: dict, request: Request) -> bool:
    return (_action_matches(statement, request.action)
            and _resource_matches(statement, request.resource)
            and _conditions_match(statement, request.context))


def _context(principal: Principal, request: Request) -> Request:
    """The request with the keys AWS adds for every caller (aws:PrincipalArn,
    aws:PrincipalAccount, kms:CallerAccount, aws:PrincipalTag/*), none for an anonymous
    one."""
    context = dict(request.context)
    if principal.arn != ANONYMOUS:
        context.setdefault("aws:PrincipalArn", principal.arn)
        context.setdefault("aws:PrincipalAccount", principal.account)
        context.setdefault("kms:CallerAccount", principal.account)
        for key, value in principal.tags:
            context.setdefault(f"aws:PrincipalTag/{key}", value)
    return Request(request.action, request.resource, context)


def evaluate(principal: Principal, request: Request, resource_policy=None,
             resource_policy_required: bool = False) -> str:
    """ALLOW, EXPLICIT_DENY or IMPLICIT_DENY for `principal` making `request` on a resource
    with `resource_policy` (a bucket, file system, key or trust policy). With
    `resource_policy_required` (KMS keys, role trust) only the resource policy can grant,
    alone or through the account and the identity policies."""
    request = _context(principal, request)
    identity = [s for p in principal.policies for s in _statements(p) if _applies(s, request)]
    resource = [s for s in (_statements(resource_policy) if resource_policy else [])
                if _principal_match(s, principal) and _applies(s, request)]
    if any(s["Effect"] == "Deny" for s in identity + resource):
        return EXPLICIT_DENY
    identity_allows = any(s["Effect"] == "Allow" for s in identity)
    ways = {_principal_match(s, principal) for s in resource if s["Effect"] == "Allow"}
    if "direct" in ways:
        return ALLOW
    if "account" in ways and identity_allows:
        return ALLOW
    if identity_allows and not resource_policy_required:
        return ALLOW
    return IMPLICIT_DENY
