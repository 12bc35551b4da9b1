"""`scpo import`: another trainer's rollouts into a run folder the explorer, `scpo credit-map` and every analysis read.

    import_run("steps.jsonl", "runs/imported/my_run")  # a steps JSONL (scpo.importers.jsonl) or a folder of them
    import_run("verl_runs/alfworld", "runs/imported/alfworld")  # rollout files: verl-agent's writer, a run of ours

Writes `<out>/rollouts/iter_XXXX.parquet`, one file per iteration, and `<out>/import.json` (what was imported from
where). Streams: one iteration in memory at a time, a progress bar over the true total (the bytes of the JSONL
files, or the number of rollout files). Nothing is lost or mixed: the files are written into `rollouts.partial/`
and moved into place once every iteration is in, so an interrupted import leaves no run behind (the next one starts
over); an `<out>` holding an import already, or anything else, is refused unless `overwrite` (then the new import
replaces the old one only when it is complete).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from scpo.batch import RolloutBatch
from scpo.errors import ExpectedError, RunFolderError
from scpo.importers.jsonl import is_steps_file, read_iterations
from scpo.importers.rollout_file import extra_column, iteration_name, write_rollout_file

__all__ = ["ImportSourceError", "ImportSummary", "source_kind", "import_run", "MANIFEST"]

MANIFEST = "import.json"
PARTIAL = "rollouts.partial"
OLD = "rollouts.old"
Kind = Literal["auto", "jsonl", "rollouts"]


class ImportSourceError(ExpectedError, ValueError):
    """A source that is not a steps JSONL or a folder of rollout files, or one holding an iteration twice."""


@dataclass
class ImportSummary:
    """What one import wrote (also `<out>/import.json`)."""

    source: str
    kind: str
    out: str
    iterations: int = 0
    first_iteration: int | None = None
    last_iteration: int | None = None
    rows: int = 0
    trained_advantage: bool = False
    padding_copies: int = 0
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)

    def line(self) -> str:
        span = f"{self.first_iteration}..{self.last_iteration}" if self.iterations else "none"
        trained = "with" if self.trained_advantage else "without"
        return (
            f"imported {self.iterations} iteration{'s' if self.iterations != 1 else ''} ({span}), {self.rows:,} steps, "
            f"{trained} trained advantages, from {self.source} into {self.out}/rollouts ({self.seconds:.1f} s)"
        )


def source_kind(source: str | Path) -> str:
    """'jsonl' for a .jsonl (or .jsonl.gz) file or a folder of them, 'rollouts' for a folder of iter_XXXX.parquet
    rollout files (or a run folder holding rollouts/); ImportSourceError naming what the path holds otherwise."""
    path = Path(source)
    if not path.exists():
        raise ImportSourceError(f"no file or folder at {path}")
    if path.is_file():
        if is_steps_file(path):
            return "jsonl"
        raise ImportSourceError(
            f"{path} is not a steps JSONL (*.jsonl, *.jsonl.gz) file; give one, or a folder of rollout files"
        )
    if _parquet_iterations(path):
        return "rollouts"
    if _jsonl_files(path):
        return "jsonl"
    raise ImportSourceError(
        f"{path} holds neither rollout files (rollouts/iter_XXXX.parquet, as verl-agent's writer saves them) nor "
        f"steps JSONL files (*.jsonl, *.jsonl.gz)"
    )


def _parquet_iterations(folder: Path) -> list[tuple[int, Path]]:
    """(iteration, file) of the iter_XXXX.parquet files of `folder` or of its rollouts/ folder, by iteration."""
    import re

    pattern = re.compile(r"^iter_(\d+)\.parquet$")
    where = folder / "rollouts" if (folder / "rollouts").is_dir() else folder
    found = [(int(m.group(1)), p) for p in where.iterdir() if (m := pattern.match(p.name))]
    return sorted(found)


def _check_out(out: Path, source: Path, overwrite: bool) -> None:
    """Refuse an `out` that would mix runs: the source itself, a folder holding an import (unless overwrite) or
    anything else."""
    src, dst = source.resolve(), out.resolve()
    if dst == src or src in dst.parents or dst in src.parents:
        raise RunFolderError(f"the output folder {out} overlaps the source {source}; choose a folder outside it")
    if not out.exists():
        return
    if not out.is_dir():
        raise RunFolderError(f"{out} is a file; give a folder for the imported run")
    held = sorted(p.name for p in out.iterdir() if p.name not in (PARTIAL, OLD))
    if not held:
        return
    if (out / MANIFEST).is_file() and set(held) <= {MANIFEST, "rollouts"}:
        if overwrite:
            return
        before = json.loads((out / MANIFEST).read_text())
        raise RunFolderError(
            f"{out} holds an import of {before.get('source')} ({before.get('iterations')} iterations); "
            f"pass --overwrite to replace it"
        )
    raise RunFolderError(
        f"{out} holds {', '.join(held[:5])}{' ...' if len(held) > 5 else ''}, not an import; choose a new or empty "
        f"folder"
    )


def _jsonl_files(source: Path) -> list[Path]:
    return [source] if source.is_file() else sorted(p for p in source.iterdir() if p.is_file() and is_steps_file(p))


def _jsonl_iterations(source: Path, bar) -> Iterator[tuple[int, RolloutBatch, Path | None]]:
    for f in _jsonl_files(source):
        for it, batch in read_iterations(f, progress=bar.update):
            yield it, batch, None


def _rollout_iterations(source: Path, bar) -> Iterator[tuple[int, RolloutBatch, Path | None]]:
    for it, f in _parquet_iterations(source):
        try:
            batch = RolloutBatch.read(f)
        except (OSError, ValueError, KeyError, TypeError) as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            raise ImportSourceError(f"{f} is not a readable rollout file ({first})") from None
        yield it, batch, f
        bar.update(1)


def _bar_total(source: Path, kind: str) -> dict:
    """The progress bar's true total: the bytes of the JSONL files, or the number of rollout files."""
    if kind == "jsonl":
        total = sum(f.stat().st_size for f in _jsonl_files(source))
        return {"total": total, "unit": "B", "unit_scale": True, "unit_divisor": 1024}
    return {"total": len(_parquet_iterations(source)), "unit": "iteration"}


