"""What the update benchmarks (`torch_compile.py`, `fused_projections.py`) measure on: an environment's SFT warm start
and one saved iteration of its GRPO run, as `make repro` leaves them under runs/; with `quick` (their `--quick`), or
where the pipeline's runs are missing (a fresh clone before `make repro`), a two-iteration GRPO run of the smoke
profile's policy on the data-free corridor, made in a temporary folder (seconds). A helper, not a benchmark: `make
bench` runs `benchmarks/[!_]*.py`."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from scpo.batch import RolloutBatch
from scpo.policy import load_policy

REPO = Path(__file__).resolve().parents[1]
CORRIDOR = {  # the smoke profile's policy on the corridor: 2 groups x 4 rollouts of up to 4 steps, admissible choices
    "env.name": "corridor",
    "env.corridor.max_steps": 4,
    "rollout.n_tasks": 2,
    "rollout.group_size": 4,
    "rollout.action_choice": "admissible",
    "credit.method": "grpo",
    "train.iterations": 2,
    "train.skip_zero_advantage": False,
}


def corridor_run(iteration: int):
    """(the policy, the rollouts of iteration `iteration`) of a fresh corridor GRPO run (`CORRIDOR`, smoke profile)."""
    from scpo.config import load_config
    from scpo.train.run import run_training

    out = Path(tempfile.mkdtemp(prefix="scpo-bench-")) / "corridor"
    cfg = load_config(REPO / "params.yaml", profile="smoke", overrides=CORRIDOR)
    with contextlib.redirect_stderr(io.StringIO()):  # the run's progress bars are not the benchmark's output
        run_training(cfg, stage="rl", out_dir=out)
    return load_policy(str(out)), RolloutBatch.read(out / "rollouts" / f"iter_{iteration:04d}.parquet")


def warm_start_and_rollouts(env: str, iteration: int, *, quick: bool = False):
    """(the policy of runs/<env>/sft/seed0, the rollouts of runs/<env>/grpo/seed0's iteration `iteration`), or with
    `quick` or where either is missing those of `corridor_run`, said in one line first."""
    warm_start = REPO / "runs" / env / "sft" / "seed0"
    rollouts = REPO / "runs" / env / "grpo" / "seed0" / "rollouts" / f"iter_{iteration:04d}.parquet"
    missing = [p for p in (warm_start, rollouts) if not p.exists()]
    if quick or missing:
        why = "--quick" if quick else f"{missing[0].relative_to(REPO)} does not exist (`make repro` makes it)"
        print(f"{why}: measured on a two-iteration corridor run of the smoke profile's policy instead", flush=True)
        return corridor_run(iteration)
    return load_policy(str(warm_start)), RolloutBatch.read(rollouts)
