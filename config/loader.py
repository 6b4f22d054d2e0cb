"""Reads the stack config the way the Pulumi CLI hands it to the program, validates it
and returns a typed StackConfig, or raises ConfigError listing every problem."""

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pulumi

from config import single_pass
from config.messages import (QUOTE_LIMIT, cut, did_you_mean, finish, keys_at, namespace_typo,
                             required_message, set_secret_command, shown, string_leaves)
from config.model_base import without_field_names
from config.model import PRIVATE_KEY_KEYS, SECRET_KEYS, StackConfig
from config.problems import NAMESPACE, ConfigError, Problem
from config.types import private_key_problem
from contract.names import REDACTED

# The most hosts and EC2 worker pools one stack holds: about the largest whose offline
# preview stays within benchmarks/preview_scale.py's goals (30 s, 1 GiB). Measured there:
# 500 hosts 13.6 s and 1022 MiB, 600 hosts 1179 MiB, 1,000 hosts 1860 MiB (memory is the
# limit); 200 pools 10.8 s and 343 MiB.
MAX_HOSTS = 500
MAX_POOLS = 200


def load_from_pulumi() -> StackConfig:
    """Loads the current stack's config from the Pulumi runtime (CLI or mocks)."""
    runtime_config = pulumi.runtime.config
    raw = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    secret_keys |= {key for key in raw if runtime_config.is_config_secret(key)}
    return load(raw, secret_keys, stack=pulumi.get_stack())


def load(raw: Mapping[str, str], secret_keys: Iterable[str], stack: str) -> StackConfig:
    """`raw` maps full config keys (`gpu-cluster:hosts`) to the strings the CLI passes:
    scalars as text, objects and lists as JSON."""
    secret_keys = set(secret_keys)
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    known = {field.alias for field in StackConfig.model_fields.values()}
    for full_key, text in raw.items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            if namespace_typo(namespace):
                problems.append(Problem(cut(key), f"unknown namespace '{cut(namespace)}'; did "
                                        f"you mean '{NAMESPACE}:{cut(key)}'?",
                                        namespace=cut(namespace)))
            continue
        if key not in known:
            problems.append(Problem(key, _unknown_key_message(key, known)))
            continue
        if key in SECRET_KEYS and full_key not in secret_keys:
            problems.append(
                Problem(key, "must be a secret, but it is set in plain text; remove it and set it "
                        f"with `{set_secret_command(full_key)}`")
            )
        try:
            values[key] = _decode(text)
        except ValueError as error:
            problems.append(Problem(key, str(error)))
    values.setdefault("clusterName", stack)
    snake_keys, values = without_field_names(StackConfig, values)
    problems += [Problem(path, f"unknown key; did you mean '{key}'?") for path, key in snake_keys]
    for key in PRIVATE_KEY_KEYS:
        if key in values:
            problem = private_key_problem(str(values[key]))
            if problem:
                problems.append(Problem(key, problem))
    # Before anything looks at the hosts one by one: a list far too long fails at once.
    over_limit = _over_limits(values)
    problems += over_limit
    checked = {key: value for key, value in values.items()
               if key not in {problem.path for problem in over_limit}}
    secret_paths = {key for key in values if f"{NAMESPACE}:{key}" in secret_keys}

    validated = single_pass.validate(checked, set(values) - set(checked))
    problems += _from_validation_errors(validated.errors, secret_paths)
    problems += [problem for problem in single_pass.cross_checks(validated.partial)
                 if not _speaks_of(problem, validated.dropped)]
    if problems or validated.settings is None:
        raise ConfigError(finish(problems, values, secret_keys))
    return validated.settings


def _over_limits(values: dict[str, Any]) -> list[Problem]:
    problems = []
    for key, limit, fix in (("hosts", MAX_HOSTS, "split the cluster into several stacks"),
                            ("pools", MAX_POOLS, "use fewer, larger pools")):
        entries = values.get(key)
        if isinstance(entries, list) and len(entries) > limit:
            problems.append(Problem(key, f"lists {len(entries)} {key}; a stack holds at most "
                                    f"{limit} ({fix})"))
    return problems


def _decode(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as error:
            raise ValueError(f"is not valid structured config ({error.msg})") from None
    return text


def _unknown_key_message(key: str, known: set[str]) -> str:
    return f"unknown key{did_you_mean(key, known)}"


# A private key pasted where a public one belongs (an age identity in backup.recipients,
# a PEM key): a secret whatever its key, never quoted.
_PRIVATE_KEY_MARKERS = ("AGE-SECRET-KEY-", "PRIVATE KEY")


def _from_validation_errors(errors: list[dict], secret_paths: set[str]) -> list[Problem]:
    problems = []
    for item in errors:
        path = _path(item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        value = item.get("input")
        secret = (bool(item["loc"]) and str(item["loc"][0]) in secret_paths | set(SECRET_KEYS)
                  or any(marker in leaf.upper() for leaf in string_leaves(value)
                         for marker in _PRIVATE_KEY_MARKERS))
        if item["type"] == "missing":
            message = required_message(item["loc"])
        elif item["type"] == "extra_forbidden":
            message = _unknown_nested_key(item["loc"])
        elif secret:
            # A validator may quote the value, or a part of it: nothing quoted stays.
            message = re.sub(r"'[^']*'", REDACTED, message)
        else:
            if isinstance(value, (str, int, float, bool)) and str(value) not in message:
                message += f" (got {shown(value)})"
            if isinstance(value, bool) and item["type"] in _TEXT_ERRORS:
                message += _UNQUOTED_WORD
            # Validators quote the value whole; a long one is cut.
            for leaf in sorted(set(string_leaves(value)), key=len, reverse=True):
                if len(leaf) > QUOTE_LIMIT:
                    message = message.replace(leaf, cut(leaf))
        problems.append(Problem(path, message))
    return problems


# A YAML 1.1 reader (PyYAML, the offline preview's) takes an unquoted yes, no, on, off,
# true or false as a boolean (https://yaml.org/type/bool.html); where text was meant, the
# value arrives as one.
_TEXT_ERRORS = ("string_type", "literal_error", "enum")
_UNQUOTED_WORD = ("; an unquoted yes, no, on, off, true or false is read as a boolean: "
                  "quote the word (\"off\")")


def _unknown_nested_key(loc: tuple) -> str:
    name = str(loc[-1])
    known = keys_at(loc)
    if len(loc) == 2 and loc[0] == "storage":
        return (f"unknown storage backend '{cut(name)}'{did_you_mean(name, known)} (use nfs, "
                "efs or localPath)")
    return f"unknown key{did_you_mean(name, known)}"


def _path(loc: tuple) -> str:
    path = ""
    previous = None
    for part in loc:
        # A tagged union's tag (kubeflow.connectors[0]'s `oidc`) is no key of the file.
        tag = isinstance(previous, int) and part in UNION_TAGS
        previous = part
        if tag:
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (the key)"
        else:
            part = cut(str(part))
            path += f".{part}" if path else part
    return path


def _speaks_of(problem: Problem, dropped: set[str]) -> bool:
    """Whether `problem` is about a dropped key, or about a section holding one (with
    storage.efs dropped, "storage: configure a backend" is that key's doing)."""
    return any(problem.path == key or problem.path.startswith((f"{key}.", f"{key}["))
               or key.startswith(f"{problem.path}.") or key in problem.message
               for key in dropped)


# The tags of the config's tagged unions (config/kubeflow_login.py Connector).
UNION_TAGS = ("oidc", "ldap")
