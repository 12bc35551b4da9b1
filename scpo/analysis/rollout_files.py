"""Finding and loading the rollouts a training run saved (`rollouts/iter_XXXX.parquet`, RolloutBatch.to_parquet)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from scpo.rollout_types import RolloutBatch

__all__ = ["iteration_files", "iteration_of", "load_rollouts", "mixed_groups", "pick_group"]

_ITER = re.compile(r"iter_(\d+)\.(parquet|jsonl)$")


def iteration_of(path: str | Path) -> int:
    """4 for '.../iter_0004.parquet'; ValueError naming the file otherwise."""
    match = _ITER.search(Path(path).name)
    if not match:
        raise ValueError(f"{path} is not a saved rollout file named iter_XXXX.parquet / .jsonl")
    return int(match.group(1))


def iteration_files(folder: str | Path) -> list[Path]:
    """The iter_XXXX files of a run's rollouts/ folder (or of a run folder holding rollouts/), by iteration."""
    folder = Path(folder)
    if (folder / "rollouts").is_dir():
        folder = folder / "rollouts"
    if not folder.is_dir():
        raise FileNotFoundError(f"no rollouts folder at {folder}")
    files = sorted((p for p in folder.iterdir() if _ITER.search(p.name)), key=iteration_of)
    if not files:
        raise FileNotFoundError(f"{folder} holds no iter_XXXX.parquet rollout files")
    return files


def load_rollouts(path: str | Path) -> tuple[RolloutBatch, Path]:
    """(batch, file): `path` is a rollout file, or a run/rollouts folder (then its latest iteration)."""
    path = Path(path)
    file = iteration_files(path)[-1] if path.is_dir() else path
    return RolloutBatch.read(file), file


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
