"""Tables and figures of the learning benchmark (notebook 08, `scpo.testbeds.learning`), under reports/.

reports/tables/learning_ranking.{csv,md}       every method per environment: AULC with its 95% CI, final panel success,
                                               unseen success, task score, iterations to the threshold, rank
reports/tables/learning_differences.{csv,md}   each method's AULC minus each reference method's, paired over seeds:
                                               mean, 95% bootstrap CI, bootstrap p, Holm-adjusted p per family
reports/tables/learning_power.{csv,md}         the smallest AULC difference the design detects at 80% power
reports/tables/learning_by_type.{csv,md}       final panel success per task type (hard types marked †)
reports/tables/learning_fidelity.{csv,md}      Spearman's rho of credit fidelity AUC and learning AULC, with its CI
reports/tables/learning_curves.csv             the panel success of every run at every evaluation point
reports/figures/learning_curves_<env>.png      success on the panel vs iteration, mean and 95% band over seeds
reports/figures/learning_differences_<env>.png AULC differences from the first reference method, with CIs
The statistics: `scpo.analysis.learning_stats` (docs/algorithms.md, "Measuring learning").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.analysis.learning_stats import (
    aulc,
    first_reach,
    holm,
    minimum_detectable_difference,
    paired_bootstrap,
    spearman_bootstrap,
    t_band,
)
from scpo.config import Config
from scpo.credit.registry import METHODS
from scpo.pipeline.layout import ReportLayout
from scpo.tables.success import write_table
from scpo.testbeds.learning import FIDELITY_ENVS, left_out

__all__ = [
    "fidelity_from_table",
    "curves_frame",
    "aulc_frame",
    "ranking_table",
    "differences_table",
    "power_table",
    "by_type_table",
    "fidelity_correlation",
    "plot_curves",
    "plot_differences",
    "setup_label",
    "write_learning_report",
]

BOUNDS = {name: spec.bound for name, spec in METHODS.items() if spec.bound}  # the registry's bounds and references


def fidelity_from_table(path: str | Path) -> dict[str, float]:
    """Per estimator, its credit fidelity AUC from the fidelity benchmark's table (notebook 07's credit_fidelity.csv:
    all groups, mean over its noise levels)."""
    table = pd.read_csv(path)
    return table[table["kind"] == "all"].groupby("estimator")["auc_mean"].mean().to_dict()


def curves_frame(results: Sequence[dict]) -> pd.DataFrame:
    """One row per run and evaluation point: env, method, seed, iteration, success, task_score, n."""
    rows = [
        {
            "env": r["env"],
            "method": r["method"],
            "seed": r["seed"],
            "iteration": c["iteration"],
            "success": c["success"],
            "task_score": c["task_score"],
            "n": c["n"],
        }
        for r in results
        for c in r["curve"]
    ]
    return pd.DataFrame(rows)


def aulc_frame(results: Sequence[dict], threshold: float) -> pd.DataFrame:
    """One row per run: AULC of the panel success and of the task score, the final values, the unseen success, the
    first iteration reaching `threshold`."""
    rows = []
    for r in results:
        it = [c["iteration"] for c in r["curve"]]
        succ = [c["success"] for c in r["curve"]]
        score = [c["task_score"] for c in r["curve"]]
        rows.append(
            {
                "env": r["env"],
                "method": r["method"],
                "seed": r["seed"],
                "aulc": aulc(it, succ),
                "aulc_task_score": aulc(it, score),
                "final_success": succ[int(np.argmax(it))],
                "final_task_score": score[int(np.argmax(it))],
                "unseen_success": (r.get("unseen") or {}).get("success", np.nan),
                "first_reach": first_reach(it, succ, threshold),
            }
        )
    return pd.DataFrame(rows)


def _mean_ci(values: np.ndarray) -> tuple[float, float, float]:
    mean, lo, hi = t_band(np.asarray(values, dtype=np.float64)[:, None])
    return float(mean[0]), float(lo[0]), float(hi[0])


def ranking_table(runs: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Per env and method (seed means): AULC with its 95% t-interval over seeds, final panel success, unseen success,
    final task score, the median first reach of `threshold` (NaN where fewer than half the seeds reach it), rank."""
    rows = []
    for (env, method), part in runs.groupby(["env", "method"], sort=False):
        m, lo, hi = _mean_ci(part["aulc"].to_numpy())
        reach = part["first_reach"].to_numpy()
        rows.append(
            {
                "env": env,
                "method": method,
                "bound": BOUNDS.get(method, ""),
                "seeds": len(part),
                "aulc": m,
                "aulc_lo": lo,
                "aulc_hi": hi,
                "final_success": part["final_success"].mean(),
                "unseen_success": part["unseen_success"].mean(),
                "final_task_score": part["final_task_score"].mean(),
                "aulc_task_score": part["aulc_task_score"].mean(),
                f"iterations_to_{threshold:g}": float(np.nanmedian(reach))
                if np.sum(np.isfinite(reach)) * 2 >= len(reach)
                else np.nan,
            }
        )
    out = pd.DataFrame(rows)
    out["rank"] = out.groupby("env")["aulc"].rank(ascending=False, method="min").astype(int)
    return out.sort_values(["env", "rank"]).reset_index(drop=True)


