"""Tables and figure of the Sokoban learning benchmark (notebook 09, `scpo.testbeds.sokoban_benchmark`), under reports/.

reports/tables/sokoban_learning.{csv,md}     per start and estimator: AULC and final success, mean and 95% t-interval
                                             over the paired seeds; its gradient fidelity (cos_panel, cos_tasks) and
                                             wrong-sign credit beside; rank by AULC
reports/tables/sokoban_differences.{csv,md}  every estimator's AULC minus each reference's (sokoban.reference_methods:
                                             GRPO, the exact advantage), seed by seed: mean, 95% paired-t CI, sd, the
                                             exact sign-flip p and the paired-t p, both Holm-adjusted within each
                                             (start, reference) family, `significant` (sign-flip Holm p <= 0.05), the
                                             MDE from the comparison's own sd (`learning_tables.differences_table`,
                                             `power_table`)
reports/tables/sokoban_fidelity.{csv,md}     per start and estimator (seed 0's policy): cosines of its update with the
                                             exact gradient of success (95% t-intervals over batches), the share of
                                             batches without an update, the wrong-sign shares, its AULC beside
reports/tables/sokoban_rank_correlation.{csv,md}  Spearman's rho of each fidelity cosine with mean AULC over the
                                             estimators, exact permutation p
reports/figures/sokoban_learning_curves.png  exact panel success over iterations per start, mean and 95% t-band
Every table names its success metric (`SUCCESS_METRIC`). The significance marks of the differences
(`significance_marks`) are what the kernel-agreement check compares (`compare_marks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.analysis.learning_stats import aulc, rank_correlation, t_band
from scpo.pipeline.layout import ReportLayout
from scpo.tables.success import write_table
from scpo.testbeds.gradient_fidelity import summarize_cosines
from scpo.testbeds.learning_tables import ALPHA, P_FORMATS, differences_table, power_table
from scpo.testbeds.sokoban_summary import figure

__all__ = [
    "SUCCESS_METRIC",
    "aulc_per_run",
    "learning_table",
    "sokoban_differences",
    "fidelity_table",
    "rank_correlations",
    "significance_marks",
    "compare_marks",
    "write_sokoban_report",
]

SUCCESS_METRIC = "sampled success at T = 1, exact (dynamic programming over the panel's reachable states)"
FIDELITY_COLUMNS = ("cos_panel", "cos_tasks")


def aulc_per_run(curves: pd.DataFrame) -> pd.DataFrame:
    """One row per (start, method, seed): AULC of the exact panel success and the final success; `env` = the start,
    the column `scpo.testbeds.learning_tables` groups families by."""
    rows = []
    for (start, method, seed), c in curves.groupby(["start", "method", "seed"], sort=False):
        c = c.sort_values("iteration")
        rows.append(
            {
                "env": start,
                "method": method,
                "seed": seed,
                "aulc": aulc(c["iteration"], c["success"]),
                "final_success": float(c["success"].iloc[-1]),
            }
        )
    return pd.DataFrame(rows)


def _mean_ci(x: np.ndarray) -> tuple[float, float, float]:
    mean, lo, hi = t_band(np.asarray(x, dtype=np.float64)[:, None])
    return float(mean[0]), float(lo[0]), float(hi[0])


def learning_table(runs: pd.DataFrame, fidelity: pd.DataFrame, signs: pd.DataFrame) -> pd.DataFrame:
    """Per start and estimator: seeds, AULC and final success (mean, 95% t-interval), rank by AULC, the fidelity
    cosines (means over batches) and the wrong-sign shares of `fidelity_table` / `signs` (NaN for PPO: a fixed
    policy has no critic)."""
    rows = []
    for (start, method), part in runs.groupby(["env", "method"], sort=False):
        row = {"start": start, "method": method, "seeds": len(part)}
        for col in ("aulc", "final_success"):
            row[col], row[f"{col}_lo"], row[f"{col}_hi"] = _mean_ci(part[col].to_numpy())
        rows.append(row)
    out = pd.DataFrame(rows)
    out["rank"] = out.groupby("start")["aulc"].rank(ascending=False, method="min").astype(int)
    keep = ["start", "method", "cos_panel_mean", "cos_tasks_mean"]
    out = out.merge(fidelity[keep], on=["start", "method"], how="left")
    shares = ["start", "method", "wrong_given_positive", "wrong_given_negative"]
    out = out.merge(signs[shares], on=["start", "method"], how="left")
    return out.sort_values(["start", "rank"]).reset_index(drop=True)


def sokoban_differences(runs: pd.DataFrame, references, permutations: int) -> pd.DataFrame:
    """`learning_tables.differences_table` of the runs per start, with each comparison's MDE (80% power) from its own
    sd (`power_table`) beside; `start` in place of `env`."""
    diffs = differences_table(runs, references, permutations)
    power = power_table(runs, references)[["env", "reference", "method", "mde_80_power"]]
    out = diffs.merge(power, on=["env", "reference", "method"], how="left").drop(columns="bound")
    return out.rename(columns={"env": "start"})


def fidelity_table(per_batch: pd.DataFrame, signs: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per start and estimator: `summarize_cosines` of its batches (zero updates count 0), the wrong-sign shares and
    their denominators, its mean AULC over seeds beside (NaN where it was not trained)."""
    frames = []
    for start, part in per_batch.groupby("start", sort=False):
        s = summarize_cosines(part.drop(columns="start")).assign(start=start, policy_success=part["success"].iloc[0])
        frames.append(s)
    fid = pd.concat(frames, ignore_index=True)
    fid = fid.merge(signs, on=["start", "method"], how="left")
    mean_aulc = runs.groupby(["env", "method"])["aulc"].mean().rename("aulc").reset_index()
    fid = fid.merge(mean_aulc.rename(columns={"env": "start"}), on=["start", "method"], how="left")
    first = ["start", "method", "policy_success", "batches", "no_update"]
    return fid[first + [c for c in fid.columns if c not in first]]


