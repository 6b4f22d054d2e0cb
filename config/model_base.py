"""The base of every config section: camelCase keys in the stack file, nothing unknown."""

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Section(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )
