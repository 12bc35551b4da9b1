"""Tables and figures of the learning benchmark (notebook 08, `scpo.testbeds.learning`), under reports/.

reports/tables/learning_ranking.{csv,md}       every method per environment: AULC with its 95% CI, final panel success,
                                               unseen success, task score, iterations to the threshold, rank
reports/tables/learning_differences.{csv,md}   each method's AULC minus each reference method's, paired over seeds:
                                               mean, 95% paired-t CI, exact sign-flip p (the test) and paired-t p, both
                                               Holm-adjusted per family, the sign-flip floor 2 / 2^n
reports/tables/learning_power.{csv,md}         per comparison: its paired sd and the smallest AULC difference a paired
                                               t-test detects at 80% power; the seeds the sign-flip test needs
reports/tables/learning_by_type.{csv,md}       final panel success per task type (hard types marked †)
reports/tables/learning_fidelity.{csv,md}      Spearman's rho of credit fidelity AUC and learning AULC, its exact
                                               permutation p over the methods
reports/tables/learning_curves.csv             the panel success of every run at every evaluation point
reports/figures/learning_curves_<env>.png      success on the panel vs iteration, mean and 95% band over seeds
reports/figures/learning_differences_<env>.png AULC differences from the first reference method, with CIs
Every table note and figure title names the success metric (`success_metric`: sampled at eval.temperature, or
greedy). The statistics: `scpo.analysis.learning_stats` (docs/algorithms.md, "Measuring learning").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.analysis.learning_stats import (
    PERMUTATIONS,
    aulc,
    first_reach,
    holm,
    minimum_detectable_difference,
    paired_difference,
    rank_correlation,
    sign_flip_floor,
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
    "success_metric",
    "write_learning_report",
]

ALPHA = 0.05  # the family-wise level of the significance marks (Holm)
P_FORMATS = dict.fromkeys(("p", "p_holm", "p_floor", "p_t", "p_t_holm", "signflip_floor_holm"), ".4f")  # 0.0625 whole

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


def _families(runs: pd.DataFrame, references: Sequence[str]):
    """(env, reference, [(method, paired differences)]) per family: every other method of the env against one
    reference."""
    for env in runs["env"].unique():
        methods = list(dict.fromkeys(runs[runs.env == env]["method"]))
        for ref in references:
            if ref in methods:
                yield env, ref, [(m, _paired(runs, env, m, ref)) for m in methods if m != ref]


def differences_table(runs: pd.DataFrame, references: Sequence[str], permutations: int = PERMUTATIONS) -> pd.DataFrame:
    """Every method's AULC minus each reference's, seed by seed (`paired_difference`): n, mean, 95% paired-t CI (lo,
    hi), sd; the exact sign-flip p (`p`, the test), Holm-adjusted within each (env, reference) family (`p_holm`), its
    floor 2 / 2^n (`p_floor`); the paired t-test's p and its Holm adjustment (`p_t`, `p_t_holm`); `significant`:
    p_holm <= ALPHA."""
    rows = []
    for env, ref, pairs in _families(runs, references):
        family = []
        for m, d in pairs:
            s = paired_difference(d, permutations=permutations)
            family.append(
                {
                    "env": env,
                    "reference": ref,
                    "method": m,
                    "bound": BOUNDS.get(m, ""),
                    **{k: s[k] for k in ("n", "mean", "lo", "hi", "sd")},
                    "p": s["p_signflip"],
                    "p_floor": s["p_floor"],
                    "p_t": s["p_t"],
                    "exact": s["exact"],
                }
            )
        for row, p, p_t in zip(family, holm([r["p"] for r in family]), holm([r["p_t"] for r in family])):
            row["p_holm"], row["p_t_holm"] = float(p), float(p_t)
            row["significant"] = bool(p <= ALPHA)
        rows += family
    columns = ["env", "reference", "method", "bound", "n", "mean", "lo", "hi", "sd", "p", "p_holm", "p_floor", "p_t"]
    columns += ["p_t_holm", "significant", "exact"]
    return pd.DataFrame(rows, columns=columns)


def power_table(runs: pd.DataFrame, references: Sequence[str]) -> pd.DataFrame:
    """Per comparison (env, reference, method): the seeds, the standard deviation of its own paired AULC differences,
    the minimum detectable difference of a paired t-test at alpha ALPHA with 80% power from that sd; per family, the
    smallest Holm-adjusted p the sign-flip test can give (m 2^(1-n) for m comparisons) and the seeds it needs for
    that to reach ALPHA."""
    rows = []
    for env, ref, pairs in _families(runs, references):
        pairs = [(m, d) for m, d in pairs if len(d) >= 2]
        for m, d in pairs:
            n, sd = len(d), float(np.std(d, ddof=1))
            rows.append(
                {
                    "env": env,
                    "reference": ref,
                    "method": m,
                    "seeds": n,
                    "sd_paired_difference": sd,
                    "mde_80_power": minimum_detectable_difference(sd, n, ALPHA, 0.8),
                    "signflip_floor_holm": min(1.0, len(pairs) * sign_flip_floor(n)),
                    "seeds_for_signflip": int(np.ceil(1 + np.log2(len(pairs) / ALPHA))),
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
    permutations: int = PERMUTATIONS,
    envs: Sequence[str] = FIDELITY_ENVS,
) -> pd.DataFrame:
    """Spearman's rho between each source's per-method fidelity AUC (`fidelity`: {source: {method: AUC}}) and the
    methods' mean learning AULC, with its exact permutation p over the methods (`rank_correlation`) and that p's
    floor 2 / k!; per env of `envs` and source. The fidelity sources score credit on ALFWorld rollouts
    (`FIDELITY_ENVS`), so the runs of another environment get no row."""
    rows = []
    for env in [e for e in runs["env"].unique() if e in envs]:
        per_seed = {
            m: part.sort_values("seed")["aulc"].to_numpy() for m, part in runs[runs.env == env].groupby("method")
        }
        for source, auc in fidelity.items():
            methods = [m for m in auc if m in per_seed and np.isfinite(auc[m])]
            if len(methods) < 3:
                continue
            out = rank_correlation({m: auc[m] for m in methods}, per_seed, permutations=permutations)
            rows.append({"env": env, "fidelity_source": source, "methods": ", ".join(methods), **out})
    columns = ["env", "fidelity_source", "methods", "rho", "p", "p_floor", "exact", "n_methods", "n_seeds"]
    return pd.DataFrame(rows, columns=columns)


def success_metric(cfg: Config) -> str:
    """The success the curves measure: 'panel success, sampled at T=0.4' or 'panel success, greedy (T=0)', with the
    episodes per panel task."""
    T = cfg.eval.temperature
    how = "greedy (T=0)" if T == 0 else f"sampled at T={T:g}"
    return f"panel success, {how}, {cfg.learning.eval_episodes_per_task} episodes per panel task"


def setup_label(cfg: Config, env: str) -> str:
    """What the curves come from: profile, episode length and history (and ALFWorld's revealed goal objects), panel,
    seeds, the success metric (`success_metric`), SCPO's settings."""
    L, s, opts = cfg.learning, cfg.credit.scpo, getattr(cfg.env, env)
    revealed = " · goal objects' places in the task line" if getattr(opts, "reveal_goal_objects", False) else ""
    return (
        f"{env} · profile {cfg.profile} · episodes of at most {opts.max_steps} steps, "
        f"{cfg.env.history_length} past steps in the prompt{revealed} · panel of {L.panel_size} training tasks, "
        f"{L.n_tasks} x {cfg.rollout.group_size} rollouts per iteration · {len(L.seeds)} paired seeds · "
        f"{success_metric(cfg)} · SCPO revision {s.revision} (mode {s.mode}), scorer {s.scorer}, tau {s.tau:g}"
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


def plot_curves(curves: pd.DataFrame, env: str, label: str, path: Path, metric: str = "panel success") -> Path:
    """`metric` (the panel success, `success_metric`) vs iteration, one line per method (mean over seeds) with its
    95% t-band."""
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
    ax.set_ylabel(metric.replace(", ", ",\n", 1) + " (fixed episode list)", fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    ax.set_title(f"Learning curves ({metric}), mean and 95% t-band over seeds\n{_wrap(label, 110)}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_differences(diffs: pd.DataFrame, env: str, reference: str, label: str, path: Path) -> Path:
    """Each method's paired AULC difference from `reference` with its 95% paired-t CI; filled where the exact
    sign-flip test is significant after Holm (`p_holm` <= ALPHA), with the test's floor 2 / 2^n in the title."""
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
    floor = ", ".join(f"{p:.3g}" for p in sorted(set(data["p_floor"]), reverse=True))
    ax.set_xlabel(f"AULC minus {reference}'s (paired over seeds; filled: Holm-adjusted sign-flip p <= {ALPHA:g})")
    ax.set_title(
        f"Differences from {reference}: mean, 95% paired-t CI; exact sign-flip test (smallest p it can give: {floor})"
        f"\n{_wrap(label, 95)}",
        fontsize=8,
    )
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
        "learning_differences": differences_table(runs, L.reference_methods, L.permutations),
        "learning_power": power_table(runs, L.reference_methods),
        "learning_by_type": by_type_table(results, cfg.report.hard_task_types),
    }
    if fidelity:
        tables["learning_fidelity"] = fidelity_correlation(runs, fidelity, L.permutations)
    skipped = "; ".join(f"{env}: {', '.join(m)} (no planner)" for env, m in left_out(cfg).items() if m)
    metric = success_metric(cfg)
    diffs = tables["learning_differences"]
    enumerated = (
        "all 2^n sign patterns enumerated"
        if diffs.empty or diffs["exact"].all()
        else f"{L.permutations} sign patterns drawn where 2^n is larger (column exact)"
    )
    notes = {
        "learning_ranking": (
            f"Success: {metric}. AULC = normalised area under the panel-success curve (evaluated at iterations 0, "
            f"{L.eval_every}, ..., {L.iterations}); 95% t-interval over {len(L.seeds)} paired seeds. unseen_success: "
            f"the final policy on {', '.join(f'{e} {s}' for e, s in L.unseen_split.items())}. Bounds: oracle "
            f"(ground-truth credit from the planner), shuffled (GRPO's advantages permuted within each group). Left "
            f"out: {skipped or 'none'}."
        ),
        "learning_differences": (
            f"Success: {metric}. d_s = AULC(method, seed s) - AULC(reference, seed s) over n paired seeds; mean, "
            "95% paired-t CI [lo, hi], sd. p: the exact sign-flip (randomization) test of mean d = 0, two-sided "
            f"({enumerated}); it cannot go below p_floor = 2 / 2^n (0.0625 at 5 seeds, so no 5-seed comparison can "
            f"reach {ALPHA:g}). p_holm: Holm-adjusted within each (env, reference) family; significant: p_holm <= "
            f"{ALPHA:g}. p_t, p_t_holm: the paired t-test's p (assumes a normal mean), for comparison."
        ),
        "learning_power": (
            f"Success: {metric}. Per comparison, from its own paired differences: sd, and the MDE, the smallest mean "
            f"paired AULC difference a two-sided paired t-test detects at alpha {ALPHA:g} with 80% power (noncentral "
            "t). signflip_floor_holm: the smallest Holm-adjusted p the sign-flip test can give in the family "
            f"(m 2^(1-n)); seeds_for_signflip: the paired seeds it needs for that to reach {ALPHA:g}."
        ),
        "learning_by_type": f"Final {metric}, per task type, mean over seeds; † = hard multi-step type.",
        "learning_fidelity": (
            f"Success: {metric}. Spearman's rho over the methods between each estimator's credit fidelity AUC and its "
            "learning AULC (mean over seeds); p: exact permutation test over the k! pairings of the methods "
            "(two-sided; p_floor = 2 / k!, its smallest value). It treats each method's mean AULC as fixed: the "
            "seeds' noise in those means is not in p."
        ),
    }
    for name, df in tables.items():
        csv, md = layout.table(name)
        write_table(df, csv, md, name.replace("_", " ").capitalize(), note=notes.get(name, ""), formats=P_FORMATS)
    curves.to_csv(layout.tables / "learning_curves.csv", index=False)
    for env in curves["env"].unique():
        label = setup_label(cfg, env)
        plot_curves(curves, env, label, layout.figure(f"learning_curves_{env}"), metric=metric)
        if len(diffs) and L.reference_methods[0] in set(diffs[diffs.env == env]["reference"]):
            plot_differences(diffs, env, L.reference_methods[0], label, layout.figure(f"learning_differences_{env}"))
    return tables
