"""Rollouts of any trainer from a plain JSONL of steps: one JSON object per line, one line per step.

Schema (docs/import.md):

    required  group        str | int   the group the trajectory belongs to (the same task and start, sampled N times)
              trajectory   str | int   the trajectory, unique within its group
              step         int >= 0    t; a trajectory's steps are 0..T-1, each once (lines in any order)
              observation  str         what the agent saw before acting (the raw observation: GiGPO's anchor state)
              action       str         the action it took (as the environment read it)
              reward       number      the environment's reward for the step
              done         bool        the episode ended with this step (false on every step but the last)
              won          bool        the trajectory succeeded (the same on each of its steps)
    optional  iteration    int >= 0    the training iteration (default 0); the lines of an iteration are contiguous
              next_observation  str    what the step led to (default: the next step's observation, "" after the last)
              valid        bool        the answer was well formed and admissible (default true)
              response     str         the model's answer text (default "")
              prompt       str         the text the model saw (every line of an iteration or none)
              advantage    number      the advantage the trainer updated the step with (every line of an iteration
                                       or none; null: a step it did not train on): the explorer shows it beside
                                       every estimator's recomputation
              task_id, task_type, env  str   labels; env picks the environment's credit settings (alfworld, webshop)

Booleans are JSON true / false (0 and 1 are read as false / true); numbers must be finite. Fields outside the schema
are ignored, unless their name is close to one of the schema's (a typo: an error). Every missing or malformed field
is one `JsonlFormatError` line naming the file, the line and the field.

`read_iterations(path)` yields (iteration, RolloutBatch) one iteration at a time: memory holds one iteration's lines.
A file whose name ends in `.gz` (`steps.jsonl.gz`) is read through gzip as it streams.
"""

from __future__ import annotations

import difflib
import gzip
import json
import math
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from scpo.batch import RolloutBatch
from scpo.errors import ExpectedError

__all__ = ["JsonlFormatError", "REQUIRED", "OPTIONAL", "is_steps_file", "read_iterations", "steps_to_jsonl"]

REQUIRED = ("group", "trajectory", "step", "observation", "action", "reward", "done", "won")
OPTIONAL = (
    "iteration",
    "next_observation",
    "valid",
    "response",
    "prompt",
    "advantage",
    "task_id",
    "task_type",
    "env",
)
_ALL_OR_NONE = ("prompt", "advantage")


class JsonlFormatError(ExpectedError, ValueError):
    """A line of a steps JSONL that is not JSON, lacks a field or holds a malformed one."""


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _bool(value: Any) -> bool:
    return isinstance(value, bool) or (type(value) is int and value in (0, 1))


def _str(value: Any) -> bool:
    return isinstance(value, str)


# field -> (check, what it must be)
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "group": (_id, "a string or an integer"),
    "trajectory": (_id, "a string or an integer"),
    "step": (_int, "an integer >= 0"),
    "iteration": (_int, "an integer >= 0"),
    "observation": (_str, "a string"),
    "next_observation": (_str, "a string"),
    "action": (_str, "a string"),
    "response": (_str, "a string"),
    "prompt": (_str, "a string"),
    "task_id": (_str, "a string"),
    "task_type": (_str, "a string"),
    "env": (_str, "a string"),
    "reward": (_number, "a finite number"),
    "advantage": (lambda v: v is None or _number(v), "a finite number or null"),
    "done": (_bool, "true or false"),
    "won": (_bool, "true or false"),
    "valid": (_bool, "true or false"),
}
_KNOWN = frozenset(_CHECKS)
_MISSING = object()  # a field the line does not have


class _Iteration:
    """The lines of one iteration, column by column (their line numbers kept for the messages)."""

    def __init__(self, iteration: int, first_line: int) -> None:
        self.iteration, self.first_line = iteration, first_line
        self.lines: list[int] = []
        self.cols: dict[str, list] = {k: [] for k in _KNOWN if k != "iteration"}
        self.given: dict[str, int] = {}  # optional all-or-none field -> a line that has it

    def add(self, n: int, row: dict) -> None:
        self.lines.append(n)
        for k, col in self.cols.items():
            col.append(row.get(k, _MISSING))


