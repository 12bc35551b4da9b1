"""How the learning benchmark's statistics behave under no true difference: the coverage of each 95% interval and the
rejection rate at 0.05 of each test, over simulated paired comparisons at 5, 10 and 20 seeds, for the paired-t
interval and test and the exact sign-flip test (`scpo.analysis.learning_stats`) beside the percentile bootstrap they
replaced (transcribed here: 10,000 resamples in the benchmark, `--resamples` here).

    python experiments/learning_benchmark/stats_calibration.py [--reps 20000] [--resamples 2000] \
        [--out experiments/learning_benchmark/results/stats_calibration.md]

Nulls: normal differences; the paired design's null with skewed AULCs (two methods drawn alike from a lognormal
around a shared seed effect: symmetric, heavy-tailed differences); and mean-zero skewed differences (gamma of shape
8, 4 and 1: skewness 0.71, 1 and 2). The test suite checks the first three cases
(tests/analysis/test_learning_stats_calibration.py); the stronger skews show where the t interval stops holding.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from scpo.analysis.learning_stats import paired_t, sign_flip_p

HERE = Path(__file__).resolve().parent


def draw(name: str, n: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """`reps` x `n` paired differences under the null `name`."""
    if name == "normal":
        return rng.normal(0.0, 0.05, size=(reps, n))
    if name == "exchangeable lognormal AULCs":
        seed_effect = rng.normal(0.0, 0.1, size=(reps, n))
        return (seed_effect + 0.05 * np.exp(rng.normal(0, 1, (reps, n)))) - (
            seed_effect + 0.05 * np.exp(rng.normal(0, 1, (reps, n)))
        )
    shape = {"gamma skewness 0.71": 8.0, "gamma skewness 1": 4.0, "gamma skewness 2": 1.0}[name]
    return 0.05 * (rng.gamma(shape, size=(reps, n)) - shape) / np.sqrt(shape)


def percentile_bootstrap(d: np.ndarray, resamples: int, rng: np.random.Generator, chunk: int = 500):
    """The replaced `paired_bootstrap`, row by row: 95% percentile interval and
    p = min(1, 2 min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (B + 1))."""
    lo, hi, p = [], [], []
    for start in range(0, len(d), chunk):
        part = d[start : start + chunk]
        idx = rng.integers(0, part.shape[1], size=(len(part), resamples, part.shape[1]))
        means = np.take_along_axis(part[:, None, :], idx, axis=2).mean(axis=2)
        q = np.quantile(means, [0.025, 0.975], axis=1)
        lo.append(q[0])
        hi.append(q[1])
        below, above = (means <= 0).sum(axis=1), (means >= 0).sum(axis=1)
        p.append(np.minimum(1.0, 2.0 * np.minimum(below + 1, above + 1) / (resamples + 1)))
    return np.concatenate(lo), np.concatenate(hi), np.concatenate(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20_000, help="comparisons per case (t); a fifth of it for the others")
    ap.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per comparison")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "stats_calibration.md")
    args = ap.parse_args()
    nulls = ["normal", "exchangeable lognormal AULCs", "gamma skewness 0.71", "gamma skewness 1", "gamma skewness 2"]
    lines = [
        "## The learning statistics under no true difference",
        "",
        f"Per case {args.reps} simulated paired comparisons for the paired t, {args.reps // 5} for the sign-flip test "
        f"(exact to 12 seeds, 4,000 sign patterns drawn at 20) and the percentile bootstrap ({args.resamples} "
        "resamples). Coverage: the share of 95% intervals holding "
        "0; rejection: the share of p <= 0.05. A calibrated 95% interval covers 0.95 and a test rejects 0.05.",
        "",
        "| null | seeds | t interval coverage | t-test rejection | sign-flip rejection | bootstrap coverage "
        "| bootstrap rejection |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in nulls:
        for n in (5, 10, 20):
            rng = np.random.default_rng([n, nulls.index(name)])
            d = draw(name, n, args.reps, rng)
            _, lo, hi, p_t = paired_t(d, axis=1)
            small = d[: args.reps // 5]
            p_sf = sign_flip_p(small, axis=1, permutations=min(2**n, 4000))  # exact to 12 seeds, then 4,000 drawn
            b_lo, b_hi, b_p = percentile_bootstrap(small, args.resamples, rng)
            lines.append(
                f"| {name} | {n} | {np.mean((lo <= 0) & (hi >= 0)):.3f} | {np.mean(p_t <= 0.05):.3f} | "
                f"{np.mean(p_sf <= 0.05):.3f} | {np.mean((b_lo <= 0) & (b_hi >= 0)):.3f} | {np.mean(b_p <= 0.05):.3f} |"
            )
            print(lines[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
