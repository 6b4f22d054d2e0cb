"""The config reference's tables, read from the model: one table per section (nested
sections and lists of them get tables of their own, in the model's field order), each key
with its type, its default as YAML and its field's description."""

import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from config.model import StackConfig
from config.model_base import MULTI_LINE

# Required by the model, filled in by the loader when the stack file leaves it out
# (config/loader.py: values.setdefault("clusterName", stack)).
LOADER_DEFAULTS = {"clusterName": "the stack name"}


@dataclass(frozen=True)
class Table:
    """The keys of one section at `path` (`kubernetes.upgrade`, `hosts[]`)."""

    path: str
    model: type[BaseModel]
    title: str  # the heading; also the anchor the type column links to
    description: str  # the section field's own
    rows: tuple[tuple[str, str, str, str], ...]  # key, type, default, description


def slug(title: str) -> str:
    """GitHub's heading id (tests/scans/test_docs_links.py reads anchors the same way)."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation)
            if not isinstance(arg, (str, int, bool)) for m in _models(arg)]


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is Annotated or origin in (Union, types.UnionType):
        return any(_is_list(arg) for arg in typing.get_args(annotation)[:None if origin is not
                                                                          Annotated else 1])
    return origin is list


def _title(path: str, model: type[BaseModel], shared: bool) -> str:
    kind = typing.get_args(model.model_fields["type"].annotation) if shared else ()
    return f"`{path}` (`type: {kind[0]}`)" if kind else f"`{path}`"


def tables(root: type[BaseModel] = StackConfig) -> list[Table]:
    """Every section's table, depth first in field order (a section's table, then those of
    the sections it holds)."""
    found: list[Table] = []

    def visit(model: type[BaseModel], path: str, title: str, description: str) -> None:
        rows, nested = [], []
        for field in model.model_fields.values():
            key = f"{path}{'.' if path else ''}{field.alias}"
            inner = _models(field.annotation)
            sub = f"{key}[]" if _is_list(field.annotation) else key
            links = {m: _title(sub, m, len(inner) > 1) for m in inner}
            rows.append((key, type_text(field.annotation, {m: slug(t) for m, t in links.items()},
                                        field.metadata),
                         default_text(key, field), field.description or ""))
            nested += [(m, sub, links[m], field.description or "") for m in inner]
        found.append(Table(path, model, title, description, tuple(rows)))
        for args in nested:
            visit(*args)

    visit(root, "", "Top-level keys", "")
    return found


def _named_types() -> list[tuple[Any, str, str]]:
    """Module-level aliases of the config package (`DnsLabel = Annotated[str, ...]`), so a
    constrained string shows as its validator's type name: (alias, name, its module)."""
    named = {}
    for module_name, module in sorted(sys.modules.items()):
        if module is None or not module_name.startswith("config."):
            continue
        source = Path(module.__file__).read_text()
        for name, value in vars(module).items():
            if (name[:1].isupper() and typing.get_origin(value) is Annotated
                    and typing.get_args(value)[0] in (str, int, SecretStr)
                    and (name not in named or re.search(rf"^{name} = ", source, re.M))):
                named[name] = (value, name, module_name)
    return list(named.values())


def _check_text(metadata: tuple) -> str:
    """How an alias is checked: its validator function (and the pattern it matches with),
    or its constraints."""
    parts = []
    for item in metadata:
        func = getattr(item, "func", None)
        if func is not None:
            name = func.__qualname__.split(".<locals>")[0]
            patterns = [cell.cell_contents.pattern for cell in func.__closure__ or ()
                        if isinstance(cell.cell_contents, re.Pattern)]
            parts.append(f"`{name}`" + "".join(f" (`{p}`)" for p in patterns))
        elif isinstance(item, FieldInfo):
            parts.append(_constraints(item.metadata))
        elif item is not MULTI_LINE:
            parts.append(_constraints([item]))
    if MULTI_LINE in metadata:
        parts.append("may span lines")
    return "; ".join(part for part in parts if part)


