"""`StrictModel`: the base of every config model (params.yaml sections, credit options, environment options)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, assignments are validated, and a float must be finite
    (`inf`, `nan`, YAML's `.inf` / `.nan` are errors naming the key: no setting of the project means anything at
    infinity)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False, allow_inf_nan=False)
