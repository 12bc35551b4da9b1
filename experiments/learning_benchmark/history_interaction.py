"""Does the oracle's gap to GRPO depend on how much history the prompt shows? The per-seed AULC differences
(oracle minus GRPO) of two benchmark invocations, one per `env.history_length`, each paired by seed within itself,
compared between the two (independent samples: the two have different warm starts): the difference of their means
with its 95 % Welch t interval, Welch's t-test p (scipy.stats.ttest_ind, equal_var=False), and the exact permutation
p of the difference of means over every split of the pooled per-seed differences into two sets of the two sizes
(scipy.stats.permutation_test, permutation_type="independent"; C(10, 5) = 252 splits for 5 + 5 seeds, so its
smallest value is 2 / 252).

    python experiments/learning_benchmark/history_interaction.py \
        --short experiments/learning_benchmark/results/runs.json \
        --long experiments/learning_benchmark/results/history6/runs.json \
        --out experiments/learning_benchmark/results/history6/interaction.md

Any other setting that two invocations differ in is compared the same way, named by `--what` and `--labels`
(e.g. `--what "two episode lengths" --labels "15 steps" "50 steps"`).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from scipy import stats

from scpo.testbeds.learning_tables import aulc_frame


def gap(runs_json: Path, method: str, reference: str) -> np.ndarray:
    """Per-seed AULC(method) - AULC(reference) on ALFWorld, seeds in order."""
    runs = aulc_frame(json.loads(runs_json.read_text()), threshold=0.5)
    by_seed = runs[runs.env == "alfworld"].pivot(index="seed", columns="method", values="aulc")
    return (by_seed[method] - by_seed[reference]).dropna().to_numpy(dtype=np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", type=Path, required=True, help="runs.json at the shorter history")
    ap.add_argument("--long", type=Path, required=True, help="runs.json at the longer history")
    ap.add_argument("--method", default="oracle")
    ap.add_argument("--reference", default="grpo")
    ap.add_argument("--what", default="two history lengths", help="what the two invocations differ in (the title)")
    ap.add_argument("--labels", nargs=2, default=["shorter history", "longer history"], metavar=("SHORT", "LONG"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    short, long = gap(args.short, args.method, args.reference), gap(args.long, args.method, args.reference)
    welch = stats.ttest_ind(long, short, equal_var=False)
    lo, hi = welch.confidence_interval(0.95)
    splits = math.comb(len(short) + len(long), len(short))
    perm = stats.permutation_test(
        (long, short),
        lambda a, b, axis=-1: np.mean(a, axis=axis) - np.mean(b, axis=axis),
        permutation_type="independent",
        vectorized=True,
        n_resamples=max(splits, 100_000),
        rng=0,
    )
    m, r = args.method, args.reference
    first, second = args.labels
    lines = [
        f"## AULC({m}) - AULC({r}) at {args.what}",
        "",
        "Per-seed differences, paired by seed within each invocation; the change between them (independent samples) "
        f"with a 95 % Welch t interval, Welch's t-test, and the exact permutation test over the {splits} splits of "
        "the pooled differences into the two sizes (two-sided).",
        "",
        "| runs | seeds | per-seed differences | mean |",
        "|---|---|---|---|",
        f"| {first} (`{args.short}`) | {len(short)} | {', '.join(f'{x:+.3f}' for x in short)} | {short.mean():+.3f} |",
        f"| {second} (`{args.long}`) | {len(long)} | {', '.join(f'{x:+.3f}' for x in long)} | {long.mean():+.3f} |",
        "",
        f"Change ({second} minus {first}): **{long.mean() - short.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]** (Welch t "
        f"95 % CI); Welch t = {welch.statistic:.2f}, p = {welch.pvalue:.3f}; permutation p = {perm.pvalue:.3f} "
        f"(smallest possible {2 / splits:.4f}).",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
