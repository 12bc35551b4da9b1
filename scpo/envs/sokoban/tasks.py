"""Sokoban's tasks: a task id names a room size, a number of boxes and the seed of its room
(`sokoban-6x6-1box-00042`), and the splits are fixed ranges of seeds.

| split          | rooms                                    | seeds            |
|----------------|------------------------------------------|------------------|
| `train`        | 6x6, 1 box (verl-agent's default)        | 0 .. 299         |
| `valid_seen`   | the first 50 rooms of `train`            | 0 .. 49          |
| `valid_unseen` | 6x6, 1 box                               | 65536 .. 65585   |
| `train_hard`   | 6x6, 2 boxes                             | 0 .. 299         |
| `valid_hard`   | 6x6, 2 boxes                             | 65536 .. 65585   |

verl-agent draws training seeds from [0, 2**16 - 1) and validation seeds from [2**16, 2**32); the unseen splits start
at 2**16 likewise. The room of a task is `generation.generate(seed, ...)`, the room verl-agent's reset(seed) makes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from scpo.envs.sokoban.generation import generate
from scpo.envs.sokoban.room import State

__all__ = ["SPLITS", "SPLIT_NAMES", "SplitSpec", "task_id", "parse_task_id", "list_tasks", "task_type", "initial_state"]


@dataclass(frozen=True)
class SplitSpec:
    height: int
    width: int
    boxes: int
    seeds: range


SPLITS = {
    "train": SplitSpec(6, 6, 1, range(0, 300)),
    "valid_seen": SplitSpec(6, 6, 1, range(0, 50)),
    "valid_unseen": SplitSpec(6, 6, 1, range(65536, 65586)),
    "train_hard": SplitSpec(6, 6, 2, range(0, 300)),
    "valid_hard": SplitSpec(6, 6, 2, range(65536, 65586)),
}
SPLIT_NAMES = tuple(SPLITS)
_TASK_ID = re.compile(r"sokoban-(\d+)x(\d+)-(\d+)box-(\d+)")


def task_id(height: int, width: int, boxes: int, seed: int) -> str:
    return f"sokoban-{height}x{width}-{boxes}box-{seed:05d}"


def parse_task_id(task: str) -> tuple[int, int, int, int]:
    """(height, width, boxes, seed) of a task id; ValueError naming it when it is not one."""
    m = _TASK_ID.fullmatch(str(task))
    if not m:
        raise ValueError(f"not a Sokoban task id: {task!r} (expected sokoban-<rows>x<cols>-<n>box-<seed>)")
    height, width, boxes, seed = map(int, m.groups())
    if min(height, width) < 3 or boxes < 1 or seed >= 2**32:
        raise ValueError(f"not a Sokoban task id: {task!r} (rooms are at least 3x3, with 1+ boxes, seed < 2**32)")
    return height, width, boxes, seed


def list_tasks(split: str, data_root: str | Path = "data", limit: int | None = None) -> list[str]:
    """Task ids of `split`, sorted (in seed order); the first `limit` when given. Sokoban needs no data."""
    if split not in SPLITS:
        raise ValueError(f"unknown Sokoban split {split!r}; allowed: {', '.join(SPLITS)}")
    s = SPLITS[split]
    tasks = sorted(task_id(s.height, s.width, s.boxes, seed) for seed in s.seeds)
    return tasks[:limit] if limit else tasks


def task_type(task: str, data_root: str | Path = "data") -> str:
    """`1box`, `2box`, ...: results are reported per number of boxes."""
    return f"{parse_task_id(task)[2]}box"


@lru_cache(maxsize=4096)
def initial_state(task: str) -> State:
    """The state of task `task` at reset: its generated room (cached per task id)."""
    height, width, boxes, seed = parse_task_id(task)
    return generate(seed, height, width, boxes)
