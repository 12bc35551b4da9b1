"""Which steps the planner's oracle progress q_t = V*(s_t) - V*(s_t+1) credits, per run label and iteration: new
progress (q > 0 with the trajectory at its best so far), repairs (q > 0 that wins back progress an earlier step of
the same trajectory lost), steps that change nothing (q = 0) and steps that undo progress (q < 0).

A step t of a trajectory is a repair when P_t < max_{u <= t} P_u, with P_t = sum_{u < t} max(q_u, -dead_end) the
progress made before it (P_0 = 0): the +1 of putting a wrongly taken object back down, or of walking back east.
Rollouts saved without the q column (every label but the oracle's) are labelled by their environment's planner
(`EnvSpec.label_progress`: ALFWorld's replays the fast engine, the corridor's is closed-form).

    python experiments/learning_benchmark/progress_kinds.py --env corridor \
        --runs random=/tmp/scpo_corridor_control/random weak=/tmp/scpo_corridor_control/weak \
        --labels grpo oracle --iterations 0 9 \
        --out experiments/learning_benchmark/results/corridor_control/progress_kinds.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.analysis.rollout_files import iteration_of
from scpo.batch import RolloutBatch, rows_by_trajectory
from scpo.envs.registry import env_spec

DEAD_END = 10.0  # credit.oracle.dead_end's default: a step into a dead end counts as this much lost progress
KINDS = ("new progress", "repair", "nothing", "undoes")


def step_kinds(q: np.ndarray, traj_id: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Per row, its kind (`KINDS`) from its trajectory's q in step order (module docstring)."""
    kinds = np.empty(len(q), dtype=object)
    for rows in rows_by_trajectory(traj_id, step):
        made = best = 0.0
        for r in rows:
            x = max(float(q[r]), -DEAD_END)
            if x > 0:
                kinds[r] = "repair" if made < best else "new progress"
            else:
                kinds[r] = "undoes" if x < 0 else "nothing"
            made += x
            best = max(best, made)
    return kinds


def kinds_table(runs: dict[str, Path], env: str, labels: list[str], iterations: list[int], data_root: str):
    """Share of each kind per (start, label, iteration), over every seed's saved rollouts of that iteration."""
    spec, rows = env_spec(env), []
    for start, root in runs.items():
        for label in labels:
            for folder in sorted((root / env / label).glob("seed*/train/rollouts")):
                for f in sorted(folder.glob("iter_*.parquet"), key=iteration_of):
                    it = iteration_of(f)
                    if it not in iterations:
                        continue
                    batch = RolloutBatch.read(f)
                    if batch.oracle_progress is None:
                        batch = spec.label_progress(batch, data_root)
                    kinds = step_kinds(batch.oracle_progress, batch.traj_id, batch.step)
                    rows.append(pd.DataFrame({"start": start, "label": label, "iteration": it, "kind": kinds}))
    if not rows:
        raise SystemExit(f"no saved rollouts of {labels} at iterations {iterations} under {list(runs.values())}")
    steps = pd.concat(rows, ignore_index=True)
    counts = steps.groupby(["start", "label", "iteration", "kind"], sort=False).size().unstack("kind", fill_value=0)
    counts = counts.reindex(columns=list(KINDS), fill_value=0)
    table = counts.div(counts.sum(axis=1), axis=0).round(3)
    table["repairs' share of q > 0"] = (counts["repair"] / (counts["repair"] + counts["new progress"])).round(2)
    table["steps"] = counts.sum(axis=1)
    return table.sort_index()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", required=True, help="an environment with a planner: alfworld | corridor")
    p.add_argument("--runs", nargs="+", required=True, help="NAME=DIR: a learning benchmark's out_dir, named")
    p.add_argument("--labels", nargs="+", required=True)
    p.add_argument("--iterations", nargs="+", type=int, default=[0])
    p.add_argument("--data-root", default="data")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    runs = {name: Path(folder) for name, _, folder in (item.partition("=") for item in a.runs)}
    table = kinds_table(runs, a.env, a.labels, a.iterations, a.data_root)
    text = (
        f"## {a.env}: training steps by the kind of oracle progress they make (share of the steps of every seed)\n\n"
        + table.reset_index().to_markdown(index=False)
        + "\n"
    )
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
