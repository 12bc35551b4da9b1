"""What `--overwrite` may remove: only the entries a command itself writes into its folder (a run folder's, a sweep
folder's), and only from a folder that holds nothing else.

    check_replaceable(folder, own, "run folder", protected={"data.root": cfg.data.root})
    remove_own_entries(folder, own)

`check_replaceable` raises `ReplaceError` (one line, nothing removed) when `folder`
- is not a folder (a file);
- is the current directory or holds it (removing it would pull the ground from under the shell);
- is or holds a protected path (`data.root`, the scpo code, the model a run starts from, ...);
- holds a `.git` (a repository);
- holds anything `own(name)` does not claim: a notes file, a folder of the user's, another run (a folder holding a
  `provenance.json`), each named in the message.
`remove_own_entries` then removes the claimed entries and nothing else. Paths are compared resolved (symlinks
followed), so `--out .` and `--out ../repo` are the same folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from scpo.errors import ExpectedError

__all__ = ["ReplaceError", "check_replaceable", "remove_own_entries", "enclosing_run", "is_temporary"]

RUN_RECORD = "provenance.json"  # every run folder holds one (scpo.run.provenance)


class ReplaceError(ExpectedError, RuntimeError):
    """A folder `--overwrite` must not replace; the message names it and what it holds."""


def is_temporary(name: str) -> bool:
    """A file written under a temporary name and renamed into place (`.<name>.<...>.tmp`), left by a killed process."""
    return name.startswith(".") and name.endswith(".tmp")


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _shown(name: str, folder: Path) -> str:
    path = folder / name
    if path.is_dir() and not path.is_symlink():
        return f"{name}/ (a run)" if (path / RUN_RECORD).exists() else f"{name}/"
    return name


def check_replaceable(
    folder: Path, own: Callable[[str], bool], what: str, protected: Mapping[str, str | Path | None] | None = None
) -> None:
    """ReplaceError unless every entry of `folder` is one `own` claims and `folder` is none of the places a command
    must never remove (module docstring). An absent folder passes."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return
    if not folder.is_dir():
        raise ReplaceError(f"--overwrite refused: {folder} is a file, not a {what}; nothing removed")
    real = folder.resolve()
    cwd = Path.cwd().resolve()
    refuse = f"--overwrite refused: {folder} "
    keep = "; nothing removed, choose another --out"
    if _inside(cwd, real):
        where = "is the current directory" if real == cwd else f"holds the current directory {cwd}"
        raise ReplaceError(f"{refuse}{where}{keep}")
    for name, path in (protected or {}).items():
        if path and _inside(Path(path).expanduser().resolve(), real):
            raise ReplaceError(f"{refuse}holds {name}={path}{keep}")
    names = sorted(os.listdir(folder))
    if ".git" in names:
        raise ReplaceError(f"{refuse}holds a .git (a repository){keep}")
    foreign = [n for n in names if not own(n) and not is_temporary(n)]
    if foreign:
        shown = ", ".join(_shown(n, folder) for n in foreign[:6]) + (", ..." if len(foreign) > 6 else "")
        raise ReplaceError(
            f"{refuse}holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} that no {what} writes "
            f"({shown}){keep}, or move them away"
        )


def remove_own_entries(folder: Path, own: Callable[[str], bool], keep: tuple[str, ...] = ()) -> list[str]:
    """Remove the entries of `folder` that `own` claims (and temporary files), except `keep`; return their names.
    Call `check_replaceable` first: whatever it did not see is left alone here too."""
    folder = Path(folder)
    removed = []
    for name in sorted(os.listdir(folder)) if folder.is_dir() else []:
        if name in keep or not (own(name) or is_temporary(name)):
            continue
        path = folder / name
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        removed.append(name)
    return removed


def enclosing_run(folder: Path) -> Path | None:
    """The nearest folder strictly above `folder` that is a run folder (holds a provenance.json), or None."""
    for parent in Path(folder).expanduser().resolve().parents:
        if (parent / RUN_RECORD).is_file():
            return parent
    return None
