"""A run folder while a run writes into it: `open_run(plan)` holds it for the run (its lock and, on a GPU, the GPU:
`scpo.policy.placement.gpu_claim`), shows the plan's notes, checks the folder again under the lock
(`scpo.run.guards`), clears it (overwrite) or rebuilds its history and sets aside newer checkpoints (a resume: ones
that could not be restored become `checkpoints/corrupt-iter_XXXX`; newer saved rollouts are removed, the resumed run
writes them again), and writes `provenance.json` (a resume is added to the first record).
`RunFolder.finish(summary)` writes `summary.json` and `manifest.json` (digests the DVC stages downstream depend on).
A full disk (or a folder that stops being writable) ends the run in one line naming the file and the way on: free
space, then `--resume` from the last checkpoint (or run it again with `--overwrite` when there is none yet).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from scpo.errors import RunFolderError, disk_full, write_problem
from scpo.pipeline.folder_lock import RunLock
from scpo.pipeline.manifest import write_run_manifest
from scpo.policy.placement import gpu_claim
from scpo.run.checkpoint import finished_checkpoints, latest_checkpoint
from scpo.run.guards import check_fresh, clear_run_folder
from scpo.run.history import HISTORY_FILE
from scpo.run.plan import RunPlan
from scpo.run.provenance import PROVENANCE_FILE, read_provenance, write_json_atomic

__all__ = ["open_run", "RunFolder"]


class RunFolder:
    """The folder of a run in progress (`open_run`): where it is, and `finish`."""

    def __init__(self, plan: RunPlan):
        self.plan = plan
        self.path = plan.run_dir

    def finish(self, summary: dict[str, Any]) -> None:
        """`summary.json`, then `manifest.json` (digests of the model, rollouts and history)."""
        write_json_atomic(self.path / "summary.json", summary)
        write_run_manifest(self.path)


@contextmanager
def open_run(plan: RunPlan) -> Iterator[RunFolder]:
    """Hold `plan.run_dir` for the run (module docstring); a write that fails for want of space or permission is one
    RunFolderError naming the file and the way on."""
    run_dir = plan.run_dir
    with RunLock(run_dir) as lock, gpu_claim(plan.device):  # one run per GPU
        for line in [lock.note, *plan.notes]:
            if line:
                tqdm.write(line, file=sys.stderr)  # one line for the user, between progress bars
        if plan.mode == "fresh":
            check_fresh(run_dir, resumable=plan.stage == "rl")  # again, now that no other writer can start
        elif plan.mode == "overwrite":
            clear_run_folder(run_dir, plan.protected)  # checked again, now that no other writer can start
        try:
            if plan.resume is not None and plan.resume.history_from is not None:
                shutil.copyfile(plan.resume.history_from, run_dir / HISTORY_FILE)
            _write_provenance(plan)
            if plan.resume is not None:
                _set_aside_after(run_dir, plan.resume.iterations_done)
            yield RunFolder(plan)
        except OSError as err:
            problem = write_problem(err, run_dir)
            if problem is None:
                raise
            raise RunFolderError(f"{problem}; {_way_on(run_dir, plan.stage, disk_full(err))}") from err


def _way_on(run_dir: Path, stage: str, full: bool) -> str:
    """What to do after a write failed: free space (or make the folder writable), then resume from the last
    checkpoint, or start again when there is none."""
    fix = "free space" if full else "make it writable"
    if stage == "rl" and latest_checkpoint(run_dir) is not None:
        return f"{fix}, then --resume"
    return f"{fix}, then run it again with --overwrite"


def _write_provenance(plan: RunPlan) -> None:
    """`<run>/provenance.json`: the plan's record (a new run), or that record added to the first one as a resume."""
    path = plan.run_dir / PROVENANCE_FILE
    if plan.resume is None:
        write_json_atomic(path, plan.record)
        return
    first = read_provenance(plan.run_dir) or {"config": None, "note": "no provenance.json in the run folder"}
    first.setdefault("resumes", []).append(
        {
            **plan.record,
            "from_checkpoint": plan.resume.checkpoint.name,
            "forced_differences": [list(d) for d in plan.resume.forced],
        }
    )
    write_json_atomic(path, first)


def _set_aside_after(run_dir: Path, iterations_done: int) -> None:
    """Before resuming after `iterations_done` iterations: move aside newer checkpoints (ones that could not be
    restored: `checkpoints/corrupt-iter_XXXX`) and delete newer saved rollouts, which the resumed run writes again
    (history rows are trimmed by `HistoryLog`)."""
    for ckpt in finished_checkpoints(run_dir):
        if int(ckpt.name.split("_")[1]) > iterations_done:
            target = ckpt.with_name(f"corrupt-{ckpt.name}")
            shutil.rmtree(target, ignore_errors=True)
            ckpt.rename(target)
    for path in sorted((run_dir / "rollouts").glob("iter_*.parquet")) if (run_dir / "rollouts").is_dir() else []:
        if int(path.stem.split("_")[1]) >= iterations_done:
            path.unlink()