def _paired(runs: pd.DataFrame, env: str, method: str, ref: str, column: str = "aulc") -> np.ndarray:
    a = runs[(runs.env == env) & (runs.method == method)].set_index("seed")[column]
    b = runs[(runs.env == env) & (runs.method == ref)].set_index("seed")[column]
    seeds = sorted(set(a.index) & set(b.index))
    return (a.loc[seeds] - b.loc[seeds]).to_numpy(dtype=np.float64)


def differences_table(runs: pd.DataFrame, references: Sequence[str], n_resamples: int = 10_000) -> pd.DataFrame:
    """Every method's AULC minus each reference's, seed by seed: mean, 95% percentile bootstrap CI, two-sided bootstrap
    p, and Holm's adjusted p within each (env, reference) family; `significant`: adjusted p < 0.05."""
    rows = []
    for env in runs["env"].unique():
        methods = list(dict.fromkeys(runs[runs.env == env]["method"]))
        for ref in references:
            if ref not in methods:
                continue
            family = []
            for m in methods:
                if m == ref:
                    continue
                d = _paired(runs, env, m, ref)
                b = paired_bootstrap(d, n_resamples=n_resamples, seed=len(family))
                family.append({"env": env, "reference": ref, "method": m, "bound": BOUNDS.get(m, ""), **b})
            for row, p in zip(family, holm([r["p"] for r in family])):
                row["p_holm"] = float(p)
                row["significant"] = bool(p < 0.05)
            rows += family
    return pd.DataFrame(rows)


def power_table(runs: pd.DataFrame, references: Sequence[str]) -> pd.DataFrame:
    """Per env and reference: the pooled standard deviation of the paired AULC differences (root mean of their
    variances over methods), the seed count, and the minimum detectable difference at alpha 0.05, power 0.8."""
    rows = []
    for env in runs["env"].unique():
        methods = list(dict.fromkeys(runs[runs.env == env]["method"]))
        for ref in references:
            if ref not in methods:
                continue
            diffs = [_paired(runs, env, m, ref) for m in methods if m != ref]
            diffs = [d for d in diffs if len(d) >= 2]
            if not diffs:
                continue
            sd = float(np.sqrt(np.mean([np.var(d, ddof=1) for d in diffs])))
            n = min(len(d) for d in diffs)
            rows.append(
                {
                    "env": env,
                    "reference": ref,
                    "seeds": n,
                    "sd_paired_difference": sd,
                    "mde_80_power": minimum_detectable_difference(sd, n),
                }
            )
    return pd.DataFrame(rows)


def by_type_table(results: Sequence[dict], hard: Sequence[str]) -> pd.DataFrame:
    """Final panel success per task type (mean over seeds), one row per env and method; hard types get '†'."""
    rows = []
    for r in results:
        last = max(r["curve"], key=lambda c: c["iteration"])
        for tt, v in last["per_type"].items():
            rows.append({"env": r["env"], "method": r["method"], "seed": r["seed"], "task_type": tt, "success": v})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    wide = df.groupby(["env", "method", "task_type"], sort=False)["success"].mean().unstack("task_type")
    wide.columns = [f"{c} †" if any(h in c for h in hard) else c for c in wide.columns]
    return wide.reset_index()


