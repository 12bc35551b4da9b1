"""What the training rollouts of each run label are made of, by the planner's oracle progress q_t = V*(s_t) - V*(s_t+1):
the share of steps that bring the goal closer (q > 0), change nothing (q = 0) and undo progress (q < 0), at the first
and the last two iterations of every seed, and the same by action verb over the last two.

Rollouts saved without the q column (every label but the oracle's) are labelled by replaying them in the fast engine
(`scpo.envs.alfworld.oracle_rollouts.label_progress`).

    python experiments/learning_benchmark/step_composition.py --runs /work/lb_runs/alfworld \
        --labels grpo oracle oracle+outcome oracle-centred oracle-optimal \
        --out experiments/learning_benchmark/results/oracle_variants/step_composition.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.analysis.rollout_files import iteration_of
from scpo.batch import RolloutBatch
from scpo.envs.alfworld.oracle_rollouts import label_progress, shared_pool


def step_table(runs: Path, labels: list[str], data_root: str) -> pd.DataFrame:
    """One row per step of the first iteration and the last two of every seed: label, seed, iteration, q, verb."""
    pool = shared_pool(data_root)
    parts = []
    for label in labels:
        for folder in sorted((runs / label).glob("seed*/train/rollouts")):
            files = sorted(folder.glob("iter_*.parquet"), key=iteration_of)
            if not files:
                continue
            last = iteration_of(files[-1])
            for f in files:
                it = iteration_of(f)
                if it != 0 and it < last - 1:
                    continue
                batch = RolloutBatch.read(f)
                if batch.oracle_progress is None:
                    batch = label_progress(batch, data_root=data_root, pool=pool)
                parts.append(
                    pd.DataFrame(
                        {
                            "label": label,
                            "seed": folder.parts[-3],
                            "phase": "first iteration" if it == 0 else "last two iterations",
                            "q": batch.oracle_progress,
                            "verb": [str(a).split(" ")[0] if str(a) else "" for a in batch.action],
                        }
                    )
                )
    if not parts:
        raise SystemExit(f"no saved rollouts under {runs} for {labels}")
    return pd.concat(parts, ignore_index=True)


def report(steps: pd.DataFrame) -> str:
    steps = steps.assign(closer=steps.q > 0, nothing=steps.q == 0, undoes=steps.q < 0)
    shares = steps.groupby(["label", "phase"], sort=False)[["closer", "nothing", "undoes"]].mean().round(3)
    shares["steps"] = steps.groupby(["label", "phase"], sort=False).size()
    late = steps[steps.phase == "last two iterations"]
    verbs = late[late.verb.isin(["go", "take", "move"])]
    sign = np.sign(verbs.q).map({1.0: "q>0", 0.0: "q=0", -1.0: "q<0"})
    counts = verbs.assign(sign=sign).groupby(["label", "verb", "sign"], sort=False).size()
    share = counts / counts.index.get_level_values("label").map(late.groupby("label").size()).to_numpy()
    by_verb = share.unstack("sign", fill_value=0.0).reindex(columns=["q>0", "q=0", "q<0"], fill_value=0.0).round(3)
    n_seeds = steps.groupby("label").seed.nunique()
    seeds = (
        f"{n_seeds.iloc[0]} seeds"
        if n_seeds.nunique() == 1
        else "seeds per label: " + ", ".join(f"{label} {n}" for label, n in n_seeds.items())
    )
    return (
        f"## Training steps by oracle progress q_t (share of the label's steps, {seeds} pooled)\n\n"
        + shares.to_markdown()
        + "\n\n## Last two iterations: share of all steps, by verb and sign of q\n\n"
        + by_verb.to_markdown()
        + "\n"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=Path, required=True, help="the learning benchmark's <out_dir>/alfworld")
    p.add_argument("--labels", nargs="+", required=True)
    p.add_argument("--data-root", default="data")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    text = report(step_table(a.runs, a.labels, a.data_root))
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
