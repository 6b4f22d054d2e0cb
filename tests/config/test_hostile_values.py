"""Every string key of the stack config, given a hostile value: a line break after a valid
value (what YAML's `name: |` makes), a command after it, a command alone, a quote that
ends a shell word, NUL and ESC, 20,000 characters. Either the config names that key as
the problem, or the value is accepted and the rendered scripts keep their structure:
they parse, and running their exports (or the SSH command line) runs nothing else.

The keys are found by walking StackConfig's fields, so a new key is covered with no change
here; the base configs are the repository's own stack files."""

import base64
import copy
import dataclasses
import email
import gzip
import json
import os
import re
import subprocess
import tempfile
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import pytest
import yaml
from pydantic import BaseModel, SecretStr

import config
from config.model import SECRET_KEYS, StackConfig
from config.model_base import control_character, is_multi_line
from config.problems import ConfigError, Problem
from preview.engine import run_program
from preview.stack_file import StackConfigFile, read_stack
from tests.config.hostile_bases import EXAMPLES, SETTINGS_FOR, TEMPLATES, stack_for
from tests.builders import PROJECT_DIR

# A whole preview and bash on every rendered script, for each of a thousand hostile
# values: in `make test`, not in `make quick`.
pytestmark = pytest.mark.tools

# Paths as `hosts[].labels{key}`: [] is an item of a list, {key} and {value} a dict's.
# StackConfig had this many when the test was written; a key removed shows here.
STRING_KEYS_FOUND = 121


def string_key_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths = []
    for field in model.model_fields.values():
        paths += _paths(field.annotation, f"{prefix}{field.alias}")
    return paths


def _paths(annotation: Any, path: str) -> list[str]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated:
        return _paths(args[0], path)
    if origin in (Union, types.UnionType):
        return [p for arg in args if arg is not type(None) for p in _paths(arg, path)]
    if origin is list:
        return _paths(args[0], f"{path}[]")
    if origin is dict:
        return _paths(args[0], f"{path}{{key}}") + _paths(args[1], f"{path}{{value}}")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return string_key_paths(annotation, f"{path}.")
    if annotation in (str, SecretStr) or (
            origin is Literal and any(isinstance(arg, str) for arg in args)):
        return [path]
    return []


STRING_KEYS = sorted(set(string_key_paths(StackConfig)))

MARKER = Path(tempfile.gettempdir()) / f"gpu-cluster-hostile-{os.getpid()}"
HOSTILE = {
    "line break": lambda valid: f"{valid}\n",
    "line break, command": lambda valid: f"{valid}\n$(touch {MARKER})",
    "command": lambda valid: f"$(touch {MARKER})",
    "quote, command": lambda valid: f"'; touch {MARKER}; '",
    "NUL": lambda valid: f"{valid}\x00",
    "ESC": lambda valid: f"{valid}\x1b[2J",
    "20,000 characters": lambda valid: valid + "x" * (20000 - len(valid)),
}

_STACKS: dict[str, StackConfigFile] = {}


def _base(stack: str) -> tuple[dict, StackConfigFile]:
    if stack not in _STACKS:
        _STACKS[stack] = read_stack(PROJECT_DIR, stack)
    file = _STACKS[stack]
    values = {}
    for full_key, text in file.config.items():
        key = full_key.partition(":")[2]
        values[key] = json.loads(text) if text.strip()[:1] in ("{", "[") else text
    return values, file


def _tokens(path: str) -> list[str]:
    tokens = []
    for part in path.replace("[]", ".[]").replace("{", ".{").split("."):
        if part:
            tokens.append(part)
    return tokens


