"""Does the oracle's gap to GRPO depend on how much history the prompt shows? The per-seed AULC differences
(oracle minus GRPO) of two benchmark invocations, one per `env.history_length`, each paired by seed within itself,
compared between the two: the difference of their means, a 95 % percentile bootstrap CI (seeds resampled within
each invocation, independently: the two have different warm starts) and Welch's t-test (scipy).

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
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--what", default="two history lengths", help="what the two invocations differ in (the title)")
    ap.add_argument("--labels", nargs=2, default=["shorter history", "longer history"], metavar=("SHORT", "LONG"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    short, long = gap(args.short, args.method, args.reference), gap(args.long, args.method, args.reference)
    rng = np.random.default_rng(0)
    boot = long[rng.integers(0, len(long), (args.resamples, len(long)))].mean(1) - short[
        rng.integers(0, len(short), (args.resamples, len(short)))
    ].mean(1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    welch = stats.ttest_ind(long, short, equal_var=False)
    m, r = args.method, args.reference
    first, second = args.labels
    lines = [
        f"## AULC({m}) - AULC({r}) at {args.what}",
        "",
        f"Per-seed differences, paired by seed within each invocation; the change between them with a 95 % bootstrap "
        f"CI ({args.resamples} resamples of the seeds of each, independently) and Welch's t-test.",
        "",
        "| runs | seeds | per-seed differences | mean |",
        "|---|---|---|---|",
        f"| {first} (`{args.short}`) | {len(short)} | {', '.join(f'{x:+.3f}' for x in short)} | {short.mean():+.3f} |",
        f"| {second} (`{args.long}`) | {len(long)} | {', '.join(f'{x:+.3f}' for x in long)} | {long.mean():+.3f} |",
        "",
        f"Change ({second} minus {first}): **{long.mean() - short.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]**; Welch t = "
        f"{welch.statistic:.2f}, p = {welch.pvalue:.3f}.",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
