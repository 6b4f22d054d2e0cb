"""Pulumi.yaml's `config:` block, from StackConfig's top-level fields: the schema the Pulumi
CLI checks a stack's values against before the program runs (type, secret, default,
description). Pulumi's rules (pulumi/pulumi sdk/go/common/workspace/project.go
`Project.Validate`, pkg/workspace/config.go `mergeConfig`): a declared key without a
default is required on every stack, and a default is applied to every stack that leaves the
key out, so a key whose absence means something is left undeclared."""

import json
import re
import types
import typing

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from config.model import SECRET_KEYS, StackConfig
from config.reference_tables import LOADER_DEFAULTS

NAMESPACE = "gpu-cluster"
# Optional in the model, required on every layout by the cross-key checks (config/checks.py).
REQUIRED_BY_CHECKS = {"sshPrivateKey"}
# The first line of the generated part: everything from it to the end of the file.
START = "# The program's top-level config keys"

_HEAD = f"""{START}, as Pulumi's project config schema
# (https://www.pulumi.com/docs/iac/concepts/projects/project-file/#config-options): the CLI
# checks a stack's values against `type` and refuses a `secret` key set in plain text before
# the program runs. The program checks everything inside the objects
# (docs/config-reference.md).
#
# Generated from config/model.py by `python -m config.reference` (make docs); edit the
# model, not this block. tests/config/test_reference.py fails when it is stale.
#
# The CLI requires every key declared here that has no `default` (pulumi/pulumi
# pkg/workspace/config.go, mergeConfig), and applies a default to every stack that does not
# set the key. So: required keys have none; a section is declared with `{{}}` or `[]`, which
# the program reads exactly as the section left out; and these optional keys, whose absence
# means something (off, or the stack name), are not declared:
"""


def pulumi_type(annotation) -> str:
    """The Pulumi config type (project.json `simpleConfigType`) of a field's annotation."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return pulumi_type(args[0])
    if origin in (typing.Union, types.UnionType):
        kinds = {pulumi_type(a) for a in args if a is not type(None)}
        if len(kinds) != 1:
            raise ValueError(f"no single Pulumi config type for {annotation}")
        return kinds.pop()
    if origin is list:
        return "array"
    if origin is typing.Literal or annotation in (str, SecretStr):
        return "string"
    if annotation is bool:
        return "boolean"
    if annotation is int:
        return "integer"
    if origin is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return "object"
    raise ValueError(f"no Pulumi config type for {annotation}")


def _item_type(annotation) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated or origin in (typing.Union, types.UnionType):
        return _item_type(next(a for a in args if a is not type(None)))
    return pulumi_type(args[0])


def declared(field: FieldInfo) -> bool:
    """Whether the key is declared: not one whose absence means something."""
    return field.alias not in LOADER_DEFAULTS and (
        field.is_required() or field.get_default() is not None
        or field.alias in REQUIRED_BY_CHECKS)


def _plain(description: str) -> str:
    """The description's first sentence as plain text: links become their text."""
    text = re.sub(r"(; | \()see \[[^\]]+\]\([^)]+\)\)?", "", description)
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text).replace("`", "")
    return re.split(r"(?<=[a-z)])\. ", text, maxsplit=1)[0].rstrip(".")


def _undeclared_line(field: FieldInfo) -> str:
    kind = pulumi_type(field.annotation)
    secret = "secret " if field.alias in SECRET_KEYS else ""
    default = f"; default: {LOADER_DEFAULTS[field.alias]}" if field.alias in LOADER_DEFAULTS \
        else ""
    return f"#   {field.alias} ({secret}{kind}{default})"


def config_block() -> str:
    """The generated part of Pulumi.yaml."""
    fields = list(StackConfig.model_fields.values())
    lines = [_HEAD.rstrip("\n")]
    lines += [_undeclared_line(f) for f in fields if not declared(f)]
    lines.append("config:")
    for field in fields:
        if not declared(field):
            continue
        kind = pulumi_type(field.annotation)
        lines += [f"  {NAMESPACE}:{field.alias}:", f"    type: {kind}"]
        if kind == "array":
            lines += ["    items:", f"      type: {_item_type(field.annotation)}"]
        if field.alias in SECRET_KEYS:
            lines.append("    secret: true")
        if not field.is_required() and field.get_default() is not None \
                and field.alias not in REQUIRED_BY_CHECKS:
            default = field.get_default(call_default_factory=True)
            shown = {} if isinstance(default, BaseModel) else default
            lines.append(f"    default: {json.dumps(shown)}")
        description = _plain(field.description or "")
        lines.append(f"    description: {json.dumps(description, ensure_ascii=False)}")
    return "\n".join(lines) + "\n"


def project_file(current: str) -> str:
    """Pulumi.yaml with its generated part replaced; the hand-written head (name,
    runtime) is kept."""
    head = current.split(START, 1)[0] if START in current \
        else current.split("\nconfig:", 1)[0] + "\n"
    return head + config_block()
