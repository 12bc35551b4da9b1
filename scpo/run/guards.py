"""A run folder's guards: nothing in it replaced unless asked for.

Modes of a training command on `<run>` (decided by `scpo.run.plan`):
- fresh (default): `<run>` must be absent or empty; a folder holding anything is refused in one line saying what it
  holds and the two ways on (`--resume`, `--overwrite`);
- overwrite: the run's own entries (`RUN_ENTRIES`: provenance.json, checkpoints/, model/, ...) are removed, but only
  after every check of the new run passed (config, data, model) and the lock is held; a folder that holds anything
  else (a notes file, another run, a `.git`), is the current directory or holds it, or holds `data.root`, is refused
  in one line with nothing removed (`scpo.pipeline.safe_replace`);
- resume: a restorable checkpoint whose recorded config matches (the plan checks it).

A run folder is never created inside another run folder (whose `--overwrite` would then remove it), and `--out`
naming a file is one line too. One writer at a time: `scpo.pipeline.folder_lock.RunLock`.
"""

from __future__ import annotations

from pathlib import Path

from scpo.errors import RunFolderError
from scpo.pipeline.folder_lock import LOCK_FILE
from scpo.pipeline.safe_replace import check_replaceable, enclosing_run, remove_own_entries
from scpo.run.checkpoint import finished_checkpoints

__all__ = [
    "RUN_ENTRIES",
    "folder_contents",
    "check_fresh",
    "check_out_folder",
    "check_overwritable",
    "clear_run_folder",
    "describe_run",
]

# what a training run writes into its folder (scpo.train.run, trainer, sft; `scpo eval`'s default --out is eval/)
RUN_ENTRIES = frozenset(
    {
        LOCK_FILE,
        "provenance.json",
        "summary.json",
        "manifest.json",
        "history.csv",
        "dvclive",
        "checkpoints",
        "rollouts",
        "model",
        "critic",
        "init_model",
        "eval",
        "evals",
    }
)


def _run_entry(name: str) -> bool:
    return name in RUN_ENTRIES


def folder_contents(run_dir: Path) -> list[str]:
    """Names in `run_dir` (the lock file left out); [] when it does not exist."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    return sorted(p.name for p in run_dir.iterdir() if p.name != LOCK_FILE)


def describe_run(run_dir: Path) -> str:
    """What a non-empty run folder holds, in a few words: a finished run, or an unfinished one and its checkpoints."""
    run_dir = Path(run_dir)
    names = folder_contents(run_dir)
    ckpts = (
        sorted(p.name for p in (run_dir / "checkpoints").glob("iter_*") if (p / "state.json").exists())
        if (run_dir / "checkpoints").is_dir()
        else []
    )
    if "summary.json" in names:
        what = "a finished run (summary.json)"
    elif ckpts:
        what = f"an unfinished run (checkpoints up to {ckpts[-1]})"
    elif "provenance.json" in names:
        what = "a run stopped before its first checkpoint (nothing to resume)"
    else:
        what = "files"
    shown = ", ".join(n + ("/" if (run_dir / n).is_dir() else "") for n in names[:5])
    return f"{what}: {shown}{', ...' if len(names) > 5 else ''}"


def check_fresh(run_dir: Path, resumable: bool = True) -> None:
    """RunFolderError unless `run_dir` is absent or empty (a fresh run never writes into another run's folder). The
    ways out it names are ones that work: --resume only when the folder has a checkpoint to resume from (a run stopped
    before its first checkpoint has none)."""
    if folder_contents(run_dir):
        resumable = resumable and finished_checkpoints(run_dir) != []
        ways = "continue it with --resume, replace it with --overwrite" if resumable else "replace it with --overwrite"
        raise RunFolderError(
            f"run folder {run_dir} is not empty, it holds {describe_run(run_dir)}; {ways}, or choose another --out"
        )


def check_out_folder(run_dir: Path) -> None:
    """RunFolderError when `run_dir` is a file, or lies inside another run folder (whose `--overwrite` would remove
    it)."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"--out {run_dir} is a file, not a folder; choose a folder for the run")
    outer = enclosing_run(run_dir)
    if outer is not None:
        raise RunFolderError(
            f"--out {run_dir} is inside the run folder {outer} (replacing that run would remove this one); "
            "choose a folder outside it"
        )


def check_overwritable(run_dir: Path, protected: dict[str, str | Path | None] | None = None) -> None:
    """`scpo.pipeline.safe_replace.check_replaceable` for a run folder: ReplaceError (one line, nothing removed)
    unless `run_dir` holds only a run's own entries (`RUN_ENTRIES`) and none of `protected`."""
    check_replaceable(run_dir, _run_entry, "run", protected)


def clear_run_folder(run_dir: Path, protected: dict[str, str | Path | None] | None = None) -> list[str]:
    """Remove a run's own entries from `run_dir` but the lock file (`--overwrite`, called with the lock held), after
    `check_overwritable` passed again; return the names removed."""
    check_overwritable(run_dir, protected)
    return remove_own_entries(run_dir, _run_entry, keep=(LOCK_FILE,))
