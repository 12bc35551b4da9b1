"""The paired comparison of `feature_probe.py`'s replays: per seed, over the batches that mix wins and losses (iteration
0 left out: every critic starts at V = 0 there), the mean and the median explained variance of a replayed critic next
to the trainer's own (`results/trainer_cpu/per_iteration.csv`, the same batches: the recorded runs are bit-identical to
those), the std of its values across a batch's rows, and the paired difference over seeds (paired t, 95 % interval).
experiments/critic/README.md, "Why the cpu profile's critic does not separate the states".

    python experiments/critic/probe_summary.py results/probe/standardised_frozen.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from scipy import stats

TRAINER = Path(__file__).parent / "results" / "trainer_cpu" / "per_iteration.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("probe", type=Path, help="a feature_probe.py csv")
    args = ap.parse_args()
    replay = pd.read_csv(args.probe)
    trainer = pd.read_csv(TRAINER)[["seed", "iteration", "explained_variance"]]
    mixed = replay[replay["mixed"] & (replay["iteration"] >= 1)].merge(trainer, on=["seed", "iteration"])
    per_seed = mixed.groupby("seed").agg(
        batches=("ev", "size"),
        ev_mean=("ev", "mean"),
        ev_median=("ev", "median"),
        ev_positive=("ev", lambda x: float((x > 0).mean())),
        trainer_ev_mean=("explained_variance", "mean"),
        v_std=("v_std", "mean"),
        ev_exact=("ev_exact", "mean"),
    )
    print(per_seed.round(4).to_string())
    for col in ("ev_mean", "ev_median"):
        d = (per_seed[col] - per_seed["trainer_ev_mean"]).to_numpy()
        lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        p = stats.ttest_1samp(d, 0).pvalue
        head = f"{col} - trainer's mean, paired over {len(d)} seeds"
        print(f"{head}: {d.mean():+.4f} [{lo:+.4f}, {hi:+.4f}], p = {p:.2g}")


if __name__ == "__main__":
    main()
