"""Finding and loading the rollouts a training run saved (`rollouts/iter_XXXX.parquet`, RolloutBatch.to_parquet).

A path with no rollouts, a file that is not one, an iteration or a group that is not saved: each raises an error of
one line naming the path and what is there (`NoRollouts`, a FileNotFoundError; `RolloutChoiceError`, a ValueError),
which the `scpo` command prints as such."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scpo.batch import RolloutBatch
from scpo.errors import ExpectedError

__all__ = [
    "NoRollouts",
    "RolloutChoiceError",
    "iteration_files",
    "iteration_of",
    "load_rollouts",
    "mixed_groups",
    "pick_group",
    "RolloutView",
    "choose_view",
]

_ITER = re.compile(r"iter_(\d+)\.(parquet|jsonl)$")


class NoRollouts(ExpectedError, FileNotFoundError):
    """A path that holds no saved rollouts."""


class RolloutChoiceError(ExpectedError, ValueError):
    """A rollout file that cannot be read, or an iteration / group that is not saved."""


def iteration_of(path: str | Path) -> int:
    """4 for '.../iter_0004.parquet'; ValueError naming the file otherwise."""
    match = _ITER.search(Path(path).name)
    if not match:
        raise RolloutChoiceError(f"{path} is not a saved rollout file named iter_XXXX.parquet / .jsonl")
    return int(match.group(1))


def iteration_files(folder: str | Path) -> list[Path]:
    """The iter_XXXX files of a run's rollouts/ folder (or of a run folder holding rollouts/), by iteration."""
    folder = Path(folder)
    if (folder / "rollouts").is_dir():
        folder = folder / "rollouts"
    if not folder.is_dir():
        raise NoRollouts(f"no rollouts folder at {folder}")
    files = sorted((p for p in folder.iterdir() if _ITER.search(p.name)), key=iteration_of)
    if not files:
        raise NoRollouts(f"{folder} holds no iter_XXXX.parquet rollout files")
    return files


def _read(file: Path) -> RolloutBatch:
    try:
        return RolloutBatch.read(file)
    except ExpectedError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise RolloutChoiceError(f"{file} is not a readable rollout file ({first})") from None


def load_rollouts(path: str | Path) -> tuple[RolloutBatch, Path]:
    """(batch, file): `path` is a rollout file, or a run/rollouts folder (then its latest iteration)."""
    path = Path(path)
    if not path.exists():
        raise NoRollouts(f"no rollout file or folder at {path}")
    file = iteration_files(path)[-1] if path.is_dir() else path
    return _read(file), file


def mixed_groups(batch: RolloutBatch) -> np.ndarray:
    """Group ids with at least one won and at least one lost trajectory (the groups SCPO shapes), ascending."""
    groups = np.unique(batch.group_id)
    won_any = np.zeros(groups.max() + 1, dtype=bool)
    lost_any = np.zeros(groups.max() + 1, dtype=bool)
    np.logical_or.at(won_any, batch.group_id, batch.won)
    np.logical_or.at(lost_any, batch.group_id, ~batch.won)
    return groups[(won_any & lost_any)[groups]]


def pick_group(batch: RolloutBatch) -> int:
    """The most informative group to draw: a mixed group (won and lost siblings) if any, preferring the one with the
    most steps; otherwise the group with the most steps. Deterministic (ties -> smallest id)."""
    sizes = np.bincount(batch.group_id)
    mixed = mixed_groups(batch)
    candidates = mixed if len(mixed) else np.flatnonzero(sizes)
    return int(candidates[np.argmax(sizes[candidates])])


@dataclass
class RolloutView:
    """The saved rollouts an analysis draws: every saved iteration of `source`, the chosen one and its group."""

    source: Path
    batches: dict[int, RolloutBatch]
    iteration: int
    group: int

    @property
    def batch(self) -> RolloutBatch:
        return self.batches[self.iteration]


def choose_view(source: str | Path, iteration: int = -1, group: int = -1) -> RolloutView:
    """`source` (a rollout file, or a run / rollouts folder) with the iteration and group to draw: `iteration` -1 is the
    latest saved iteration holding a mixed group (won and lost siblings), else the latest; `group` -1 is `pick_group`
    of that iteration. The credit maps of notebook 04 and of `scpo credit-map` both choose through this."""
    source = Path(source)
    files = [source] if source.is_file() else iteration_files(source)
    batches = {iteration_of(f): _read(f) for f in files}
    if iteration >= 0:
        if iteration not in batches:
            raise RolloutChoiceError(f"iteration {iteration} is not saved under {source}; saved: {sorted(batches)}")
        chosen = iteration
    else:
        chosen = max((i for i, b in batches.items() if len(mixed_groups(b))), default=max(batches))
    batch = batches[chosen]
    chosen_group = pick_group(batch) if group < 0 else int(group)
    if chosen_group not in set(batch.group_id.tolist()):
        raise RolloutChoiceError(
            f"group {group} is not in iteration {chosen} of {source}; groups: 0..{batch.group_id.max()}"
        )
    return RolloutView(source, batches, chosen, chosen_group)