def rank_correlations(fid: pd.DataFrame, runs: pd.DataFrame, permutations: int) -> pd.DataFrame:
    """Per start and fidelity cosine: Spearman's rho over the estimators scored and trained between the cosine's mean
    and the mean AULC over seeds, with its exact permutation p (`learning_stats.rank_correlation`)."""
    rows = []
    for start, part in runs.groupby("env", sort=False):
        per_seed = {m: p.sort_values("seed")["aulc"].tolist() for m, p in part.groupby("method")}
        for col in FIDELITY_COLUMNS:
            cos = fid[fid["start"] == start].set_index("method")[f"{col}_mean"].to_dict()
            fixed = {m: cos[m] for m in per_seed if m in cos}
            if len(fixed) >= 3:
                rows.append({"start": start, "fidelity": col, **rank_correlation(fixed, per_seed, permutations)})
    return pd.DataFrame(rows)


def significance_marks(diffs: pd.DataFrame) -> pd.DataFrame:
    """Per comparison (start, reference, method): the sign of the mean difference and whether it is significant after
    Holm, by the sign-flip test (`significant`) and by the paired t-test (`significant_t`)."""
    out = diffs[["start", "reference", "method"]].copy()
    out["sign"] = np.sign(diffs["mean"]).astype(int)
    out["significant"] = diffs["p_holm"] <= ALPHA
    out["significant_t"] = diffs["p_t_holm"] <= ALPHA
    return out.reset_index(drop=True)


def compare_marks(a: pd.DataFrame, b: pd.DataFrame, labels: tuple[str, str] = ("a", "b")) -> pd.DataFrame:
    """Two runs' `significance_marks` side by side (the comparisons of both), `agree` where sign and both marks are
    the same."""
    keys = ["start", "reference", "method"]
    both = a.merge(b, on=keys, how="outer", suffixes=tuple(f"_{x}" for x in labels))
    cols = ("sign", "significant", "significant_t")
    both["agree"] = np.logical_and.reduce([both[f"{c}_{labels[0]}"] == both[f"{c}_{labels[1]}"] for c in cols])
    return both


