"""Checkpoints: `checkpoints/iter_XXXX/` = `model/` (safetensors + tokenizer), `optimizer.safetensors`,
`rng.safetensors`, copies of run files the trainer asks for (history.csv as of this checkpoint) and a small
`state.json` (iterations done, the run's provenance, and the size of every file), written last. A checkpoint is
written under a temporary name and renamed, so a SIGKILL never leaves a half checkpoint; `latest_checkpoint` ignores
anything unfinished. A write that fails (a full disk) removes its temporary folder; a full disk raises an OSError with
ENOSPC naming the checkpoint, whatever library wrapped it. Only the newest `train.keep_checkpoints` are kept
(`prune_checkpoints`; the run's final `model/` lives outside `checkpoints/`); a checkpoint holding a file its state.json
does not list (something else wrote it there: an evaluation, a note) is kept, with one line saying so.

A checkpoint damaged later (a truncated file, a copy cut short) is found by `checkpoint_problem` (file sizes against
state.json, every safetensors header, both state files), which names the file; `restorable_checkpoint` then falls back
to the newest complete checkpoint, saying so, or fails in one line.

Nothing in a checkpoint is unpickled: a run folder passed around must not be able to run code. The optimizer and RNG
states are "state files": one safetensors file whose tensors are the state's tensors and whose metadata entry
`scpo.state/1` is JSON for the rest, with each tensor replaced by {"tensor": name}, each tuple by {"tuple": [...]} and
each dict by {"dict": [[key, value], ...]} (optimizer states are keyed by int parameter indices). Written by hand
because neither format holds a `state_dict()` alone (safetensors is a flat str -> tensor map; JSON has no tensors,
tuples or int keys); reading parses only JSON and safetensors, so a crafted file can fail to load but never execute
anything.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from tqdm import tqdm

from scpo.errors import ExpectedError, disk_full
from scpo.pipeline.folder_lock import LOCK_FILE
from scpo.policy.completeness import tensor_names_problem

__all__ = [
    "CheckpointError",
    "TrainingState",
    "save_checkpoint",
    "latest_checkpoint",
    "read_training_state",
    "write_training_state",
    "write_state_file",
    "read_state_file",
    "rng_state",
    "set_rng_state",
    "OPTIMIZER_FILE",
    "RNG_FILE",
    "checkpoint_problem",
    "restorable_checkpoint",
    "prune_checkpoints",
    "foreign_files",
    "finished_checkpoints",
    "model_problem",
]

_PREFIX = "iter_"
_FORMAT = "scpo.state/1"
OPTIMIZER_FILE, RNG_FILE = "optimizer.safetensors", "rng.safetensors"


class CheckpointError(ExpectedError, ValueError):
    """A checkpoint that cannot be restored (a missing or malformed state file); one-line message."""


# ---- RNG state: only ints, floats, strings, tuples, lists and tensors, so it fits a state file


def rng_state() -> dict[str, Any]:
    """Python `random`, numpy's global MT19937 bit generator, torch's CPU generator and, once CUDA is initialised,
    every CUDA device's generator."""
    np_state = np.random.get_state(legacy=False)
    np_state["state"] = {**np_state["state"], "key": np_state["state"]["key"].tolist()}
    cuda = list(torch.cuda.get_rng_state_all()) if torch.cuda.is_initialized() else []
    return {"python": random.getstate(), "numpy": np_state, "torch": torch.get_rng_state(), "cuda": cuda}


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of `rng_state` (CUDA states are restored on as many devices as both the state and this machine have)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        for device, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, device)


# ---- state files: safetensors + a JSON tree


