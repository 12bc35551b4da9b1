"""`run_training(cfg, stage)`: one SFT or RL run into its run folder.

    plan = make_plan(cfg, stage, out_dir, ...)     every check, nothing written (scpo.run.plan)
    with open_run(plan) as run:                    the lock, the folder cleared or resumed, provenance.json
        summary = run_sft(plan) | Trainer(plan).train()
        run.finish(summary)                        summary.json, manifest.json

Modes: fresh (the folder must be empty), `overwrite` (replace what it holds, after every check passed), `resume`
(continue from the newest restorable checkpoint; a config differing from the run's recorded one is refused unless
`force`).
"""

from __future__ import annotations

from pathlib import Path

from scpo.config import Config
from scpo.run.folder import open_run
from scpo.run.plan import make_plan
from scpo.train.seeding import set_threads
from scpo.train.sft import run_sft
from scpo.train.trainer import Trainer

__all__ = ["run_training"]


def run_training(
    cfg: Config,
    stage: str = "rl",
    out_dir: Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    force: bool = False,
) -> dict:
    """Run stage 'sft' or 'rl' into `out_dir` (default: `<train.out_dir>/<env>/<sft | method>/seed<seed>`); returns
    the summary dict (also written to `<out_dir>/summary.json`)."""
    plan = make_plan(cfg, stage, out_dir, resume=resume, overwrite=overwrite, force=force)
    set_threads(cfg.train.torch_threads)
    with open_run(plan) as run:
        summary = run_sft(plan) if plan.stage == "sft" else Trainer(plan).train()
        run.finish(summary)
    return summary
