"""The README's config reference names every key the model accepts, with its default."""

import json
import re
import typing

from pydantic import BaseModel

from config.access import Team, User
from config.model import Host, StackConfig, WorkerPool
from tests.conftest import PROJECT_DIR


def _keys(model: type[BaseModel], prefix: str = "") -> dict[str, object]:
    """Documented keys: nested sections expand, lists of hosts, pools, teams and users
    expand, other lists are leaves."""
    keys = {}
    for field in model.model_fields.values():
        key = f"{prefix}{field.alias}"
        annotation = field.annotation
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is list and args[0] in (Host, WorkerPool, Team, User):
            keys.update(_keys(args[0], f"{key}[]."))
            continue
        section = next((a for a in (annotation, *args)
                        if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if section is not None and typing.get_origin(annotation) is not list:
            keys.update(_keys(section, f"{key}."))
        else:
            keys[key] = None if field.is_required() else field.get_default()
    return keys


def _readme_rows() -> dict[str, str]:
    text = (PROJECT_DIR / "README.md").read_text()
    section = text.split("## Config reference", 1)[1]
    return {m[1]: m[2] for m in re.finditer(r"^\| `([^`]+)` \| ([^|]+) \|", section, re.M)}


def test_every_config_key_is_documented_with_its_default():
    rows = _readme_rows()
    keys = _keys(StackConfig)
    assert set(keys) == set(rows), (set(keys) ^ set(rows))
    for key, default in keys.items():
        shown = rows[key].strip()
        if default in (None, "") or shown.startswith(("required", "the stack", "`ssh", "none")):
            continue
        expected = json.dumps(default) if isinstance(default, (bool, list, dict)) else default
        assert shown == f"`{expected}`", (key, shown, default)
