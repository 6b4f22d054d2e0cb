"""What the cross-key checks read: StackConfig as far as it validated. Nothing is declared
here twice: config/single_pass.py fills it from StackConfig's own fields in its one pass, so
a new field of StackConfig is here as soon as it is there. This module imports nothing of
the model, so every section module may take it for its rules without an import cycle."""

from collections.abc import Mapping
from typing import Any


class PartialConfig:
    """Every field of StackConfig by its Python name (`cfg.network`): its value, or None
    where it did not validate (text that did not keeps its text, so a rule can quote the
    layout as written). Secrets are their text ("" when unset); a map of secrets, its
    entries that are text. A list of sections (hosts, pools) is (index, entry) for each
    entry that validated."""

    def __init__(self, fields: Mapping[str, Any], given: frozenset[str],
                 incomplete: frozenset[str]):
        self._fields = dict(fields)
        self._given = given
        self._incomplete = incomplete

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_fields"][name]
        except KeyError:
            raise AttributeError(f"StackConfig has no field {name!r}") from None

    def given(self, key: str) -> bool:
        """Whether the stack sets the key (`aws`), valid or not."""
        return key in self._given

    def complete(self, name: str) -> bool:
        """Whether every entry of the list `name` (hosts, pools) validated and was looked
        at: rules about the whole list (one controller, pool names) wait for it."""
        return name not in self._incomplete