def write_sokoban_report(
    curves: pd.DataFrame,
    per_batch: pd.DataFrame,
    signs: pd.DataFrame,
    section,
    reports_dir: str | Path,
) -> dict[str, pd.DataFrame]:
    """Every table and the figure of the module docstring from the runs' `curves`, the fidelity batches and the
    wrong-sign shares; `section`: the `sokoban` config section -> the tables by name."""
    layout = ReportLayout(Path(reports_dir))
    runs = aulc_per_run(curves)
    fid = fidelity_table(per_batch, signs, runs)
    tables = {
        "sokoban_learning": learning_table(runs, fid, signs),
        "sokoban_differences": sokoban_differences(runs, section.reference_methods, section.permutations),
        "sokoban_fidelity": fid,
        "sokoban_rank_correlation": rank_correlations(fid, runs, section.permutations),
    }
    n = len(section.seeds)
    where = (
        f"Sokoban 6x6, 1 box, {section.panel_size} train rooms with V* >= {section.min_v_star:g}; MLP policy (hidden "
        f"{section.hidden}); {section.n_tasks} rooms x {section.group_size} episodes per iteration"
    )
    wrong = (
        "wrong_given_positive: share of steps with A > 0 whose exact A^pi(s, a) < 0; wrong_given_negative: share "
        "with A < 0 whose A^pi > 0 (seed 0's policy, the fidelity batches)"
    )
    notes: Mapping[str, str] = {
        "sokoban_learning": (
            f"Success: {SUCCESS_METRIC}. {where}. AULC: normalised area under the panel-success curve (every "
            f"{section.eval_every} iterations); mean and 95% t-interval over {n} paired seeds. cos_panel_mean, "
            f"cos_tasks_mean: gradient fidelity at the start's seed-0 policy (sokoban_fidelity); {wrong}."
        ),
        "sokoban_differences": (
            f"Success: {SUCCESS_METRIC}. d_s = AULC(method, seed s) - AULC(reference, seed s) over n paired seeds; "
            "mean, 95% paired-t CI [lo, hi], sd. p: exact sign-flip test (two-sided; floor 2 / 2^n), p_holm: "
            f"Holm within each (start, reference) family; significant: p_holm <= {ALPHA:g}. p_t, p_t_holm: the "
            "paired t-test's. mde_80_power: the smallest mean difference a paired t-test at alpha 0.05 detects with "
            "80% power, from this comparison's own sd."
        ),
        "sokoban_fidelity": (
            f"Success: {SUCCESS_METRIC} (policy_success: the scored policy's; aulc: the estimator's mean AULC over "
            f"seeds). Per estimator, over {section.fidelity_batches} batches of the start's seed-0 policy: cosine of "
            "its update with the exact gradient of the panel's success (cos_panel) and of the batch's rooms "
            "(cos_tasks), a batch without an update counting 0 (no_update: their share); mean and 95% t-interval "
            f"over batches; diff_*: cos_panel - GRPO's, paired by batch. {wrong}; n_positive, n_negative: the "
            "steps counted. exact_batch_gradient: the exact gradient of the batch's rooms itself (not an estimator)."
        ),
        "sokoban_rank_correlation": (
            f"Success: {SUCCESS_METRIC}. Spearman's rho over the estimators both scored and trained between the mean "
            "fidelity cosine and the mean AULC over seeds; p: exact permutation test over the k! pairings (drawn "
            "beyond `permutations`); it treats the means as fixed."
        ),
    }
    for name, df in tables.items():
        csv, md = layout.table(name)
        write_table(df, csv, md, name.replace("_", " ").capitalize(), note=notes[name], formats=P_FORMATS)
    figure(curves, layout.figure("sokoban_learning_curves"))
    return tables