def _parse(line: str, n: int, path: Path) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise JsonlFormatError(f"{path}, line {n}: not JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(row, dict):
        raise JsonlFormatError(f"{path}, line {n}: expected a JSON object of step fields, got {_kind(row)}")
    for k in REQUIRED:
        if k not in row:
            raise JsonlFormatError(f"{path}, line {n}: missing field {k!r} (required: {', '.join(REQUIRED)})")
    for k, v in row.items():
        check = _CHECKS.get(k)
        if check is None:
            close = difflib.get_close_matches(k, _KNOWN, n=1, cutoff=0.8)
            if close:
                raise JsonlFormatError(f"{path}, line {n}: unknown field {k!r}; did you mean {close[0]!r}?")
            continue
        if not check[0](v):
            what = "null" if v is None else f"{_shown(v)} ({_kind(v)})"
            raise JsonlFormatError(f"{path}, line {n}: field {k!r} is {what}; expected {check[1]}")
    return row


def read_iterations(
    path: str | Path, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, RolloutBatch]]:
    """(iteration, batch) for each iteration of the steps JSONL at `path` (gzip-compressed when its name ends in
    .gz), in file order, one at a time. `progress` is called with the bytes of the file read since its last call (of
    the compressed file for a .gz: they add up to the file's size)."""
    path = Path(path)
    current: _Iteration | None = None
    seen: dict[int, int] = {}  # iteration -> its first line
    for n, raw in _lines(path, progress):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise JsonlFormatError(f"{path}, line {n}: not UTF-8 text (byte {err.start + 1})") from None
        if not line.strip():
            continue
        row = _parse(line, n, path)
        it = row.get("iteration", 0)
        if current is None or it != current.iteration:
            if it in seen:
                raise JsonlFormatError(
                    f"{path}, line {n}: field 'iteration' is {it} again, after iteration {current.iteration} "
                    f"began on line {current.first_line}; the lines of an iteration must be contiguous"
                )
            if current is not None:
                yield current.iteration, _build(current, path)
            current = _Iteration(it, n)
            seen[it] = n
        for k in _ALL_OR_NONE:
            if k in row:
                current.given.setdefault(k, n)
        current.add(n, row)
    if current is None:
        raise JsonlFormatError(f"{path}: no steps (the file is empty)")
    yield current.iteration, _build(current, path)


def is_steps_file(path: Path) -> bool:
    """Whether `path` names a steps JSONL: `*.jsonl`, or `*.jsonl.gz` compressed."""
    return path.name.endswith((".jsonl", ".jsonl.gz"))


def _lines(path: Path, progress: Callable[[int], None] | None) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of `path`, decompressed on the fly for a .gz; `progress` gets the file's bytes read."""
    with path.open("rb") as raw:
        fh = gzip.GzipFile(fileobj=raw, mode="rb") if path.name.endswith(".gz") else raw
        done = 0
        n = 0
        try:
            for n, line in enumerate(fh, start=1):
                if progress is not None:
                    at = raw.tell()
                    progress(at - done)
                    done = at
                yield n, line
        except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
            what = str(err) or type(err).__name__
            raise JsonlFormatError(f"{path}: not a readable gzip file after line {n} ({what})") from None


