"""What the update benchmarks (`torch_compile.py`, `fused_projections.py`) measure on: an environment's SFT warm start
and one saved iteration of its GRPO run, as `make repro` leaves them under runs/. A helper, not a benchmark: `make
bench` runs `benchmarks/[!_]*.py`."""

from __future__ import annotations

from pathlib import Path

from scpo.batch import RolloutBatch
from scpo.policy import load_policy

REPO = Path(__file__).resolve().parents[1]


def warm_start_and_rollouts(env: str, iteration: int):
    """(the policy of runs/<env>/sft/seed0, the rollouts of runs/<env>/grpo/seed0's iteration `iteration`); where either
    is missing, exits with one line that names it and the command that makes it."""
    warm_start = REPO / "runs" / env / "sft" / "seed0"
    rollouts = REPO / "runs" / env / "grpo" / "seed0" / "rollouts" / f"iter_{iteration:04d}.parquet"
    for needed in (warm_start, rollouts):
        if not needed.exists():
            raise SystemExit(f"{needed} does not exist: run `make repro` (or `dvc repro train@grpo-{env}`) first")
    return load_policy(str(warm_start)), RolloutBatch.read(rollouts)
