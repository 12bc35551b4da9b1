"""The Sokoban learning experiment's own summary (experiments/sokoban_learning: summary.md, learning_curves.png, the
PPO critic's record): per (start, method) AULC and final success with 95% t-intervals over seeds, every method's
paired AULC difference from GRPO (paired-t CI and p, exact sign-flip p, Holm within the start's family, the MDE from
the comparison's own sd) and `EXTRA_COMPARISONS`, each a family of one; the markdown of those with the gradient
fidelity beside; the learning-curve figure; PPO's critic as it learns. Statistics: `scpo.analysis.learning_stats`.
The pipeline's tables of the same runs: `scpo.testbeds.sokoban_tables`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "EXTRA_COMPARISONS",
    "comparisons",
    "critic_summary",
    "critic_markdown",
    "critic_figure",
    "markdown",
    "figure",
]

EXTRA_COMPARISONS = [("scpo", "gigpo"), ("ppo", "exact_advantage")]  # besides every method against GRPO


def comparisons(curves: pd.DataFrame, reference: str = "grpo") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Per (start, method): AULC and final success (mean and 95% t-interval over seeds); per (start, method !=
    reference): the paired difference of AULC from the reference (paired t CI and p, exact sign-flip p, both
    Holm-adjusted within the start's family, MDE from the comparison's own sd), and each of EXTRA_COMPARISONS as a
    family of its own; per run: AULC and final success."""
    from scpo.analysis.learning_stats import aulc, holm, paired_difference, t_band

    per_run = (
        curves.groupby(["start", "method", "seed"])
        .apply(
            lambda c: pd.Series(
                {
                    "aulc": aulc(c["iteration"], c["success"]),
                    "final": float(c.sort_values("iteration")["success"].iloc[-1]),
                }
            ),
            include_groups=False,
        )
        .reset_index()
    )
    rows, diffs = [], []
    for (start, method), part in per_run.groupby(["start", "method"], sort=False):
        row = {"start": start, "method": method, "seeds": len(part)}
        for col in ("aulc", "final"):
            mean, lo, hi = t_band(part.sort_values("seed")[col].to_numpy()[:, None])
            row.update({col: float(mean[0]), f"{col}_lo": float(lo[0]), f"{col}_hi": float(hi[0])})
        rows.append(row)
    for start, part in per_run.groupby("start", sort=False):
        wide = part.pivot(index="seed", columns="method", values="aulc")
        family = []
        for method in [m for m in wide.columns if m != reference]:
            d = (wide[method] - wide[reference]).to_numpy()
            family.append({"start": start, "method": method, "reference": reference, **paired_difference(d)})
        for row, p, p_t in zip(family, holm([r["p_signflip"] for r in family]), holm([r["p_t"] for r in family])):
            row["p_signflip_holm"], row["p_t_holm"] = float(p), float(p_t)
        diffs.extend(family)
        for method, other in EXTRA_COMPARISONS:  # a family of one each
            if {method, other} <= set(wide.columns):
                d = paired_difference((wide[method] - wide[other]).to_numpy())
                diffs.append(
                    {"start": start, "method": method, "reference": other, **d}
                    | {"p_signflip_holm": d["p_signflip"], "p_t_holm": d["p_t"]}
                )
    return pd.DataFrame(rows), pd.DataFrame(diffs), per_run


