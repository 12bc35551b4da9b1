"""`StrictModel`: the base of every config model (params.yaml sections, credit options, environment options)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

__all__ = ["StrictModel"]


def _admits_bool(annotation: Any) -> bool:
    """Whether a field of type `annotation` may hold a bool (bool itself, Any, a Literal of one, a union with one)."""
    if annotation is bool or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return any(isinstance(arg, bool) for arg in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_admits_bool(arg) for arg in typing.get_args(annotation))
    return False


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, assignments are validated, a float must be finite
    (`inf`, `nan`, YAML's `.inf` / `.nan` are errors naming the key: no setting of the project means anything at
    infinity), and a boolean is no number (pydantic reads `true` as 1 where an int is expected: `--set
    train.iterations=true` would train one iteration)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and not _admits_bool(field.annotation):
            raise ValueError("a boolean, not a value of this setting (a number, a name or a list)")
        return value
