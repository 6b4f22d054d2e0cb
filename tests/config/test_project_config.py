"""Pulumi.yaml's `config:` block, the schema the Pulumi CLI checks stack values against
before the program runs, against the program's own model (config/model.py).

Pulumi's rules are ported from pulumi/pulumi (commit 1b59498, the CLI's project file
handling): sdk/go/common/workspace/project.go `Project.Validate` and `ValidateConfigValue`,
and pkg/workspace/config.go `mergeConfig` (a declared key without a default is required on
every stack; a default is applied to every stack that does not set the key) and
`validateStackConfigValue` (a `secret` key must be set encrypted)."""

import re
import types
import typing

import pytest
import yaml
from pydantic import BaseModel, SecretStr, TypeAdapter

from config import ConfigError, load
from config.model import SECRET_KEYS, StackConfig
from config.problems import NAMESPACE
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.builders import PROJECT_DIR

PROJECT_FILE = PROJECT_DIR / "Pulumi.yaml"
# project.json `simpleConfigType`; `object` since v3.187.0 (pulumi/pulumi#20132).
PULUMI_TYPES = {"string", "integer", "boolean", "array", "object"}
# Optional keys the loader fills in when a stack leaves them out (config/loader.py).
LOADER_DEFAULTS = {"clusterName"}
# Optional in the model, required on every layout by the cross-key checks (config/checks.py).
REQUIRED_BY_CHECKS = {"sshPrivateKey"}


def _project() -> dict:
    return yaml.safe_load(PROJECT_FILE.read_text())


def _declared() -> dict:
    return {key.split(":", 1)[1]: spec for key, spec in (_project().get("config") or {}).items()}


