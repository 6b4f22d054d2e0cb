"""A stack's config values through the loader as the CLI hands them over: the settings,
or the (key, message) of every problem."""

import pytest

from config import ConfigError, load
from tests.conftest import as_cli_config


def problems_of(values: dict) -> list:
    file = as_cli_config(values)
    with pytest.raises(ConfigError) as error:
        load(file.config, file.secret_keys, file.stack)
    return [(p.path, p.message) for p in error.value.problems]


def loads(values: dict):
    file = as_cli_config(values)
    return load(file.config, file.secret_keys, file.stack)