def fidelity_correlation(
    runs: pd.DataFrame,
    fidelity: dict[str, dict[str, float]],
    n_resamples: int = 10_000,
    envs: Sequence[str] = FIDELITY_ENVS,
) -> pd.DataFrame:
    """Spearman's rho between each source's per-method fidelity AUC (`fidelity`: {source: {method: AUC}}) and the
    methods' learning AULC, with a 95% CI from resampling the paired seeds; per env of `envs` and source. The fidelity
    sources score credit on ALFWorld rollouts (`FIDELITY_ENVS`), so the runs of another environment get no row."""
    rows = []
    for env in [e for e in runs["env"].unique() if e in envs]:
        per_seed = {
            m: part.sort_values("seed")["aulc"].to_numpy() for m, part in runs[runs.env == env].groupby("method")
        }
        for source, auc in fidelity.items():
            methods = [m for m in auc if m in per_seed and np.isfinite(auc[m])]
            if len(methods) < 3:
                continue
            out = spearman_bootstrap({m: auc[m] for m in methods}, per_seed, n_resamples=n_resamples)
            rows.append({"env": env, "fidelity_source": source, "methods": ", ".join(methods), **out})
    columns = ["env", "fidelity_source", "methods", "rho", "lo", "hi", "n_methods", "n_seeds"]
    return pd.DataFrame(rows, columns=columns)


def setup_label(cfg: Config, env: str) -> str:
    """What the curves come from: profile, episode length and history (and ALFWorld's revealed goal objects), panel,
    seeds, iterations, episodes, SCPO's settings."""
    L, s, opts = cfg.learning, cfg.credit.scpo, getattr(cfg.env, env)
    revealed = " · goal objects' places in the task line" if getattr(opts, "reveal_goal_objects", False) else ""
    return (
        f"{env} · profile {cfg.profile} · episodes of at most {opts.max_steps} steps, "
        f"{cfg.env.history_length} past steps in the prompt{revealed} · panel of {L.panel_size} training tasks, "
        f"{L.n_tasks} x {cfg.rollout.group_size} rollouts per iteration · {len(L.seeds)} paired seeds · evaluated on "
        f"{L.eval_episodes_per_task} episodes per panel task at T={cfg.eval.temperature:g} · "
        f"SCPO revision {s.revision} (mode {s.mode}), scorer {s.scorer}, tau {s.tau:g}"
    )


def _wrap(label: str, width: int) -> str:
    """`label` broken at its ' · ' separators into lines of at most `width` characters (a title the figure shows
    whole)."""
    lines, line = [], ""
    for part in label.split(" · "):
        if line and len(line) + 3 + len(part) > width:
            lines.append(line)
            line = part
        else:
            line = f"{line} · {part}" if line else part
    return "\n".join([*lines, line])


def _style(method: str) -> dict:
    if method == "oracle":
        return {"color": "black", "linestyle": "--", "linewidth": 2.2}
    if method == "shuffled":
        return {"color": "grey", "linestyle": ":", "linewidth": 2.2}
    return {"linewidth": 2.6 if method.startswith("scpo") else 1.4}