def _pulumi_type(annotation) -> str:
    """The Pulumi config type of a model field's annotation."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _pulumi_type(args[0])
    if origin in (typing.Union, types.UnionType):
        kinds = {_pulumi_type(a) for a in args if a is not type(None)}
        assert len(kinds) == 1, annotation
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
    raise AssertionError(f"no Pulumi config type for {annotation}")


def _undeclarable() -> set:
    """Optional keys whose absence means something (None, or a loader default): Pulumi
    would require them if declared without a default, and any default would change them."""
    return {field.alias for field in StackConfig.model_fields.values()
            if field.alias in LOADER_DEFAULTS
            or (not field.is_required() and field.get_default() is None
                and field.alias not in REQUIRED_BY_CHECKS)}


def _matches(type_name: str, items, value) -> bool:
    """project.go ValidateConfigValue: is `value` (as YAML gives it) of the declared type?"""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and re.fullmatch(r"[-+]?\d+", value) is not None)
    if type_name == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if type_name == "object":
        return isinstance(value, dict)
    return isinstance(value, list) and items is not None and all(
        _matches(items["type"], items.get("items"), item) for item in value)


def test_the_block_follows_pulumis_rules_for_project_config():
    project = _project()
    for key, spec in project["config"].items():
        # Keys of the project's namespace carry a schema; others (aws:region) only a value.
        assert key.startswith(f"{project['name']}:"), key
        assert isinstance(spec, dict) and set(spec) <= {
            "type", "description", "secret", "default", "items"}, key
        assert spec["type"] in PULUMI_TYPES, key
        if spec["type"] == "array":
            assert spec["items"]["type"] in PULUMI_TYPES, key
        if "default" in spec:
            assert _matches(spec["type"], spec.get("items"), spec["default"]), key
            # The CLI applies a default as a plain value, then refuses it for a secret key.
            assert not spec.get("secret"), key
        assert spec.get("description"), key


def test_every_top_level_key_of_the_model_is_declared_or_named_as_optional():
    declared, undeclarable = _declared(), _undeclarable()
    model = {field.alias for field in StackConfig.model_fields.values()}
    # The set comes from the model (_undeclarable), so a new optional section needs no edit
    # here; the test below holds it to Pulumi's rules.
    assert set(declared) == model - undeclarable
    assert "clusterName" in undeclarable and "aws" in undeclarable
    # The comment beside the block names them, so a reader of Pulumi.yaml sees every key.
    comments = "\n".join(line for line in PROJECT_FILE.read_text().splitlines()
                         if line.lstrip().startswith("#"))
    for key in undeclarable:
        assert re.search(rf"\b{key}\b", comments), key


# The plainest value of each Pulumi type, as the CLI hands a default to the program.
_PLAINEST = {"object": "{}", "array": "[]", "string": "", "integer": "0", "boolean": "false"}


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_a_key_left_undeclared_could_not_be_declared(stack):
    """mergeConfig: declared without a default, a key is required on every stack; with
    one, the default is applied wherever the key is left out. Each undeclared key a stack
    leaves out would change what the program reads, or be refused, with any default."""
    stack_file = read_stack(PROJECT_DIR, stack)
    plain = load(stack_file.config, stack_file.secret_keys, stack=stack)
    stack_values = yaml.safe_load((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
    for field in StackConfig.model_fields.values():
        key = f"{NAMESPACE}:{field.alias}"
        if field.alias not in _undeclarable() or key in stack_values:
            continue
        config = {**stack_file.config, key: _PLAINEST[_pulumi_type(field.annotation)]}
        try:
            changed = load(config, stack_file.secret_keys, stack=stack) != plain
        except ConfigError:
            changed = True
        assert changed, f"{stack}: {field.alias} could be declared with a default"


def test_types_secrets_and_defaults_are_the_models():
    for name, field in StackConfig.model_fields.items():
        spec = _declared().get(field.alias)
        if spec is None:
            continue
        assert spec["type"] == _pulumi_type(field.annotation), field.alias
        assert spec.get("secret", False) == (field.alias in SECRET_KEYS), field.alias
        if field.is_required() or field.get_default() is None:
            assert "default" not in spec, f"{field.alias} is required by the program"
        else:
            # The program reads the declared default exactly as the key left out.
            assert "default" in spec, f"{field.alias}: Pulumi would require it"
            parsed = TypeAdapter(field.annotation).validate_python(spec["default"])
            assert parsed == field.get_default(), field.alias


def test_the_loader_fills_in_the_keys_left_undeclared_for_that():
    stack_file = read_stack(PROJECT_DIR, "lab")
    del stack_file.config[f"{NAMESPACE}:clusterName"]
    settings = load(stack_file.config, stack_file.secret_keys, stack="somewhere")
    assert settings.cluster_name == "somewhere"


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_the_keys_declared_required_are_required_by_the_program(stack):
    for name, spec in _declared().items():
        if "default" in spec:
            continue
        stack_file = read_stack(PROJECT_DIR, stack)
        del stack_file.config[f"{NAMESPACE}:{name}"]
        with pytest.raises(ConfigError) as caught:
            load(stack_file.config, stack_file.secret_keys, stack=stack)
        assert any(problem.path == name and "is required" in problem.message
                   for problem in caught.value.problems), (name, caught.value.problems)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_example_stacks_pass_the_clis_checks(stack):
    values = yaml.safe_load((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
    for name, spec in _declared().items():
        key = f"{NAMESPACE}:{name}"
        if key not in values:
            # Required keys without a value come from `pulumi config set --secret` or the
            # stack's ESC environment (esc/), never from the committed file.
            assert "default" in spec or spec.get("secret"), f"{stack}: {key} is required"
            continue
        value = values[key]
        if spec.get("secret"):
            assert isinstance(value, dict) and set(value) == {"secure"}, key
        else:
            assert _matches(spec["type"], spec.get("items"), value), (stack, key)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_the_defaults_change_nothing_the_program_reads(stack):
    """The offline preview applies the defaults as the CLI does (preview/stack_file.py);
    the settings are the same as with the keys left out."""
    with_defaults = read_stack(PROJECT_DIR, stack)
    # One read: its stand-ins for secrets are made afresh at each.
    without = dict(with_defaults.config)
    stack_values = yaml.safe_load((PROJECT_DIR / f"Pulumi.{stack}.yaml").read_text())["config"]
    for name, spec in _declared().items():
        key = f"{NAMESPACE}:{name}"
        if "default" in spec and key not in stack_values:
            assert with_defaults.config[key] in ("{}", "[]")
            del without[key]
    secret_keys = with_defaults.secret_keys
    assert len(without) < len(with_defaults.config)
    assert (load(with_defaults.config, secret_keys, stack=stack)
            == load(without, secret_keys, stack=stack))