def _encode(obj: Any, name: str, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        if name in tensors:
            raise ValueError(f"two tensors of the state would be stored under {name!r}")
        tensors[name] = obj.detach().to("cpu").contiguous()
        return {"tensor": name}
    if isinstance(obj, tuple):
        return {"tuple": [_encode(v, f"{name}.{i}", tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, f"{name}.{i}", tensors) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return {
            "dict": [[_encode(k, f"{name}.key", tensors), _encode(v, f"{name}.{k}", tensors)] for k, v in obj.items()]
        }
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(
        f"cannot store a {type(obj).__name__} at {name!r} in a checkpoint state file; allowed: tensors, "
        "None, bool, int, float, str, lists, tuples, dicts"
    )


def _decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        ((tag, value),) = obj.items()  # ValueError on anything but one tag
        if tag == "tensor":
            return tensors[value]
        if tag == "tuple":
            return tuple(_decode(v, tensors) for v in value)
        if tag == "dict":
            return {_decode(k, tensors): _decode(v, tensors) for k, v in value}
        raise ValueError(f"unknown tag {tag!r}")
    return obj


def _write_state(path: Path, state: Any, root: str) -> None:
    tensors: dict[str, torch.Tensor] = {}
    tree = _encode(state, root, tensors)
    save_file(tensors, path, metadata={_FORMAT: json.dumps(tree)})  # one entry: safetensors' metadata map is unordered


def _read_state(path: Path) -> Any:
    try:
        with safe_open(path, framework="pt") as f:
            tree = (f.metadata() or {}).get(_FORMAT)
            if tree is None:
                raise ValueError(f"no {_FORMAT!r} entry in its metadata")
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is no mapping: no `in`/iteration)
        return _decode(json.loads(tree), tensors)
    except (SafetensorError, OSError, ValueError, KeyError, TypeError, RecursionError) as err:
        raise CheckpointError(
            f"{path} is not an scpo state file (safetensors + JSON tree): {_first_line(err)}"
        ) from None


def write_state_file(path: Path, state: Any, root: str) -> None:
    """`state` (a `state_dict()` or any tree of tensors and JSON values) as a state file at `path` (module
    docstring); `root` names its tensors."""
    _write_state(Path(path), state, root)


def read_state_file(path: Path) -> Any:
    """Inverse of `write_state_file`; CheckpointError (one line) for a file that is not one."""
    return _read_state(Path(path))


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


# ---- checkpoints


def write_training_state(ckpt: Path, optimizer_state: dict, rng: dict[str, Any]) -> None:
    """Write `ckpt/optimizer.safetensors` (an optimizer's `state_dict()`) and `ckpt/rng.safetensors` (`rng_state()`);
    `save_checkpoint` adds the model and state.json."""
    _write_state(Path(ckpt) / OPTIMIZER_FILE, optimizer_state, "optimizer")
    _write_state(Path(ckpt) / RNG_FILE, rng, "rng")


def _file_sizes(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def save_checkpoint(
    run_dir: Path,
    iterations_done: int,
    policy,
    optimizer,
    extra: dict | None = None,
    keep: int | None = None,
    files: Mapping[str, Path] | None = None,
    write_more: Callable[[Path], None] | None = None,
) -> Path:
    """Write `run_dir/checkpoints/iter_<iterations_done>` atomically and return it, with a copy of each of `files`
    ({name in the checkpoint: source}) and what `write_more(folder)` writes into it (a learned critic's state); then
    keep only the newest `keep` finished checkpoints (None: all)."""
    root = Path(run_dir) / "checkpoints"
    final = root / f"{_PREFIX}{iterations_done:04d}"
    tmp = root / f".{final.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        policy.save(tmp / "model")
        write_training_state(tmp, optimizer.state_dict(), rng_state())
        for name, source in (files or {}).items():
            shutil.copyfile(source, tmp / name)
        if write_more is not None:
            write_more(tmp)
        state = {"iterations_done": iterations_done, **(extra or {}), "files": _file_sizes(tmp)}
        (tmp / "state.json").write_text(json.dumps(state, indent=2, default=str))
    except Exception as err:
        shutil.rmtree(tmp, ignore_errors=True)  # no half checkpoint, and the space it took is free again
        if disk_full(err):  # named after the checkpoint, not the temporary file that was being written
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(final)) from err
        raise
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    if keep is not None:
        prune_checkpoints(run_dir, keep)
    return final


def finished_checkpoints(run_dir: Path) -> list[Path]:
    """The finished checkpoints (state.json written), oldest first."""
    root = Path(run_dir) / "checkpoints"
    return sorted(p for p in root.glob(f"{_PREFIX}*") if (p / "state.json").exists()) if root.exists() else []


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The finished checkpoint with the most iterations, or None."""
    done = finished_checkpoints(run_dir)
    return done[-1] if done else None


def foreign_files(ckpt: Path) -> list[str]:
    """Files in `ckpt` (relative paths) that the trainer did not write: not state.json and not in its "files" (all of
    them when state.json lists none)."""
    try:
        written = json.loads((Path(ckpt) / "state.json").read_text()).get("files") or {}
    except (OSError, ValueError):
        written = {}
    return [rel for rel in _file_sizes(Path(ckpt)) if rel != "state.json" and rel not in written]


def prune_checkpoints(run_dir: Path, keep: int, note=None) -> list[Path]:
    """Delete all but the newest `keep` finished checkpoints (and leftovers of interrupted writes); return the
    deleted ones. A checkpoint holding files the trainer did not write (`foreign_files`) is kept, and `note(line)`
    (default: a line on stderr) says so."""
    if keep < 1:
        raise ValueError(f"train.keep_checkpoints={keep}; allowed: an integer >= 1, or null for all")
    root = Path(run_dir) / "checkpoints"
    old = []
    for ckpt in finished_checkpoints(run_dir)[:-keep]:
        foreign = foreign_files(ckpt)
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            (note or _stderr_line)(
                f"kept old checkpoint {ckpt} (train.keep_checkpoints={keep}): it holds files the trainer did not "
                f"write ({shown}); move them out and delete it yourself"
            )
            continue
        shutil.rmtree(ckpt)
        old.append(ckpt)
    for leftover in root.glob(f".{_PREFIX}*.tmp") if root.exists() else []:
        shutil.rmtree(leftover, ignore_errors=True)
    return old


def _stderr_line(line: str) -> None:
    tqdm.write(line, file=sys.stderr)  # between progress bars


def checkpoint_problem(ckpt: Path) -> str | None:
    """Why `ckpt` cannot be restored, naming the file (one line), or None when it looks complete: state.json parses,
    every file state.json lists exists, the others than safetensors (tokenizer, configs) with the size it recorded,
    the model's config.json parses and every model safetensors header covers its file (cheap: no tensor is read;
    `read_training_state` then parses the state files)."""
    ckpt = Path(ckpt)
    try:
        info = json.loads((ckpt / "state.json").read_text())
        if not isinstance(info, dict) or "iterations_done" not in info:
            raise ValueError("no iterations_done")
    except (OSError, ValueError) as err:
        return f"{ckpt / 'state.json'} is unreadable ({_first_line(err)})"
    for rel, size in (info.get("files") or {}).items():
        path = ckpt / rel
        if not path.is_file():
            return f"{path} is missing"
        if path.suffix != ".safetensors" and path.stat().st_size != size:  # safetensors: their headers say more
            return f"{path} has {path.stat().st_size:,} bytes, {size:,} when written (truncated or replaced)"
    return model_problem(ckpt / "model")


def model_problem(model_dir: Path) -> str | None:
    """Why the model folder `model_dir` cannot be loaded, naming the file or the tensors (one line), or None:
    config.json must parse, every safetensors header must cover its file and the headers must name exactly the
    architecture's tensors (`scpo.policy.completeness.tensor_names_problem`; no tensor is read)."""
    model_dir = Path(model_dir)
    try:
        json.loads((model_dir / "config.json").read_text())
    except FileNotFoundError:
        return f"{model_dir / 'config.json'} is missing"
    except (OSError, ValueError) as err:
        return f"{model_dir / 'config.json'} is unreadable ({_first_line(err)})"
    for path in sorted(model_dir.glob("*.safetensors")):
        try:
            with safe_open(path, framework="pt") as f:
                f.keys()
        except (SafetensorError, OSError) as err:
            return f"{path} is not a readable safetensors file ({_first_line(err)})"
    return tensor_names_problem(model_dir)


def restorable_checkpoint(run_dir: Path) -> tuple[Path, TrainingState, list[str]]:
    """The newest checkpoint of `run_dir` that is complete (`checkpoint_problem`, then its state files parse), its
    training state, and one line per newer checkpoint skipped (naming its damaged file). CheckpointError (one line)
    when there is none."""
    done = finished_checkpoints(run_dir)
    if not done:
        started = Path(run_dir).is_dir() and any(p.name != LOCK_FILE for p in Path(run_dir).iterdir())
        raise CheckpointError(
            f"nothing to resume in {run_dir}: no finished checkpoint under {Path(run_dir) / 'checkpoints'}; "
            + ("start it again with --overwrite" if started else "start it without --resume")
        )
    problems: list[tuple[str, str]] = []
    for ckpt in reversed(done):
        problem = checkpoint_problem(ckpt)
        if problem is None:
            try:
                state = read_training_state(ckpt)
            except CheckpointError as err:
                problem = str(err)
            else:
                notes = [
                    f"checkpoint {name} cannot be restored: {why}; resuming from {ckpt.name} instead"
                    for name, why in problems
                ]
                return ckpt, state, notes
        problems.append((ckpt.name, problem))
    raise CheckpointError(
        f"no complete checkpoint to resume from in {run_dir}: " + "; ".join(f"{name}: {why}" for name, why in problems)
    )


@dataclass(frozen=True)
class TrainingState:
    """What a checkpoint holds besides the model: the optimizer's `state_dict()`, `rng_state()` and state.json."""

    optimizer: dict
    rng: dict[str, Any]
    info: dict[str, Any]

    def restore(self, optimizer) -> int:
        """Load the optimizer and RNG states; return the iterations done. CheckpointError if they do not fit."""
        try:
            optimizer.load_state_dict(self.optimizer)
            set_rng_state(self.rng)
            return int(self.info["iterations_done"])
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise CheckpointError(
                f"the checkpoint's optimizer/RNG state does not fit this run: {_first_line(err)}"
            ) from None


def read_training_state(ckpt: Path) -> TrainingState:
    """Read `ckpt`'s state files and state.json (the model is loaded by `load_policy`).

    Raises CheckpointError (one line) for a missing file or one that does not parse.
    """
    ckpt = Path(ckpt)
    missing = [name for name in (OPTIMIZER_FILE, RNG_FILE, "state.json") if not (ckpt / name).exists()]
    if missing:
        raise CheckpointError(f"{ckpt} is not a complete checkpoint: {', '.join(missing)} missing")
    try:
        info = json.loads((ckpt / "state.json").read_text())
    except ValueError as err:
        raise CheckpointError(f"{ckpt / 'state.json'} is not JSON: {_first_line(err)}") from None
    return TrainingState(_read_state(ckpt / OPTIMIZER_FILE), _read_state(ckpt / RNG_FILE), info)
