"""`StrictModel`: the base of every config model (params.yaml sections, credit options, environment options)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)