def _place(values: dict, path: str, make_value) -> tuple[str, str]:
    """Sets the key at `path` (its last list item, its dict's first entry) to
    make_value(current or example value); returns (the key's concrete path, the value)."""
    tokens = _tokens(path)
    node: Any = values
    concrete, template_path = "", ""
    for index, token in enumerate(tokens[:-1]):
        following = tokens[index + 1]
        template_path += token if token == "[]" or not template_path else f".{token}"
        if token == "[]":
            if not node:
                node.append(copy.deepcopy(TEMPLATES.get(template_path, {})))
            # The last host is a worker (the first, lab's controller, takes no labels);
            # the first pool has GPUs.
            position = 0 if template_path == "pools[]" else len(node) - 1
            concrete += f"[{position}]"
            node = node[position]
            continue
        if token == "{value}":  # a map of lists (vpn.userNetworks): its first entry's list,
            # named by the map's key (as a map's own values are)
            key_path = path[:path.index("{value}")] + "{key}"
            if not node:
                node[EXAMPLES[key_path]] = []
            node = node[next(iter(node))]
            continue
        concrete += f".{token}" if concrete else token
        empty = [] if following == "[]" else copy.deepcopy(TEMPLATES.get(template_path, {}))
        if node.get(token) is None:
            node[token] = empty
        node = node[token]
    last = tokens[-1]
    if last == "[]":
        current = node[-1] if node else None
        value = make_value(current if isinstance(current, str) else EXAMPLES[path])
        if node:
            node[-1] = value
        else:
            node.append(value)
    elif last in ("{key}", "{value}"):
        if not node:
            key_path, value_path = path.replace("{value}", "{key}"), path.replace("{key}", "{value}")
            node[EXAMPLES[key_path]] = EXAMPLES[value_path]
        key = next(iter(node))
        if last == "{key}":
            value = make_value(key)
            node[value] = node.pop(key)
        else:
            value = make_value(node[key])
            node[key] = value
    else:
        current = node.get(last)
        valid = current if isinstance(current, str) and current else EXAMPLES[path]
        value = make_value(valid)
        node[last] = value
        concrete += f".{last}" if concrete else last
    return concrete, value


def _load(values: dict, file: StackConfigFile) -> tuple[list[Problem], StackConfigFile]:
    raw = {f"gpu-cluster:{key}": value if isinstance(value, str) else json.dumps(value)
           for key, value in values.items()}
    secret_keys = set(file.secret_keys) | {
        f"gpu-cluster:{key}" for key in SECRET_KEYS if key in values}
    stack_file = StackConfigFile(project=file.project, stack=file.stack, config=raw,
                                 secret_keys=sorted(secret_keys))
    try:
        config.load(raw, secret_keys, file.stack)
    except ConfigError as error:
        return error.problems, stack_file
    return [], stack_file


def _names(problem: Problem, key_path: str) -> bool:
    # Host and pool entries are named in paths (`pools[0] (a10g).count`).
    path = re.sub(r"\] \([^)]*\)", "]", problem.path)
    return path == key_path or path.startswith((f"{key_path}.", f"{key_path}[", f"{key_path} "))


def _case(path: str, make_value):
    values, file = _base(stack_for(path))
    if "bastionPrivateKey" == path:
        EXAMPLES[path] = values["sshPrivateKey"]
    if path in SETTINGS_FOR:
        SETTINGS_FOR[path](values)
    key_path, value = _place(values, path, make_value)
    problems, stack_file = _load(values, file)
    return key_path, value, problems, stack_file


def test_every_string_key_is_found():
    print(f"{len(STRING_KEYS)} string keys covered")
    assert len(STRING_KEYS) >= STRING_KEYS_FOUND
    assert "hosts[].labels{key}" in STRING_KEYS and "sshPrivateKey" in STRING_KEYS


@pytest.mark.parametrize("path", STRING_KEYS)
def test_the_valid_value_is_accepted_where_the_hostile_one_is_placed(path):
    # The hostile cases below change only this value; here it is valid, so a problem
    # they report at the key is the hostile value's.
    key_path, _, problems, _ = _case(path, lambda valid: valid)
    assert not [p for p in problems if _names(p, key_path)], problems


