"""ALFWorld game files: task ids, splits, task types, goals and expert walkthroughs.

A task id is the game's folder relative to `json_2.1.1/`: `<split>/<task-folder>/<trial>`, e.g.
`valid_seen/look_at_obj_in_light-AlarmClock-None-DeskLamp-323/trial_T20190909_044715_250790`. The task type is the
prefix of the task folder (ALFWorld's six types); the goal is the "Your task is to: ..." line of the game's grammar.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from scpo.data.alfworld_data import EXPECTED_COUNTS, DataError, read_game

__all__ = [
    "TASK_TYPES",
    "SPLITS",
    "DataError",
    "resolve_root",
    "list_tasks",
    "game_file",
    "task_type",
    "expert_actions",
    "goal_of",
    "load_game",
    "clear_game_cache",
]

# ALFWorld's task types (alfworld.agents.environment.alfred_tw_env.TASK_TYPES, ids 1..6).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
SPLITS = tuple(EXPECTED_COUNTS)
GAME_NAME = "game.tw-pddl"
_TASK_LINE = re.compile(r'"Your task is to: ([^"]*)"')


def resolve_root(data_root: str | Path = "data") -> Path:
    """The folder holding `json_2.1.1/`: accepts the project's data root (`data`) or the ALFWorld root
    (`data/alfworld`)."""
    root = Path(data_root)
    if (root / "json_2.1.1").is_dir():
        return root
    if (root / "alfworld" / "json_2.1.1").is_dir():
        return root / "alfworld"
    raise DataError(
        f"no ALFWorld games under {root} (looked for {root}/json_2.1.1 and {root}/alfworld/json_2.1.1); "
        "run `scpo prepare-data --only alfworld`"
    )


def list_tasks(split: str, data_root: str | Path = "data", limit: int | None = None) -> list[str]:
    """Sorted task ids of one split (`train`, `valid_seen`, `valid_unseen`, `valid_train`); `limit` keeps the first
    N."""
    if split not in SPLITS:
        raise ValueError(f"unknown ALFWorld split {split!r}; allowed: {', '.join(SPLITS)}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    base = resolve_root(data_root) / "json_2.1.1"
    ids = sorted(p.parent.relative_to(base).as_posix() for p in (base / split).glob(f"*/*/{GAME_NAME}"))
    return ids if limit is None else ids[:limit]


def game_file(task_id: str | Path, data_root: str | Path = "data") -> Path:
    """The game file of a task id; a path to a game file (or its folder) is returned as is."""
    path = Path(task_id)
    if path.name == GAME_NAME:
        return path
    if (path / GAME_NAME).is_file():
        return path / GAME_NAME
    return resolve_root(data_root) / "json_2.1.1" / path / GAME_NAME


def task_type(task_id: str | Path, data_root: str | Path = "data") -> str:
    """The task type from the task folder name, e.g. `pick_heat_then_place_in_recep-Apple-None-DiningTable-26` ->
    `pick_heat_then_place_in_recep`. Accepts a task id or a game-file path (`data_root` is not needed: the contract's
    signature)."""
    for part in reversed(Path(task_id).parts):
        prefix = part.split("-", 1)[0]
        if prefix in TASK_TYPES:
            return prefix
    raise ValueError(
        f"cannot tell the ALFWorld task type of {str(task_id)!r}; expected a folder named "
        f"<type>-<object>-... with <type> in {', '.join(TASK_TYPES)}"
    )


def cache_key(path: str | Path) -> tuple[str, int]:
    """(path, modification time in ns): the key under which a game file's parsed forms are cached, so an edited file is
    read again. A missing file raises DataError."""
    try:
        return str(path), Path(path).stat().st_mtime_ns
    except OSError:
        raise DataError(f"ALFWorld game file not found: {path}") from None


@lru_cache(maxsize=8192)
def _load_cached(path: str, mtime_ns: int) -> dict:
    return read_game(path)


def load_game(path: str | Path) -> dict:
    """The parsed game file (cached by path and modification time); a missing or corrupt file raises DataError."""
    return _load_cached(*cache_key(path))


def clear_game_cache() -> None:
    """Forget every parsed game file (the next `load_game` reads from disk)."""
    _load_cached.cache_clear()


def goal_of(game: dict) -> str:
    """The task sentence of a game ("put a clean apple in fridge."), read from its grammar."""
    match = _TASK_LINE.search(game["grammar"])
    if match is None:
        raise DataError("ALFWorld game grammar has no 'Your task is to: ...' line")
    return match.group(1)


def expert_actions(task_id: str | Path, data_root: str | Path = "data") -> list[str]:
    """The game's walkthrough: an expert command sequence that wins when played from reset."""
    return list(load_game(game_file(task_id, data_root))["walkthrough"])
