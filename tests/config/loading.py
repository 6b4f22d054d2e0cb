"""A stack's config values through the loader as the CLI hands them over: the settings,
or every problem (as (key, message) or as the line the error prints), and changes to
make to the values on the way."""

import pytest

from config import ConfigError, load
from config.model import SECRET_KEYS
from tests.builders import as_cli_config


def loads(values: dict, secret=SECRET_KEYS):
    file = as_cli_config(values, secret=secret)
    return load(file.config, file.secret_keys, file.stack)


def _refusal(values: dict, secret) -> ConfigError:
    with pytest.raises(ConfigError) as error:
        loads(values, secret=secret)
    return error.value


def problems_of(values: dict, secret=SECRET_KEYS) -> list:
    return [(p.path, p.message) for p in _refusal(values, secret).problems]


def problem_lines(values: dict, secret=SECRET_KEYS) -> list[str]:
    """Each problem as the error lists it: `gpu-cluster:<key>: <message>`."""
    return [str(problem) for problem in _refusal(values, secret).problems]


def refused_at(values: dict, path: str, fragment: str) -> list[str]:
    """The problem lines of `values`, one of which is at key `path` and says `fragment`."""
    problems = problem_lines(values)
    assert any(p.startswith(f"{path}: ") and fragment in p for p in problems), problems
    return problems


# set_path's value that deletes the key instead.
DELETE = object()


def set_path(path: str, value):
    """A change to the values that sets `path` ("hosts[1].taints") to `value`."""
    def mutate(values: dict) -> None:
        target = values
        keys = path.replace("]", "").replace("[", ".").split(".")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target.setdefault(key, {})
        last = keys[-1]
        if value is DELETE:
            del target[int(last) if last.isdigit() else last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value
    return mutate
