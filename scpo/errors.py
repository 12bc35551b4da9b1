"""`ExpectedError`: the base of every error an everyday mistake raises (a config value, missing data, a run folder in
use, a checkpoint that cannot be restored, a model that is not there). Its message is one line that names the bad value
or path and what to do; the `scpo` command prints only that line (`scpo --debug ...` shows the traceback).

Each module keeps its own error type (`ConfigError`, `DataError`, `CheckpointError`, ...) deriving from this one, so a
caller can catch them all at once without importing every module.
"""

from __future__ import annotations

__all__ = ["ExpectedError", "DataError", "RunFolderError", "ModelNotFoundError", "PlacementError", "one_line"]


class ExpectedError(Exception):
    """An everyday mistake, reported in one line (no traceback unless asked for)."""


class DataError(ExpectedError, RuntimeError):
    """Missing, incomplete or corrupt data; the message (one line) says where we looked and what to run."""


class RunFolderError(ExpectedError, RuntimeError):
    """A run folder that may not be written now: not empty, in use by another process, or lacking what `--resume`
    needs."""


class ModelNotFoundError(ExpectedError, FileNotFoundError):
    """A policy model (`policy.profile`, `train.init_from`, an evaluated checkpoint) that is not on this machine."""


class PlacementError(ExpectedError, RuntimeError):
    """Runs that would share a GPU (two trainers with their generation engines on one device)."""


def one_line(err: BaseException, limit: int = 400) -> str:
    """The first non-empty line of `err`'s message (its type name if it has none), cut to `limit` characters."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
