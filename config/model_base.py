"""The base of every config section: camelCase keys in the stack file, nothing unknown, and
one rule for every value that reaches a script, a manifest, a unit or a command line: text
is a single line of printable characters unless its field is declared MultiLine, and a
whole number is never read from true/false or a fraction."""

import re
import types
import typing
import unicodedata
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel


class _MultiLine:
    """Marks a text field that may hold line breaks (a PEM block, a VPN profile)."""

    def __repr__(self) -> str:
        return "MULTI_LINE"


MULTI_LINE = _MultiLine()
# Line breaks and tabs are all a PEM block or an OpenVPN profile needs.
_MULTI_LINE_ALLOWED = {"\n", "\r", "\t"}


def control_character(text: str, multi_line: bool = False) -> tuple[int, str] | None:
    """The first control character (C0, DEL, C1) or line/paragraph separator in `text`, as
    (position, "U+000A"); None when there is none."""
    for position, char in enumerate(text):
        if multi_line and char in _MULTI_LINE_ALLOWED:
            continue
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            return position, f"U+{ord(char):04X}"
    return None


def _leaves(annotation: Any) -> list[Any]:
    """The leaf types of an annotation, through Annotated, Optional/Union, list and dict."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _leaves(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType, list, dict, tuple, set):
        return [leaf for arg in typing.get_args(annotation) for leaf in _leaves(arg)]
    return [annotation]


def _markers(annotation: Any) -> list[Any]:
    """Every Annotated metadata item anywhere in the annotation."""
    found = []
    if typing.get_origin(annotation) is Annotated:
        found += list(annotation.__metadata__)
    for arg in typing.get_args(annotation):
        if not isinstance(arg, (str, int, bool)):
            found += _markers(arg)
    return found


def is_text(annotation: Any) -> bool:
    """A field whose values are text (str, a secret, a Literal of strings), with no nested
    section (those check their own fields)."""
    leaves = _leaves(annotation)
    if any(isinstance(leaf, type) and issubclass(leaf, BaseModel) for leaf in leaves):
        return False
    return any(leaf in (str, SecretStr)
               or (typing.get_origin(leaf) is Literal
                   and any(isinstance(arg, str) for arg in typing.get_args(leaf)))
               for leaf in leaves)


def is_multi_line(annotation: Any) -> bool:
    return any(marker is MULTI_LINE for marker in _markers(annotation))


def _is_whole_number(annotation: Any) -> bool:
    leaves = _leaves(annotation)
    # A field that also takes text (a count or a percentage) checks its own values.
    return int in leaves and bool not in leaves and str not in leaves


def _strings(value: Any, where: str = "") -> typing.Iterator[tuple[str, str]]:
    """(where, text) for every string in a raw value: itself, list items, dict keys and values."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}, item {index}" if where else f"item {index}")
    elif isinstance(value, dict):
        for key, item in value.items():
            shown = _brief(key)
            yield from _strings(key, f"key {shown}")
            yield from _strings(item, f"the value of key {shown}")


def _brief(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 40 else f"{text[:36]}...'"


class Section(BaseModel):
    # A field's description is the docstring under it (the generated reference's text).
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
        use_attribute_docstrings=True,
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        # Docstrings keep their line breaks (pydantic 2.14.3 pydantic/_internal/
        # _docs_extraction.py:35, inspect.cleandoc); a description is one line.
        for field in cls.model_fields.values():
            if field.description:
                field.description = " ".join(field.description.split())

    @field_validator("*", mode="before")
    @classmethod
    def _one_rule_for_values(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields[info.field_name]
        annotation = field.annotation
        if isinstance(value, (bool, float)) and _is_whole_number(annotation):
            # Lax pydantic reads true as 1 and 4.0 as 4; a stack file means neither.
            raise ValueError(f"must be a whole number, not {str(value).lower()}")
        if isinstance(value, str) and _is_whole_number(annotation) \
                and not re.fullmatch(r"[-+]?[0-9]+", value):
            # `pulumi config set --path` hands numbers over as text: "4" is 4, "4.0" is not.
            raise ValueError(f"must be a whole number, not {value[:40]!r}")
        if not is_text(annotation):
            return value
        multi_line = is_multi_line(annotation)
        for where, text in _strings(value):
            found = control_character(text, multi_line)
            if found:
                position, code = found
                kind = "line break" if code in ("U+000A", "U+000D") else "control character"
                place = f"{where} " if where else ""
                # The text itself is never quoted: it may be a secret.
                raise ValueError(
                    f"{place}has a {kind} ({code}) at character {position}; it must be "
                    "a single line of printable text" if not multi_line else
                    f"{place}has a control character ({code}) at character {position}")
        return value


def without_field_names(model: type[BaseModel], value: Any,
                        path: str = "") -> tuple[list[tuple[str, str]], Any]:
    """Stack file keys spelled as the Python field (`disable_iommu`) rather than the key
    (`disableIommu`): pydantic's populate_by_name, there for the program's own use, would
    apply them. Returns (path, key) of each and `value` without them."""
    if not isinstance(value, dict):
        return [], value
    found: list[tuple[str, str]] = []
    kept: dict = {}
    fields = model.model_fields
    for key, item in value.items():
        field = fields.get(key)
        where = f"{path}.{key}" if path else str(key)
        if field is not None and field.alias and field.alias != key:
            found.append((where, field.alias))
            continue
        field = field or next((f for f in fields.values() if f.alias == key), None)
        if field is not None:
            inner, item = _without_field_names_in(field.annotation, item, where)
            found += inner
        kept[key] = item
    return found, kept


def _without_field_names_in(annotation: Any, value: Any,
                            path: str) -> tuple[list[tuple[str, str]], Any]:
    models = [leaf for leaf in _leaves(annotation)
              if isinstance(leaf, type) and issubclass(leaf, BaseModel)]
    if len(models) != 1:
        return [], value
    model = models[0]
    if isinstance(value, list):
        found, items = [], []
        for index, item in enumerate(value):
            inner, item = without_field_names(model, item, f"{path}[{index}]")
            found += inner
            items.append(item)
        return found, items
    return without_field_names(model, value, path)
