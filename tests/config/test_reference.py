"""The config reference (docs/reference.md) names every key the model accepts, with its default."""

import json
import re
import typing

from pydantic import BaseModel

from config.access import Team, User
from config.model import Host, StackConfig, WorkerPool
from tests.builders import PROJECT_DIR
from tests.docs import section


REQUIRED = object()  # a key without a default


def _keys(model: type[BaseModel], prefix: str = "") -> dict[str, object]:
    """Documented keys: nested sections expand, lists of hosts, pools, teams and users
    expand, other lists are leaves. A section that must be given has a row of its own."""
    keys: dict[str, object] = {}
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
            if field.is_required():
                keys[key] = REQUIRED
            keys.update(_keys(section, f"{key}."))
        else:
            keys[key] = REQUIRED if field.is_required() else field.get_default()
    return keys


def _readme_rows() -> dict[str, str]:
    text = section("docs/reference.md", "Config reference")
    return {m[1]: m[2] for m in re.finditer(r"^\| `([^`]+)` \| ([^|]+) \|", text, re.M)}


def test_every_config_key_is_documented_with_its_default():
    rows = _readme_rows()
    keys = _keys(StackConfig)
    assert set(keys) == set(rows), (set(keys) ^ set(rows))
    for key, default in keys.items():
        shown = rows[key].strip()
        if default in (None, "", REQUIRED) or shown.startswith(("required", "the stack", "`ssh", "none")):
            continue
        expected = json.dumps(default) if isinstance(default, (bool, list, dict)) else default
        assert shown == f"`{expected}`", (key, shown, default)


# Required by the model, filled by the loader when the stack file leaves it out.
LOADER_DEFAULTS = {"clusterName": "the stack name"}


def test_every_key_without_a_default_is_marked_required():
    rows = _readme_rows()
    unmarked = {key: rows[key] for key, default in _keys(StackConfig).items()
                if default is REQUIRED and not rows[key].strip().startswith(
                    LOADER_DEFAULTS.get(key, "required"))}
    assert unmarked == {}


def test_every_stack_output_is_described():
    """The outputs table (docs/running.md) names exactly what __main__.py exports:
    Cluster.outputs, whose names are components/cluster.py OUTPUTS."""
    from components.cluster import OUTPUTS

    exported = set(OUTPUTS)
    assert "for name, value in cluster.outputs.items():" in (
        PROJECT_DIR / "__main__.py").read_text()
    text = section("docs/running.md", "Stack outputs")
    table = text.split("\n\n", 2)[1]
    described = set(re.findall(r"^\| `([A-Za-z]+)` \|", table, re.M))
    assert exported and described == exported, described ^ exported


def test_the_readme_names_the_python_and_pulumi_versions_the_workflows_use():
    workflows = "".join(p.read_text() for p in (PROJECT_DIR / ".github/workflows").glob("*.yml"))
    clis = set(re.findall(r"pulumi-version: ([0-9.]+)", workflows))
    pythons = set(re.findall(r'python-version: "([0-9.]+)"', workflows))
    sdk = re.search(r"^pulumi==([0-9.]+)$", (PROJECT_DIR / "requirements.txt").read_text(), re.M)
    top = (PROJECT_DIR / "README.md").read_text().split("## What it is", 1)[0]
    assert len(clis) == 1 and len(pythons) == 1, (clis, pythons)
    assert clis == {sdk[1]}
    assert f"Pulumi CLI {sdk[1]}" in top and f"Python {pythons.pop()}" in top
