"""Wrong-sign credit of every estimator on the saved rollouts of trained runs, against the planner's oracle progress
q (the corridor, or ALFWorld), and SCPO's tau calibrated on the same rollouts (docs/algorithms.md, "Credit fidelity
against ground truth").

    python experiments/wrong_sign_credit/wrong_sign.py --runs grpo=RUN_DIR grpo=RUN_DIR2 \
        --methods grpo,rloo,gigpo,scpo,oracle,shuffled --taus 0.5,0.6,0.7,0.8,0.9,0.95,1.0 --scorers lexical \
        [--iterations 0,9] [--set KEY=VALUE ...] --out experiments/wrong_sign_credit/results/NAME.md

Every saved iteration of each run (or the positions `--iterations` of each run's saved ones) is labelled by replay with
its environment's planner (`scpo.testbeds.fidelity.trained_fidelity`), every estimator of `--methods` credits the same
rollouts, and the table gives, per estimator: the three wrong-sign shares (mean and 95% t-interval over the runs, all
groups), and pooled over every step of the failed trajectories, the rewarded mistakes #{A > 0, q < 0} / #{q < 0} and
the punished progress #{A < 0, q > 0} / #{q > 0}. Then SCPO's options swept over `--taus` x `--scorers` (step text and
match as configured) and `calibrate_tau` in mixed groups.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.analysis.fidelity_metrics import wrong_sign_counts
from scpo.analysis.learning_stats import paired_difference, t_band
from scpo.config import load_config, parse_overrides
from scpo.testbeds.fidelity import calibrate_tau, scpo_sweep, trained_fidelity

REPO = Path(__file__).resolve().parents[2]


def _cell(row: pd.Series, metric: str) -> str:
    mean, lo, hi = row[f"{metric}_mean"], row[f"{metric}_lo"], row[f"{metric}_hi"]
    if pd.isna(mean):
        return "n/a"
    return f"{mean:.3f}" if pd.isna(lo) else f"{mean:.3f} [{lo:.3f}, {hi:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", required=True, help="LABEL=RUN_DIR (the label: the policy's own method)")
    ap.add_argument("--methods", default="grpo,rloo,gigpo,scpo,oracle,shuffled")
    ap.add_argument("--taus", default="0.5,0.6,0.7,0.8,0.9,0.95,1.0")
    ap.add_argument("--scorers", default="lexical")
    ap.add_argument("--iterations", default="", help="positions of each run's saved iterations (empty: all)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="dotted overrides (the runs' env options)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    t0 = time.perf_counter()
    cfg = load_config(REPO / "params.yaml", profile="cpu", overrides=parse_overrides(args.sets))
    runs: dict[str, list[Path]] = {}
    for item in args.runs:
        label, _, folder = item.partition("=")
        runs.setdefault(label, []).append(Path(folder))
    methods = [m.strip() for m in args.methods.split(",")]
    iterations = [int(i) for i in args.iterations.split(",")] if args.iterations else None
    res = trained_fidelity(cfg, runs, methods=methods, iterations=iterations, progress=False)

    summary = res.summary[res.summary["kind"] == "all"].set_index("estimator")
    pooled = {
        m: dict.fromkeys(("n_pos", "n_pos_wrong", "n_neg", "n_neg_wrong", "n_label_pos", "n_label_neg"), 0)
        for m in methods
    }
    n_steps = n_failed = 0
    for name, batch in res.batches.items():
        failed = ~batch.won
        n_steps, n_failed = n_steps + batch.n_rows, n_failed + int(failed.sum())
        for m in methods:
            for k, v in wrong_sign_counts(res.advantages[name][m], batch.oracle_progress, mask=failed).items():
                pooled[m][k] += v
    lines = [
        f"## Wrong-sign credit against the planner's q: {', '.join(f'{k} x {len(v)} runs' for k, v in runs.items())}",
        "",
        f"{len(res.batches)} saved iterations, {n_steps} steps ({n_failed} of failed trajectories). Shares: mean [95% "
        "t-interval] over the runs, all groups; rewarded mistakes and punished progress: pooled over the steps of "
        "failed trajectories (hits / denominator).",
        "",
        "| estimator | wrong_sign | wrong_sign_pos (q < 0 given A > 0) | wrong_sign_neg (q > 0 given A < 0) "
        "| failed steps: A > 0 given q < 0 | failed steps: A < 0 given q > 0 |",
        "|---|---|---|---|---|---|",
    ]
    for m in methods:
        row, c = summary.loc[m], pooled[m]
        rewarded = (
            f"{c['n_pos_wrong'] / c['n_label_neg']:.3f} ({c['n_pos_wrong']} / {c['n_label_neg']})"
            if c["n_label_neg"]
            else "n/a"
        )
        punished = (
            f"{c['n_neg_wrong'] / c['n_label_pos']:.3f} ({c['n_neg_wrong']} / {c['n_label_pos']})"
            if c["n_label_pos"]
            else "n/a"
        )
        lines.append(
            f"| {m} | {_cell(row, 'wrong_sign')} | {_cell(row, 'wrong_sign_pos')} | {_cell(row, 'wrong_sign_neg')} "
            f"| {rewarded} | {punished} |"
        )
    if "scpo" in methods:
        lines += tau_section(cfg, res, args)
    lines += ["", f"{time.perf_counter() - t0:.0f} s.", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


def tau_section(cfg, res, args) -> list[str]:
    """SCPO's options swept over --taus x --scorers on the same rollouts, in mixed groups: each run's mean over its
    saved iterations, then per tau the mean over runs with its 95% t-interval; `calibrate_tau` on the per-run means
    picks the least-wrong-sign tau; the default tau minus that tau, paired over the runs (paired t CI, exact
    sign-flip p)."""
    grid = [{"scorer": sc.strip(), "tau": float(t)} for sc in args.scorers.split(",") for t in args.taus.split(",")]
    sweep = scpo_sweep(cfg, res.batches, grid, progress=False)
    sweep = sweep[sweep["kind"] == "mixed"].assign(run=lambda d: d["source"].str.rsplit("/", n=1).str[0])
    cols = ["wrong_sign_mean", "wrong_sign_pos_mean", "wrong_sign_neg_mean", "auc_mean"]
    per_run = sweep.groupby(["scorer", "tau", "run"], sort=False)[cols].mean().reset_index()
    cal = calibrate_tau(per_run.assign(kind="mixed", wrong_sign_std=np.nan, n_seeds=1), cfg.credit.scpo)
    default = cfg.credit.scpo.tau
    mixed = res.summary[res.summary["kind"] == "mixed"].set_index("estimator")
    beside = ", ".join(
        f"{m} {_cell(mixed.loc[m], 'wrong_sign')}" for m in ("grpo", "gigpo", "scpo") if m in mixed.index
    )
    lines = [
        "",
        f"### SCPO's tau on these rollouts (mixed groups; step text {cfg.credit.scpo.step_text}, match "
        f"{cfg.credit.scpo.match}; default tau {default:g})",
        "",
        f"wrong_sign in the same mixed groups at the configured options, mean [95% t] over the runs: {beside}. Per "
        "tau: each run's mean over its saved iterations, then mean [95% t-interval] over the runs.",
        "",
        "| scorer | tau | wrong_sign | wrong_sign_pos | wrong_sign_neg | AUC |",
        "|---|---|---|---|---|---|",
    ]
    for (scorer, tau), part in per_run.groupby(["scorer", "tau"], sort=False):
        cells = []
        for c in cols:
            v = part[c].to_numpy(dtype=float)
            mean, lo, hi = t_band(v[:, None])
            cells.append(f"{mean[0]:.3f} [{lo[0]:.3f}, {hi[0]:.3f}]")
        lines.append(f"| {scorer} | {tau:g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| scorer | least wrong-sign tau | its wrong_sign | best-AUC tau | default's wrong_sign | default minus the "
        "least, paired over runs [95% t CI], sign-flip p | calibrated |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in cal.itertuples():
        part = per_run[per_run["scorer"] == r.scorer].pivot(index="run", columns="tau", values="wrong_sign_mean")
        d = (part[default] - part[r.tau_least_wrong_sign]).to_numpy(dtype=float)
        if np.ptp(d) == 0 and d[0] == 0:
            gap = "0 (the same tau)"
        else:
            s = paired_difference(d)
            gap = f"{s['mean']:+.3f} [{s['lo']:+.3f}, {s['hi']:+.3f}], p {s['p_signflip']:.4f}"
        lines.append(
            f"| {r.scorer} | {r.tau_least_wrong_sign:g} | {r.wrong_sign_at_least:.3f} | {r.tau_best_auc:g} | "
            f"{r.wrong_sign_at_default:.3f} | {gap} | {r.calibrated} |"
        )
    return lines


if __name__ == "__main__":
    main()
