"""`run_training(cfg, stage)`: one SFT or RL run into its run folder, with every check done before anything is written.

`scpo.train.preflight.plan_training` checks the data, the starting model and the run folder (a fresh run needs an
empty one; `overwrite` replaces it only once every check passed; `resume` needs a restorable checkpoint whose
recorded config matches). The folder is then locked (`scpo.train.run_folder.RunLock`: a second writer fails at once)
and gets `provenance.json` (resolved config, overrides, version, git commit, and what the run reads: its task pool
and start model, `scpo.train.run_inputs`); each checkpoint's state.json carries the same record. The stage itself:
`scpo.train.sft.run_sft` or `scpo.train.rl_loop.run_rl`. A finished run ends with `summary.json` and `manifest.json`
(digests of the model, rollouts and history, which the DVC stages downstream depend on).

A full disk (or a folder that stops being writable) ends the run in one line naming the file and the way on: free
space, then `--resume` from the last checkpoint (or run it again with `--overwrite` when there is none yet).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tqdm.auto import tqdm

from scpo.config import Config
from scpo.errors import RunFolderError, disk_full, write_problem
from scpo.pipeline.layout import run_dir as layout_run_dir
from scpo.pipeline.manifest import write_run_manifest
from scpo.policy.placement import gpu_claim, resolve_device
from scpo.train.checkpoint import latest_checkpoint
from scpo.train.metrics import HISTORY_FILE
from scpo.train.preflight import TrainingPlan, plan_training
from scpo.train.provenance import PROVENANCE_FILE, provenance, read_provenance, write_json_atomic
from scpo.train.rl_loop import run_rl
from scpo.train.run_folder import RunLock, check_fresh, clear_run_folder
from scpo.train.seeding import set_threads
from scpo.train.sft import run_sft

__all__ = ["run_training", "default_run_dir"]


def default_run_dir(cfg: Config, stage: str) -> Path:
    """The default run folder of `stage` ('sft' or 'rl'): <train.out_dir>/<env>/<sft | method>/seed<seed>."""
    return layout_run_dir(
        cfg.train.out_dir, cfg.env.name, "sft" if stage == "sft" else cfg.credit.method, cfg.train.seed
    )


def run_training(
    cfg: Config,
    stage: str = "rl",
    out_dir: Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    force: bool = False,
) -> dict:
    """Run stage 'sft' or 'rl' into `out_dir` (default: `default_run_dir`); returns the summary dict (also written to
    `<out_dir>/summary.json`). Modes: fresh (the folder must be empty), `overwrite` (replace what it holds, after every
    check passed), `resume` (continue from the newest restorable checkpoint; a config differing from the run's
    recorded one is refused unless `force`)."""
    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(cfg, stage)
    plan = plan_training(cfg, stage, run_dir, resume=resume, overwrite=overwrite, force=force)
    set_threads(cfg.train.torch_threads)
    with RunLock(run_dir) as lock, gpu_claim(resolve_device(cfg.train.device)):  # one run per GPU
        for line in [lock.note, *plan.notes]:
            if line:
                tqdm.write(line, file=sys.stderr)  # one line for the user, between progress bars
        if plan.mode == "fresh":
            check_fresh(run_dir, resumable=stage == "rl")  # again, now that no other writer can start
        elif plan.mode == "overwrite":
            clear_run_folder(run_dir, plan.protected)  # checked again, now that no other writer can start
        try:
            if plan.history_from is not None:
                shutil.copyfile(plan.history_from, run_dir / HISTORY_FILE)
            record = _record_provenance(cfg, plan)
            summary = run_sft(cfg, run_dir) if stage == "sft" else run_rl(cfg, plan, record)
            write_json_atomic(run_dir / "summary.json", summary)
            write_run_manifest(run_dir)
        except OSError as err:
            problem = write_problem(err, run_dir)
            if problem is None:
                raise
            raise RunFolderError(f"{problem}; {_way_on(run_dir, stage, disk_full(err))}") from err
    return summary


def _way_on(run_dir: Path, stage: str, full: bool) -> str:
    """What to do after a write failed: free space (or make the folder writable), then resume from the last
    checkpoint, or start again when there is none."""
    fix = "free space" if full else "make it writable"
    if stage == "rl" and latest_checkpoint(run_dir) is not None:
        return f"{fix}, then --resume"
    return f"{fix}, then run it again with --overwrite"


def _record_provenance(cfg: Config, plan: TrainingPlan) -> dict:
    """Write `<run>/provenance.json` (a new run) or add this resume to it (the first record is kept); return the record
    that this process's checkpoints carry."""
    record = {**provenance(cfg), **plan.inputs}
    path = plan.run_dir / PROVENANCE_FILE
    if plan.mode == "resume":
        first = read_provenance(plan.run_dir) or {"config": None, "note": "run started before provenance was recorded"}
        first.setdefault("resumes", []).append(
            {**record, "from_checkpoint": plan.checkpoint.name, "forced_differences": [list(d) for d in plan.forced]}
        )
        write_json_atomic(path, first)
    else:
        write_json_atomic(path, record)
    return record
