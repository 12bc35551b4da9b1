"""`ExpectedError`: the base of every error an everyday mistake raises (a config value, missing data, a run folder in
use, a checkpoint that cannot be restored, a model that is not there). Its message is one line that names the bad value
or path and what to do; the `scpo` command prints only that line (`scpo --debug ...` shows the traceback).

Each module keeps its own error type (`ConfigError`, `DataError`, `CheckpointError`, ...) deriving from this one, so a
caller can catch them all at once without importing every module. In a notebook (Jupyter, Papermill) an ExpectedError
shows as its one line too (IPython's `_render_traceback_` hook).

A full disk or a folder that cannot be written is not a bug either: `disk_full` recognises the first (an OSError with
ENOSPC / EDQUOT, or a library's error that wraps one, such as safetensors' `SafetensorError`), and `write_problem` turns
either into the line to show.
"""

from __future__ import annotations

import errno
import os

__all__ = [
    "ExpectedError",
    "DataError",
    "RunFolderError",
    "ModelNotFoundError",
    "PlacementError",
    "MachineError",
    "one_line",
    "disk_full",
    "write_problem",
]


class ExpectedError(Exception):
    """An everyday mistake, reported in one line (no traceback unless asked for)."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for this error in a notebook: its one line, without the traceback."""
        return [f"{type(self).__name__}: {one_line(self, limit=2000)}"]


class DataError(ExpectedError, RuntimeError):
    """Missing, incomplete or corrupt data; the message (one line) says where we looked and what to run."""


class RunFolderError(ExpectedError, RuntimeError):
    """A run folder that may not be written now: not empty, in use by another process, or lacking what `--resume`
    needs."""


class ModelNotFoundError(ExpectedError, FileNotFoundError):
    """A policy model (`policy.profile`, `train.init_from`, an evaluated checkpoint) that is not on this machine."""


class MachineError(ExpectedError, ValueError):
    """A setting this machine cannot honour: a GPU it does not have (`train.device=cuda`, the gpu profile), an engine
    that is not installed (`rollout.engine=vllm`)."""


class PlacementError(ExpectedError, RuntimeError):
    """Runs that would share a GPU (two trainers with their generation engines on one device)."""


def one_line(err: BaseException, limit: int = 400) -> str:
    """The first non-empty line of `err`'s message (its type name if it has none), cut to `limit` characters."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    text = lines[0] if lines else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


_FULL = (errno.ENOSPC, errno.EDQUOT)
_DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)
# how libraries that wrap the OS error in their own type spell ENOSPC (safetensors: `IoError(Os { code: 28, ... })`)
_FULL_TEXT = ("No space left on device", "Disk quota exceeded", "code: 28,", "StorageFull")


def disk_full(err: BaseException) -> bool:
    """Whether `err` (or an error it was raised from) means the disk or the quota is full."""
    seen = 0
    while err is not None and seen < 5:
        if isinstance(err, OSError) and err.errno in _FULL:
            return True
        if any(text in str(err) for text in _FULL_TEXT):
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


def write_problem(err: BaseException, where: str | os.PathLike) -> str | None:
    """'no space left writing X' (a full disk) or 'cannot write X: <reason>' (permission denied, read-only file
    system, a file where a folder belongs) for an error raised while writing; X is the file the error names, else
    `where`. None for any other error."""
    path = getattr(err, "filename", None) or where
    if disk_full(err):
        return f"no space left writing {path}"
    if isinstance(err, OSError) and err.errno in (*_DENIED, errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        return f"cannot write {path}: {err.strerror or type(err).__name__}"
    return None