def named_types_used() -> list[tuple[str, str, str, str]]:
    """(name, base type, module, how it is checked) of each alias the tables show."""
    shown = " ".join(row[1] for table in tables() for row in table.rows)
    used = set(re.findall(r"\b[A-Z][A-Za-z0-9]+\b", shown))
    return sorted((name, typing.get_args(value)[0].__name__, f"config/{module.split('.')[-1]}.py",
                   _check_text(value.__metadata__))
                  for value, name, module in _named_types() if name in used)


def _named(base: Any, metadata: list) -> tuple[str | None, list]:
    """The alias whose type is `base` with `metadata` (pydantic hands a field's own
    Annotated over as the field's metadata), and the metadata left over."""
    for value, name, _ in _named_types():
        own = list(value.__metadata__)
        if typing.get_args(value)[0] is base and own and all(
                any(m is item or _same(m, item) for item in metadata) for m in own):
            return name, [item for item in metadata
                          if not any(m is item or _same(m, item) for m in own)]
    return None, metadata


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # metadata objects that refuse comparison are different ones
        return False


def _constraints(metadata: list) -> str:
    """Bounds and patterns of a field or an unnamed Annotated type, as text."""
    parts = []
    for item in metadata:
        for attr, shown in (("ge", "≥ {}"), ("gt", "> {}"), ("le", "≤ {}"), ("lt", "< {}"),
                            ("min_length", "at least {} long"),
                            ("max_length", "at most {} long"), ("pattern", "matching `{}`")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(shown.format(value))
    return ", ".join(parts)


def type_text(annotation: Any, links: dict | None = None, metadata: list | None = None) -> str:
    """`list[[Host](#hosts)]`, `` `k0s` or `rke2` ``, `DnsLabel`, `int (≥ 0, ≤ 9000)`,
    `**secret** str`; Optional is left out (the default column says unset)."""
    links, metadata = links or {}, list(metadata or [])
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return type_text(args[0], links, [*annotation.__metadata__, *metadata])
    if origin in (Union, types.UnionType):
        # A validator of the whole union is named once, after it.
        checks = [f"`{m.func.__name__}`" for m in metadata if getattr(m, "func", None)]
        kept = [arg for arg in args if arg is not type(None)]
        text = " or ".join(type_text(arg, links, [m for m in metadata
                                                  if not getattr(m, "func", None)])
                           for arg in kept)
        return f"{text} ({', '.join(checks)})" if checks else text
    if origin is Literal:
        values = [f"`{str(v).lower() if isinstance(v, bool) else v}`" for v in args]
        return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"
    name, metadata = _named(annotation, metadata) if metadata else (None, metadata)
    if name is not None:
        text = f"**secret** {name}" if annotation is SecretStr else name
    elif origin is list:
        text = f"list[{type_text(args[0], links)}]"
    elif origin is dict:
        text = f"dict[{type_text(args[0], links)}, {type_text(args[1], links)}]"
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{links[annotation]})" if annotation in links \
            else annotation.__name__
    elif annotation is SecretStr:
        text = "**secret** str"
    else:
        text = getattr(annotation, "__name__", str(annotation))
    checks = [f"`{m.func.__name__}`" for m in metadata if getattr(m, "func", None)]
    bounds = ", ".join(filter(None, [_constraints(metadata), *checks,
                                     "multi-line" if MULTI_LINE in metadata else ""]))
    return f"{text} ({bounds})" if bounds else text


def default_text(key: str, field: FieldInfo) -> str:
    """The default as YAML; `required`; `unset` (the description says what that means)."""
    if field.is_required():
        return LOADER_DEFAULTS.get(key, "required")
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        value = {}
    shown = yaml.safe_dump(value, default_flow_style=True, width=10_000, allow_unicode=True)
    return f"`{shown.removesuffix(chr(10)).removesuffix('...').strip()}`"