def import_run(
    source: str | Path, out: str | Path, *, kind: Kind = "auto", overwrite: bool = False, progress: bool = True
) -> ImportSummary:
    """Import `source` (a steps JSONL file or folder of them, or a folder of rollout files) into the run folder `out`
    (see the module docstring); returns the summary also written to `<out>/import.json`."""
    from tqdm.auto import tqdm

    source, out = Path(source), Path(out)
    found = source_kind(source) if kind == "auto" else kind
    if found not in ("jsonl", "rollouts"):
        raise ImportSourceError(f"kind {kind!r} is not one of auto, jsonl, rollouts")
    if kind != "auto":
        source_kind(source)  # the path exists and holds something importable
    _check_out(out, source, overwrite)
    start = time.perf_counter()
    partial = out / PARTIAL
    for left in (partial, out / OLD):  # what an interrupted import left
        if left.exists():
            shutil.rmtree(left)
    summary = ImportSummary(source=str(source), kind=found, out=str(out))
    seen: set[int] = set()
    iterations = _jsonl_iterations if found == "jsonl" else _rollout_iterations
    bar_args = _bar_total(source, found)
    with tqdm(desc=f"import {source.name}", disable=not progress, dynamic_ncols=True, **bar_args) as bar:
        for it, batch, file in iterations(source, bar):
            if it in seen:
                raise ImportSourceError(f"iteration {it} appears twice in {source} (e.g. in two JSONL files)")
            seen.add(it)
            bar.set_postfix_str(f"iteration {it}", refresh=False)
            dest = iteration_name(it)
            target = partial / dest
            if file is not None:  # a rollout file: copied whole (its extra columns and record kept)
                partial.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, target.with_name(target.name + ".tmp"))
                target.with_name(target.name + ".tmp").replace(target)
                copies = extra_column(file, "verl_copies")
                summary.padding_copies += int(copies.sum()) if copies is not None else 0
            else:
                write_rollout_file(batch, target, record={"source": str(source), "iteration": it})
            summary.iterations += 1
            summary.rows += batch.n_rows
            summary.trained_advantage = summary.trained_advantage or batch.trained_advantage is not None
            summary.first_iteration = it if summary.first_iteration is None else min(summary.first_iteration, it)
            summary.last_iteration = it if summary.last_iteration is None else max(summary.last_iteration, it)
            summary.files.append(f"rollouts/{dest}")
    if not summary.iterations:
        raise ImportSourceError(f"{source} holds no iteration to import")
    summary.seconds = round(time.perf_counter() - start, 3)
    _move_into_place(out, partial, summary)
    return summary


def _move_into_place(out: Path, partial: Path, summary: ImportSummary) -> None:
    """The staged files become `<out>/rollouts` and the manifest is written; an old import is removed only now."""
    final, old = out / "rollouts", out / OLD
    if (out / MANIFEST).exists():
        (out / MANIFEST).unlink()
    if final.exists():
        final.rename(old)
    partial.rename(final)
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(asdict(summary), indent=1) + "\n")
    tmp.replace(out / MANIFEST)
    if old.exists():
        shutil.rmtree(old)