def _scripts(plan) -> list[tuple[str, str, bool]]:
    """(name, text, is a command line) of everything rendered to run on a machine."""
    found = []
    for resource in plan.of_type("command:remote:Command"):
        for field in ("stdin", "create", "delete", "update"):
            text = resource.inputs.get(field)
            if isinstance(text, str):
                found.append((f"{resource.name}.{field}", text, field != "stdin"))
    for resource in plan.resources:
        for field in ("userData", "userDataBase64"):
            data = resource.inputs.get(field)
            if not isinstance(data, str) or not data:
                continue
            message = email.message_from_bytes(gzip.decompress(base64.b64decode(data)))
            for index, part in enumerate(message.get_payload()):
                text = part.get_payload(decode=True).decode()
                if part.get_content_type() == "text/cloud-config":
                    assert isinstance(yaml.safe_load(text), dict), resource.name
                else:
                    found.append((f"{resource.name}.{field}[{index}]", text, False))
            # The steps of its boot plan, which the user data fetches.
            found += [(f"{resource.name}.{field}:{name}", stdin, False)
                      for name, stdin in plan.boot_steps(data)]
    return found


def _prologue(script: str) -> str:
    # Before the first function (gpu_cluster_create, _step, _receive): comments and
    # exports only, safe to run.
    return re.split(r"\ngpu_cluster_[a-z]+\(\) \{", script, maxsplit=1)[0] + "\n"


def _assert_structure_kept(stack_file: StackConfigFile, tmp_path: Path) -> None:
    # Its own stack name: the build folder the program writes (Kubeflow's overlays) is
    # not the example stack's, which other tests read at the same time.
    plan = run_program(PROJECT_DIR, dataclasses.replace(stack_file,
                                                        stack=f"hostile-{stack_file.stack}"))
    scripts = _scripts(plan)
    assert scripts
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / "sudo").write_text("#!/bin/sh\nexit 1\n")
    (fake_bin / "sudo").chmod(0o755)
    env = {"PATH": f"{fake_bin}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for name, text, command_line in scripts:
        syntax = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert syntax.returncode == 0, (name, syntax.stderr)
        run = text if command_line else _prologue(text)
        subprocess.run(["bash", "--norc", "-c", run], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=30)
        assert not MARKER.exists(), f"{name} ran the value as a command"


@pytest.fixture(autouse=True)
def _no_marker():
    MARKER.unlink(missing_ok=True)
    yield
    MARKER.unlink(missing_ok=True)


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("path", STRING_KEYS)
def test_a_hostile_value_is_refused_at_its_key_or_cannot_break_out(path, hostile, tmp_path):
    key_path, value, problems, stack_file = _case(path, hostile)
    for problem in problems:
        # Messages quote values escaped (repr), never raw, and never a secret.
        assert control_character(problem.message) is None, problem
        if path in SECRET_KEYS:
            assert "touch" not in problem.message and "xxxx" not in problem.message, problem
    if any(_names(problem, key_path) for problem in problems):
        return
    assert not problems, f"{key_path} accepted {value[:60]!r} but the config has problems " \
        f"elsewhere, so it cannot be rendered: {problems}"
    annotation = _annotation(path)
    assert control_character(value, multi_line=is_multi_line(annotation)) is None, \
        f"{key_path} accepted a control character"
    _assert_structure_kept(stack_file, tmp_path)


def _annotation(path: str) -> Any:
    models: list[Any] = [StackConfig]
    annotation = None
    for token in _tokens(path):
        if token in ("[]", "{key}", "{value}"):
            continue
        # A union's models (kubeflow.connectors[]): the one that has the key.
        field = next(f for model in models for f in model.model_fields.values()
                     if f.alias == token)
        annotation = field.annotation
        models = [leaf for leaf in _leaves(annotation)
                  if isinstance(leaf, type) and issubclass(leaf, BaseModel)]
    return annotation


def _leaves(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _leaves(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType, list, dict):
        return [leaf for arg in typing.get_args(annotation) for leaf in _leaves(arg)]
    return [annotation]

