"""The one validation pass over a stack's values. Each field of StackConfig is validated once,
with StackConfig's own rules; a field that does not validate is kept out and its errors
collected, so the cross-key checks still run on every section that did (PartialConfig), and
StackConfig is made of the validated fields when there were no errors."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, get_args, get_origin

from pydantic import ValidationError, ValidationInfo, create_model, field_validator
from pydantic.fields import FieldInfo

from config.model import CROSS_CHECKS, SECRET_KEYS, StackConfig
from config.model_base import is_text
from config.partial import PartialConfig
from config.problems import Problem

# A rule across sections belongs to CROSS_CHECKS, which also runs on a partial config;
# StackConfig itself has none, so making it of validated fields skips nothing.
assert not StackConfig.__pydantic_decorators__.model_validators


@dataclass(frozen=True)
class Pass:
    # None when a field did not validate (or a list was left unchecked).
    settings: Optional[StackConfig]
    # pydantic's error items, each `loc` from the top of the stack config.
    errors: list[dict]
    partial: PartialConfig
    # Keys left at their defaults so the rest of their section could be checked
    # (`network.cni`): the cross-key checks' problems about them are not shown.
    dropped: frozenset[str]


def validate(values: Mapping[str, Any], unchecked: set[str]) -> Pass:
    """`values` by stack file key, without the keys in `unchecked` (lists over their
    limit, which are not looked at)."""
    fields = StackConfig.model_fields
    errors = [{"type": "missing", "loc": (field.alias,), "msg": "Field required",
               "input": dict(values)}
              for field in fields.values() if field.is_required() and field.alias not in values]
    # What the validator below adds to as it goes: the errors, the keys dropped, the lists
    # not all of whose entries validated and the indexes of those that did.
    context: dict[str, Any] = {
        "errors": errors, "dropped": set(), "kept": {},
        "incomplete": {name for name, field in fields.items() if field.alias in unchecked}}
    parsed = _Salvaging.model_validate(dict(values), context=context)
    parsed_fields = {name: getattr(parsed, name) for name in fields}
    settings = None
    if not errors and not unchecked:
        settings = StackConfig.model_construct(_fields_set=parsed.model_fields_set,
                                               **parsed_fields)
    partial = PartialConfig(_view(parsed_fields, values, context["kept"]), frozenset(values),
                            frozenset(context["incomplete"]))
    return Pass(settings, list(errors), partial, frozenset(context["dropped"]))


def cross_checks(cfg: PartialConfig) -> list[Problem]:
    """Every section's rules across keys (config/model.py CROSS_CHECKS)."""
    return [problem for check in CROSS_CHECKS for problem in check(cfg)]


def _keep_what_validates(cls, value: Any, handler, info: ValidationInfo) -> Any:
    """Validates one field of StackConfig; when it fails, records its errors and keeps
    what can be checked: a section without its broken keys, a list's entries that
    validate, text as written."""
    try:
        return handler(value)
    except ValidationError as error:
        context = info.context
        alias = cls.model_fields[info.field_name].alias
        items = error.errors(include_url=False)
        context["errors"] += [{**item, "loc": (alias, *item["loc"])} for item in items]
        if isinstance(value, list) and _is_list(cls.model_fields[info.field_name].annotation):
            context["incomplete"].add(info.field_name)
            entries = [(index, _or_none(handler, [item])) for index, item in enumerate(value)]
            context["kept"][info.field_name] = [index for index, entry in entries
                                               if entry is not None]
            return [entry for _, entry in entries if entry is not None]
        if isinstance(value, str) and is_text(cls.model_fields[info.field_name].annotation):
            return value
        broken = {item["loc"][0] for item in items
                  if item["loc"] and isinstance(item["loc"][0], str)}
        if not isinstance(value, dict) or not broken:
            return None
        rest = _or_none(handler, {k: v for k, v in value.items() if k not in broken})
        if rest is not None:
            context["dropped"].update(f"{alias}.{key}" for key in broken)
        return rest


def _or_none(handler, value: Any) -> Any:
    try:
        result = handler(value)
    except ValidationError:
        return None
    return result[0] if isinstance(value, list) else result


def _defaulting_to_none(field: FieldInfo) -> FieldInfo:
    return FieldInfo.merge_field_infos(field, default=None)


# StackConfig with every required field defaulting to None (their absence is reported
# above) and each field validated on its own.
_Salvaging = create_model(
    "PartialStackConfig", __base__=StackConfig,
    __validators__={"keep": field_validator("*", mode="wrap")(_keep_what_validates)},
    **{name: (field.annotation, _defaulting_to_none(field))
       for name, field in StackConfig.model_fields.items() if field.is_required()})


def _view(fields: dict[str, Any], values: Mapping[str, Any],
          kept: dict[str, list[int]]) -> dict[str, Any]:
    """PartialConfig's fields: secrets as the text set (their own problems are reported by
    the model), lists of sections as (index in the stack file, entry) of the entries that
    validated (none when the value is no list)."""
    view = {}
    for name, value in fields.items():
        field = StackConfig.model_fields[name]
        if field.alias in SECRET_KEYS:
            view[name] = _secret_text(values.get(field.alias), _is_map(field.annotation))
        elif get_origin(field.annotation) is list:
            value = value or []
            view[name] = list(zip(kept.get(name, range(len(value))), value))
        else:
            view[name] = value
    return view


def _secret_text(value: Any, is_map: bool) -> Any:
    if is_map:
        return {str(key): item for key, item in value.items() if isinstance(item, str)} \
            if isinstance(value, dict) else {}
    return str(value or "")


def _is_list(annotation: Any) -> bool:
    """list[...] or Optional[list[...]] (a list given for a section is not kept)."""
    return get_origin(annotation) is list or any(get_origin(arg) is list
                                                 for arg in get_args(annotation))


def _is_map(annotation: Any) -> bool:
    """dict[...] or Optional[dict[...]]."""
    return get_origin(annotation) is dict or any(get_origin(arg) is dict
                                                 for arg in get_args(annotation))