def plot_curves(curves: pd.DataFrame, env: str, label: str, path: Path) -> Path:
    """Panel success vs iteration, one line per method (mean over seeds) with its 95% t-band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = curves[curves.env == env]
    fig, ax = plt.subplots(figsize=(9, 5.2))
    for method, part in data.groupby("method", sort=False):
        wide = part.pivot(index="seed", columns="iteration", values="success")
        mean, lo, hi = t_band(wide.to_numpy())
        line = ax.plot(wide.columns, mean, label=method, **_style(method))[0]
        ax.fill_between(wide.columns, lo, hi, color=line.get_color(), alpha=0.12)
    ax.set_xlabel("RL iteration")
    ax.set_ylabel("success on the panel (fixed episode list)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    ax.set_title(f"Learning curves, mean and 95% band over seeds\n{_wrap(label, 110)}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_differences(diffs: pd.DataFrame, env: str, reference: str, label: str, path: Path) -> Path:
    """Each method's paired AULC difference from `reference` with its 95% bootstrap CI (filled: Holm-significant)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = diffs[(diffs.env == env) & (diffs.reference == reference)].sort_values("mean")
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(data) + 1.6))
    y = np.arange(len(data))
    ax.errorbar(data["mean"], y, xerr=[data["mean"] - data["lo"], data["hi"] - data["mean"]], fmt="none", ecolor="grey")
    ax.scatter(
        data["mean"], y, c=["black" if s else "white" for s in data["significant"]], edgecolors="black", zorder=3
    )
    ax.axvline(0, color="red", linewidth=1)
    ax.set_yticks(y, data["method"])
    ax.set_xlabel(f"AULC minus {reference}'s (paired over seeds; filled: Holm-adjusted p < 0.05)")
    ax.set_title(f"Differences from {reference}, 95% bootstrap CI\n{_wrap(label, 95)}", fontsize=8)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_learning_report(
    cfg: Config, results: Sequence[dict], reports_dir: str | Path, fidelity: dict[str, dict[str, float]] | None = None
) -> dict[str, pd.DataFrame]:
    """Every table and figure of the module docstring; -> the tables by name."""
    layout = ReportLayout(Path(reports_dir))
    L = cfg.learning
    curves = curves_frame(results)
    runs = aulc_frame(results, L.threshold)
    tables = {
        "learning_ranking": ranking_table(runs, L.threshold),
        "learning_differences": differences_table(runs, L.reference_methods, L.bootstrap),
        "learning_power": power_table(runs, L.reference_methods),
        "learning_by_type": by_type_table(results, cfg.report.hard_task_types),
    }
    if fidelity:
        tables["learning_fidelity"] = fidelity_correlation(runs, fidelity, L.bootstrap)
    skipped = "; ".join(f"{env}: {', '.join(m)} (no planner)" for env, m in left_out(cfg).items() if m)
    notes = {
        "learning_ranking": (
            f"AULC = normalised area under the panel-success curve (evaluated at iterations 0, {L.eval_every}, ...,"
            f" {L.iterations}); 95% t-interval over {len(L.seeds)} paired seeds. unseen_success: the final policy on "
            f"{', '.join(f'{e} {s}' for e, s in L.unseen_split.items())}. Bounds: oracle (ground-truth credit from "
            f"the planner), shuffled (GRPO's advantages permuted within each group). Left out: {skipped or 'none'}."
        ),
        "learning_differences": (
            "d_s = AULC(method, seed s) - AULC(reference, seed s); mean, 95% percentile bootstrap CI over seeds, "
            "two-sided bootstrap p, Holm-adjusted within each (env, reference) family."
        ),
        "learning_power": "MDE: the smallest mean paired AULC difference a paired t-test detects at alpha 0.05 with "
        "80% power, from the pooled standard deviation of the paired differences.",
        "learning_by_type": "Final panel success per task type, mean over seeds; † = hard multi-step type.",
        "learning_fidelity": "Spearman's rho between each estimator's credit fidelity AUC and its learning AULC (mean "
        "over seeds), 95% CI from resampling the paired seeds of the learning runs.",
    }
    for name, df in tables.items():
        csv, md = layout.table(name)
        write_table(df, csv, md, name.replace("_", " ").capitalize(), note=notes.get(name, ""))
    curves.to_csv(layout.tables / "learning_curves.csv", index=False)
    for env in curves["env"].unique():
        label = setup_label(cfg, env)
        plot_curves(curves, env, label, layout.figure(f"learning_curves_{env}"))
        diffs = tables["learning_differences"]
        if len(diffs) and L.reference_methods[0] in set(diffs[diffs.env == env]["reference"]):
            plot_differences(diffs, env, L.reference_methods[0], label, layout.figure(f"learning_differences_{env}"))
    return tables
