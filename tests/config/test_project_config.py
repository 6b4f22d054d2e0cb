"""Pulumi.yaml's `config:` block, the schema the Pulumi CLI checks stack values against
before the program runs, held to Pulumi's rules and to the program's own model
(config/model.py), never to a copy of the generator (config/project_file.py).

Pulumi's rules, from pulumi/pulumi (commit 1b59498, the CLI's project file handling):
sdk/go/common/workspace/project.json (the schema `ValidateProject`, project.go:569, checks
Pulumi.yaml against), project.go `Project.Validate` (837-889) and `ValidateConfigValue`
(771-831), and pkg/workspace/config.go `mergeConfig` (a declared key without a default is
required on every stack, 319-324; a default is applied to every stack that does not set the
key, 327-347) and `validateStackConfigValue` (a `secret` key must be set encrypted,
128-133)."""

import re

import pytest
import yaml
from jsonschema import Draft202012Validator
from pydantic import TypeAdapter

from config import ConfigError, load
from config.model import SECRET_KEYS, StackConfig
from config.problems import NAMESPACE
from preview.stack_file import EXAMPLE_STACKS, read_stack
from tests.builders import PROJECT_DIR

PROJECT_FILE = PROJECT_DIR / "Pulumi.yaml"

# The project schema's `config` key and the definitions it uses, as project.json declares
# them: `config` at lines 74-107, `simpleConfigType` 335-344 (`object` since v3.187.0,
# pulumi/pulumi#20132), `configItemsType` 345-377, `configTypeDeclaration` 378-398.
PROJECT_CONFIG_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"config": {
        "type": ["object", "string", "null"],
        "properties": {"secret": {"type": "boolean", "default": False}},
        "additionalProperties": {"oneOf": [
            {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "array"},
            {"$ref": "#/$defs/configTypeDeclaration"}]}}},
    "$defs": {
        "simpleConfigType": {"enum": ["string", "integer", "boolean", "array", "object"]},
        "configItemsType": {
            "type": "object", "required": ["type"],
            "properties": {
                "type": {"oneOf": [{"$ref": "#/$defs/simpleConfigType"},
                                   {"$ref": "#/$defs/configItemsType"}]},
                "items": {"$ref": "#/$defs/configItemsType"}},
            "if": {"properties": {"type": {"const": "array"}}},
            "then": {"required": ["items"]}},
        "configTypeDeclaration": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "type": {"$ref": "#/$defs/simpleConfigType"},
                "items": {"$ref": "#/$defs/configItemsType"},
                "description": {"type": "string"}, "secret": {"type": "boolean"},
                "default": {}, "value": {}}},
    },
}


def _project() -> dict:
    return yaml.safe_load(PROJECT_FILE.read_text())


def _declared() -> dict:
    return {key.split(":", 1)[1]: spec for key, spec in (_project().get("config") or {}).items()}


def _model_type(annotation) -> dict:
    """The JSON type of the values the program reads for a key, by the model's own JSON
    schema (pydantic's), as a Pulumi declaration's `type` and `items`."""
    schema = TypeAdapter(annotation).json_schema()

    def resolve(node: dict) -> dict:
        if "$ref" in node:
            return resolve(schema["$defs"][node["$ref"].rsplit("/", 1)[1]])
        if "anyOf" in node:
            kinds = [option for option in node["anyOf"] if option.get("type") != "null"]
            assert len(kinds) == 1, f"no single JSON type for {annotation}"
            return resolve(kinds[0])
        kind = {"type": node["type"]}
        if node["type"] == "array":
            kind["items"] = resolve(node["items"])
        return kind

    return resolve(schema)


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


def test_the_block_passes_pulumis_project_schema_and_checks():
    project = _project()
    errors = [f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
              for error in Draft202012Validator(PROJECT_CONFIG_SCHEMA).iter_errors(project)]
    assert errors == []
    for key, spec in project["config"].items():
        # Project.Validate: a key of another namespace (aws:region) may carry a value only.
        assert key.startswith(f"{project['name']}:") and "type" in spec, key
        if spec["type"] == "array":
            assert "items" in spec, key
        if "default" in spec:
            assert _matches(spec["type"], spec.get("items"), spec["default"]), key
            # mergeConfig applies a default as a plain value, which
            # validateStackConfigValue then refuses for a secret key.
            assert not spec.get("secret"), key
        # The program's own rule: Pulumi.yaml says what each key is.
        assert spec.get("description"), key


def _undeclared() -> set:
    return {field.alias for field in StackConfig.model_fields.values()} - set(_declared())


def test_every_top_level_key_of_the_model_is_declared_or_named_as_optional():
    assert set(_declared()) <= {field.alias for field in StackConfig.model_fields.values()}
    undeclared = _undeclared()
    assert "clusterName" in undeclared and "aws" in undeclared
    # The comment beside the block names them, so a reader of Pulumi.yaml sees every key.
    comments = "\n".join(line for line in PROJECT_FILE.read_text().splitlines()
                         if line.lstrip().startswith("#"))
    for key in undeclared:
        assert re.search(rf"\b{key}\b", comments), key


def _loads_without(stack: str, key: str) -> bool:
    stack_file = read_stack(PROJECT_DIR, stack)
    stack_file.config.pop(f"{NAMESPACE}:{key}", None)
    try:
        load(stack_file.config, stack_file.secret_keys, stack=stack)
    except ConfigError:
        return False
    return True


def test_a_key_left_undeclared_is_one_a_stack_may_leave_out():
    """mergeConfig: a key declared without a default is required on every stack; one left
    undeclared is one the program reads some example stack without."""
    for key in _undeclared():
        assert any(_loads_without(stack, key) for stack in EXAMPLE_STACKS), key


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
        if field.alias not in _undeclared() or key in stack_values:
            continue
        config = {**stack_file.config, key: _PLAINEST[_model_type(field.annotation)["type"]]}
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
        # Every value the program reads passes the CLI's type check (ValidateConfigValue).
        declared = {part: spec[part] for part in ("type", "items") if part in spec}
        assert declared == _model_type(field.annotation), field.alias
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