def critic_summary(critic: pd.DataFrame, probes: pd.DataFrame, curves: pd.DataFrame, every: int) -> pd.DataFrame:
    """Per (start, iteration bin of `every` iterations): the PPO critic's value loss, explained variance on the
    batches whose returns vary, and its exact `value_fit` and `value_error` at the bin's first iteration; the probes
    of the batch at that iteration: each probed method's cos_panel and cos_tasks (a zero update counts 0), PPO's
    corr_exact, and the paired difference PPO - GRPO of cos_tasks. Mean and 95% t-interval over seeds, and the
    median (where the policy rarely wins, R V^pi barely varies and `value_fit` of a critic a little off is far below 0
    on some seeds); a last row per start ("all") averages each seed over the bins first."""
    from scpo.analysis.learning_stats import paired_difference, t_band

    c = critic.assign(bin=critic["iteration"] // every * every)
    c["ev"] = c["explained_variance"].where(c["returns_vary"])
    per_seed = c.groupby(["start", "seed", "bin"])[["value_loss", "ev"]].mean()
    ppo = curves[curves["method"] == "ppo"].set_index(["start", "seed", "iteration"])
    at = per_seed.index.set_names(["start", "seed", "iteration"])
    for col in ("value_fit", "value_error"):
        per_seed[col] = ppo[col].reindex(at).to_numpy()
    p = probes.copy()
    p.loc[p["norm"] == 0, ["cos_panel", "cos_tasks"]] = 0.0
    wide = p.pivot_table(index=["start", "seed", "iteration"], columns="method", values=["cos_panel", "cos_tasks"])
    wide.columns = [f"{col}_{m}" for col, m in wide.columns]
    corr = p[p["method"] == "ppo"].set_index(["start", "seed", "iteration"])["corr_exact"]
    wide["corr_exact_ppo"] = corr
    wide["d_tasks"] = wide["cos_tasks_ppo"] - wide["cos_tasks_grpo"]
    wide = wide.rename_axis(["start", "seed", "bin"])
    joined = per_seed.join(wide[wide.index.get_level_values("bin") % every == 0], how="left").reset_index()
    rows = []
    for start, part in joined.groupby("start", sort=False):
        overall = part.drop(columns=["start", "bin"]).groupby("seed").mean().reset_index().assign(bin="all")
        for b, q in [*part.groupby("bin"), ("all", overall)]:
            row = {"start": start, "iteration": b, "seeds": q["seed"].nunique()}
            for col in [x for x in q.columns if x not in ("start", "seed", "bin")]:
                x = q[col].dropna().to_numpy(float)
                row[f"{col}_n"], row[f"{col}_median"] = len(x), float(np.median(x)) if len(x) else np.nan
                if col == "d_tasks" and len(x) > 1:
                    d = paired_difference(x)
                    row.update({col: d["mean"], f"{col}_lo": d["lo"], f"{col}_hi": d["hi"], f"{col}_p": d["p_t"]})
                    continue
                mean, lo, hi = t_band(x[:, None]) if len(x) > 1 else ([np.nan], [np.nan], [np.nan])
                row.update({col: float(mean[0]), f"{col}_lo": float(lo[0]), f"{col}_hi": float(hi[0])})
            rows.append(row)
    return pd.DataFrame(rows)


def critic_markdown(summary: pd.DataFrame) -> str:
    """`critic_summary` as a markdown table per start."""

    def cell(r, col, fmt="+.3f"):
        return f"{r[col]:{fmt}} [{r[col + '_lo']:{fmt}}, {r[col + '_hi']:{fmt}}]" if np.isfinite(r[col]) else "n/a"

    lines = []
    for start, part in summary.groupby("start", sort=False):
        lines += [
            f"#### PPO's critic and its update as it learns: {start} start",
            "",
            "| iterations | value loss | explained var. (batches whose returns vary) | V vs R V^pi: explained var. "
            "(exact, on-policy) | rms error | "
            "corr(A_PPO, A^pi) | cos tasks PPO | GRPO | exact_advantage | PPO - GRPO [p] | cos panel PPO | GRPO | "
            "exact_advantage |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for _, r in part.iterrows():
            ev = f"{cell(r, 'ev')} (n {int(r['ev_n'])})" if np.isfinite(r["ev"]) else "n/a"
            diff = f"{cell(r, 'd_tasks')} [{r['d_tasks_p']:.2g}]" if np.isfinite(r.get("d_tasks_p", np.nan)) else ""
            lines.append(
                f"| {r['iteration']} | {cell(r, 'value_loss', '.3f')} | {ev} | {cell(r, 'value_fit')}, median "
                f"{r['value_fit_median']:+.2f} | {cell(r, 'value_error', '.2f')} | "
                f"{cell(r, 'corr_exact_ppo')} | {cell(r, 'cos_tasks_ppo')} | {cell(r, 'cos_tasks_grpo')} | "
                f"{cell(r, 'cos_tasks_exact_advantage')} | {diff} | {cell(r, 'cos_panel_ppo')} | "
                f"{cell(r, 'cos_panel_grpo')} | {cell(r, 'cos_panel_exact_advantage')} |"
            )
        lines.append("")
    return "\n".join(lines)


def critic_figure(summary: pd.DataFrame, path: Path) -> None:
    """Per start: the critic's fit (exact value_fit: the median over seeds; batch explained variance) and the cosines
    of PPO, GRPO and the exact advantage with the batch tasks' gradient, over iterations (mean and 95% t-band over
    seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts = summary["start"].unique()
    fig, axes = plt.subplots(2, len(starts), figsize=(6 * len(starts), 7), squeeze=False)
    for k, start in enumerate(starts):
        part = summary[(summary["start"] == start) & (summary["iteration"].astype(str) != "all")]
        x = part["iteration"].astype(int)
        panels = [
            (axes[0, k], [("value_fit", "V vs R V^pi (exact)"), ("ev", "explained var. (batches whose returns vary)")]),
            (axes[1, k], [(f"cos_tasks_{m}", m) for m in ("ppo", "grpo", "exact_advantage")]),
        ]
        for ax, series in panels:
            for col, label in series:
                if col == "value_fit":  # a few seeds' values are far below 0 where R V^pi barely varies: the median
                    ax.plot(x, part[f"{col}_median"], marker="o", ms=3, label=f"{label}, median over seeds")
                    continue
                ax.plot(x, part[col], marker="o", ms=3, label=label)
                ax.fill_between(x, part[f"{col}_lo"], part[f"{col}_hi"], alpha=0.15)
            ax.axhline(0, color="grey", lw=0.8)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        axes[0, k].set(title=f"{start} start: PPO's critic", ylabel="explained variance", ylim=(-1.5, 1))
        axes[1, k].set(xlabel="iteration", ylabel="cos(update, grad J of the batch's rooms)")
    fig.suptitle("Sokoban: PPO's critic and its update along its runs (mean, 95% t-band over seeds)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(table: pd.DataFrame, diffs: pd.DataFrame, fid: pd.DataFrame, corr: list[dict]) -> str:
    """Per start: the table of every method (fidelity, AULC, final success, difference from GRPO), the extra
    comparisons and the rank correlations of fidelity with AULC."""
    lines = []
    for start in table["start"].unique():
        t = table[table["start"] == start].sort_values("aulc", ascending=False)
        d = diffs[(diffs["start"] == start) & (diffs["reference"] == "grpo")].set_index("method")
        f = fid[fid["start"] == start].set_index("method")
        lines += [
            f"### {start}",
            "",
            "| estimator | cos panel | cos tasks | AULC | final success | AULC - GRPO's [95% paired t] | p_t | "
            "p sign-flip | p sign-flip Holm | MDE |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for _, r in t.iterrows():
            m = r["method"]
            cos = f"{f.loc[m, 'cos_panel_mean']:+.3f} | {f.loc[m, 'cos_tasks_mean']:+.3f}" if m in f.index else " | "
            diff = ""
            if m in d.index:
                x = d.loc[m]
                diff = (
                    f"{x['mean']:+.3f} [{x['lo']:+.3f}, {x['hi']:+.3f}] | {x['p_t']:.2g} | {x['p_signflip']:.2g} | "
                    f"{x['p_signflip_holm']:.2g} | {x['mde']:.3f}"
                )
            else:
                diff = " | | | | "
            lines.append(
                f"| {m} | {cos} | {r['aulc']:.3f} [{r['aulc_lo']:.3f}, {r['aulc_hi']:.3f}] | "
                f"{r['final']:.3f} [{r['final_lo']:.3f}, {r['final_hi']:.3f}] | {diff} |"
            )
        lines.append("")
        for _, x in diffs[(diffs["start"] == start) & (diffs["reference"] != "grpo")].iterrows():
            lines.append(
                f"AULC {x['method']} - {x['reference']}: {x['mean']:+.3f} [{x['lo']:+.3f}, {x['hi']:+.3f}] "
                f"(95% paired t), p_t {x['p_t']:.2g}, sign-flip p {x['p_signflip']:.2g}, MDE {x['mde']:.3f}."
            )
        for c in (c for c in corr if c["start"] == start):
            lines.append(
                f"Rank correlation over the {c['n_methods']} estimators between fidelity ({c['fidelity']}) and mean "
                f"AULC: Spearman rho {c['rho']:+.3f}, permutation p {c['p']:.3g} "
                f"({'exact' if c['exact'] else 'pairings drawn'}; floor {c['p_floor']:.2g})."
            )
        lines.append("")
    return "\n".join(lines)


def figure(curves: pd.DataFrame, path: Path) -> None:
    """Per start: every method's exact panel success over iterations, mean and 95% t-band over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scpo.analysis.learning_stats import t_band

    starts = curves["start"].unique()
    fig, axes = plt.subplots(1, len(starts), figsize=(6 * len(starts), 4.5), squeeze=False)
    axes = axes[0]
    for ax, start in zip(axes, starts):
        part = curves[curves["start"] == start]
        for method, c in part.groupby("method", sort=False):
            wide = c.pivot(index="seed", columns="iteration", values="success")
            mean, lo, hi = t_band(wide.to_numpy())
            ax.plot(wide.columns, mean, label=method)
            ax.fill_between(wide.columns, lo, hi, alpha=0.15)
        n = part["seed"].nunique()
        ax.set(title=f"{start} start ({n} seeds)", xlabel="iteration", ylabel="exact panel success (sampled, T=1)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Sokoban 6x6, 16 rooms with V* >= 4: mean and 95% t-band over seeds", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