def _build(it: _Iteration, path: Path) -> RolloutBatch:
    """The iteration's batch, after the checks that span lines (steps, won, done, all-or-none fields)."""
    lines = np.asarray(it.lines)
    c = it.cols
    for k, line_with in it.given.items():
        lacking = [ln for ln, v in zip(it.lines, c[k]) if v is _MISSING]
        if lacking:
            raise JsonlFormatError(
                f"{path}, line {lacking[0]}: missing field {k!r}, which line {line_with} of iteration {it.iteration} "
                f"has (give it on every line of an iteration or on none)"
            )
    key = [(g, t) for g, t in zip(c["group"], c["trajectory"])]
    traj_of: dict[tuple, int] = {}
    traj = np.asarray([traj_of.setdefault(k, len(traj_of)) for k in key], dtype=np.int64)
    step = np.asarray(c["step"], dtype=np.int64)
    order = np.lexsort((step, traj))
    traj_s, step_s, lines_s = traj[order], step[order], lines[order]
    starts = np.r_[True, traj_s[1:] != traj_s[:-1]]
    expected = np.arange(len(order)) - np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))
    wrong = np.flatnonzero(step_s != expected)
    if len(wrong):
        i = wrong[0]
        g, t = key[order[i]]
        if i > 0 and not starts[i] and step_s[i] == step_s[i - 1]:
            raise JsonlFormatError(
                f"{path}, line {lines_s[i]}: field 'step' is {step_s[i]} again for trajectory {t!r} of group "
                f"{g!r} (also on line {lines_s[i - 1]})"
            )
        raise JsonlFormatError(
            f"{path}, line {lines_s[i]}: field 'step' is {step_s[i]}, but trajectory {t!r} of group {g!r} has no "
            f"step {expected[i]} (a trajectory's steps are 0..T-1)"
        )
    first = np.flatnonzero(starts)
    first_of = first[np.cumsum(starts) - 1]
    won = np.asarray(c["won"], dtype=bool)[order]
    bad = np.flatnonzero(won != won[first_of])
    if len(bad):
        i = bad[0]
        g, t = key[order[i]]
        raise JsonlFormatError(
            f"{path}, line {lines_s[i]}: field 'won' is {_shown(bool(won[i]))}, but {_shown(bool(won[first_of[i]]))} "
            f"on line {lines_s[first_of[i]]} of the same trajectory ({t!r} of group {g!r})"
        )
    done = np.asarray(c["done"], dtype=bool)[order]
    last = np.r_[starts[1:], True]  # the last step of each trajectory
    early = np.flatnonzero(done & ~last)
    if len(early):
        i = early[0]
        g, t = key[order[i]]
        raise JsonlFormatError(
            f"{path}, line {lines_s[i]}: field 'done' is true on step {step_s[i]} of trajectory {t!r} of group "
            f"{g!r}, which goes on to later steps"
        )

    def col(name: str, default: Any) -> list:
        return [default if v is _MISSING or v is None else v for v in (c[name][i] for i in order)]

    obs = col("observation", "")
    given_next = col("next_observation", None)
    following = [obs[i + 1] if not last[i] else "" for i in range(len(order))]
    groups: dict[Any, int] = {}
    cols: dict[str, Any] = {
        "group_id": [groups.setdefault(c["group"][i], len(groups)) for i in order],
        "traj_id": traj_s,
        "step": step_s,
        "reward": np.asarray(col("reward", 0.0), dtype=np.float64),
        "done": done,
        "won": won,
        "valid": np.asarray(col("valid", True), dtype=bool),
        "observation": obs,
        "next_observation": [f if g is None else g for g, f in zip(given_next, following)],
        "action": col("action", ""),
        "response": col("response", ""),
        "group_uid": [str(c["group"][i]) for i in order],
        "traj_uid": [f"{c['group'][i]}/{c['trajectory'][i]}" for i in order],
        "task_id": col("task_id", ""),
        "task_type": col("task_type", ""),
        "env_name": col("env", ""),
    }
    if "prompt" in it.given:
        cols["prompt"] = col("prompt", "")
    if "advantage" in it.given:
        cols["trained_advantage"] = np.asarray(col("advantage", np.nan), dtype=np.float64)
    return RolloutBatch.from_columns(**cols)


def steps_to_jsonl(batch: RolloutBatch, fh, iteration: int = 0) -> int:
    """Write `batch` as lines of the steps schema to the open text file `fh` (group = group_uid, trajectory =
    traj_uid, advantage = trained_advantage when the batch has it); returns the number of lines."""
    adv = batch.trained_advantage
    for r in range(batch.n_rows):
        row: dict[str, Any] = {
            "iteration": iteration,
            "group": str(batch.group_uid[r]),
            "trajectory": str(batch.traj_uid[r]),
            "step": int(batch.step[r]),
            "observation": str(batch.observation[r]),
            "action": str(batch.action[r]),
            "reward": float(batch.reward[r]),
            "done": bool(batch.done[r]),
            "won": bool(batch.won[r]),
            "next_observation": str(batch.next_observation[r]),
            "valid": bool(batch.valid[r]),
            "response": str(batch.response[r]),
            "task_id": str(batch.task_id[r]),
            "task_type": str(batch.task_type[r]),
            "env": str(batch.env_name[r]),
        }
        if batch.prompt is not None:
            row["prompt"] = str(batch.prompt[r])
        if adv is not None:
            row["advantage"] = float(adv[r]) if np.isfinite(adv[r]) else None
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return batch.n_rows
