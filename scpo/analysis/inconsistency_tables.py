"""Semantic inconsistency (revision 2) over a whole experiment: every saved iteration of every run of report.envs x
report.methods x report.seeds, every rollout-only estimator on each (metric: `scpo.analysis.inconsistency`), plus how
often SCPO's matches pair different actions under each scorer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from scpo.analysis.inconsistency import (
    COUNT_COLUMNS,
    PAIR_KINDS,
    inconsistency_counts,
    normalise_action,
    rates,
    semantic_pairs,
)
from scpo.analysis.rollout_files import iteration_files, iteration_of
from scpo.batch import RolloutBatch
from scpo.config import Config
from scpo.credit.grouping import discounted_returns
from scpo.pipeline.layout import run_dir

__all__ = [
    "control_target",
    "inconsistency_of_batch",
    "inconsistency_over_runs",
    "counts_of_files",
    "summarise_inconsistency",
    "inconsistency_table",
    "scpo_match_actions",
    "plot_inconsistency",
    "scpo_label",
]

KIND_LABELS = {"all": "all", "won_won": "both won", "failed_failed": "both failed", "won_failed": "one won, one failed"}


def scpo_label(cfg: Config) -> str:
    """What SCPO ran as, for every table and figure: revision, mode, scorer, tau, match rule."""
    s = cfg.credit.scpo
    model = f" ({s.scorer_model})" if s.scorer_model else ""
    return (
        f"SCPO revision {s.revision}, mode {s.mode}, scorer {s.scorer}{model}, tau {s.tau}, match {s.match}, "
        f"kappa {s.kappa}"
    )


def control_target(batch: RolloutBatch, gamma: float) -> tuple[np.ndarray, str]:
    """(target, name) for the control: the oracle progress q when the batch carries it, else the discounted return."""
    q = getattr(batch, "q", None)
    if q is not None and np.all(np.isfinite(np.asarray(q, dtype=float))):
        return np.asarray(q, dtype=np.float64), "oracle progress q"
    return discounted_returns(batch.reward, batch.traj_id, batch.step, gamma), "discounted return"


def inconsistency_of_batch(batch: RolloutBatch, cfg: Config, semantic_scorer=None) -> pd.DataFrame:
    """Counts (see `inconsistency_counts`) of every rollout-only estimator of report.methods on `batch`."""
    from scpo.credit import estimate

    results = estimate(batch, cfg.report.methods, cfg.credit, unmet="skip")  # HCAPO needs the policy: not recomputed
    semantic = (
        semantic_pairs(batch, semantic_scorer, cfg.report.similarity_thresh) if semantic_scorer is not None else None
    )
    target, _ = control_target(batch, cfg.credit.gigpo.gamma)
    return inconsistency_counts({m: r.advantages for m, r in results.items()}, batch, target=target, semantic=semantic)


def inconsistency_over_runs(cfg: Config, every_k: int = 1) -> pd.DataFrame:
    """One row per (env, run method, seed, iteration, estimator, pair_set, kind) with the counts, and `own` (the
    estimator is the one that trained the run). Uses every `every_k`-th saved iteration of each run. The files are
    counted by `report.workers` processes side by side (`scpo.workers`), each file whole by one of them, the results
    in file order: the same counts as one process."""
    if every_k < 1:
        raise ValueError(f"every_k = {every_k} must be >= 1")
    runs = [(e, m, s) for e in cfg.report.envs for m in cfg.report.methods for s in cfg.report.seeds]
    files = [(e, m, s, f) for e, m, s in runs for f in iteration_files(run_dir(cfg.train.out_dir, e, m, s))[::every_k]]
    frames = []
    counted = counts_of_files(cfg, [f for *_, f in files])
    for (env, method, seed, file), rows in tqdm(
        zip(files, counted), total=len(files), desc="inconsistency over saved iterations", unit="file"
    ):
        frames.append(
            rows.assign(
                env=env, run_method=method, seed=seed, iteration=iteration_of(file), own=rows["estimator"] == method
            )
        )
    cols = [
        "env",
        "run_method",
        "seed",
        "iteration",
        "estimator",
        "own",
        "pair_set",
        "kind",
        *COUNT_COLUMNS,
        "n_control",
        "n_ordered",
    ]
    return pd.concat(frames, ignore_index=True)[cols]


_WORKER: dict = {}  # a counting process's config and scorer (`_start_counting`)


def _start_counting(cfg: Config) -> None:
    """A counting process's setup: the config and the semantic variant's scorer, made once."""
    from scpo.scorers import make_scorer

    _WORKER["cfg"] = cfg
    _WORKER["scorer"] = make_scorer(cfg.report.similarity_scorer)


def _counts_of_file(file: Path) -> pd.DataFrame:
    return inconsistency_of_batch(RolloutBatch.read(file), _WORKER["cfg"], _WORKER["scorer"])


def counts_of_files(cfg: Config, files: list[Path]) -> Iterator[pd.DataFrame]:
    """`inconsistency_of_batch` of each rollout file, in the order of `files`: in this process, or in
    min(report.workers, len(files)) worker processes (`scpo.workers`) when that is more than one."""
    workers = min(cfg.report.workers, len(files))
    if workers <= 1:
        _start_counting(cfg)
        try:
            yield from map(_counts_of_file, files)
        finally:
            _WORKER.clear()
        return
    from scpo.workers import worker_executor

    with worker_executor(
        workers, ("scpo.analysis.inconsistency_tables",), initializer=_start_counting, initargs=(cfg,)
    ) as pool:
        yield from pool.map(_counts_of_file, files)


def summarise_inconsistency(per_file: pd.DataFrame) -> pd.DataFrame:
    """Counts pooled over every file per (env, estimator, pair_set, kind), then `rates`."""
    counts = [c for c in (*COUNT_COLUMNS, "n_control", "n_ordered") if c in per_file]
    pooled = per_file.groupby(["env", "estimator", "pair_set", "kind"], sort=False, as_index=False)[counts].sum(
        min_count=1
    )
    return rates(pooled)


def inconsistency_table(pooled: pd.DataFrame) -> pd.DataFrame:
    """One row per (env, estimator): same-step sign disagreement among non-zero pairs by kind, zero share and mean
    |dA| / std over all same-step pairs, the control's ordered share, and the semantic variant's won-vs-failed
    disagreement (when computed)."""
    out = []
    for (env, est), part in pooled.groupby(["env", "estimator"], sort=False):
        same = part[part["pair_set"] == "same_step"].set_index("kind")
        row = {"env": env, "estimator": est}
        for kind in ("all", *PAIR_KINDS):
            row[f"disagree_{kind}"] = same.loc[kind, "disagreement"] if kind in same.index else np.nan
        row["zero_share"] = same.loc["all", "zero_share"]
        row["mean_abs_diff"] = same.loc["all", "mean_abs_diff"]
        row["control_ordered"] = same.loc["all", "control_ordered"] if "control_ordered" in same else np.nan
        sem = part[(part["pair_set"] == "semantic") & (part["kind"] == "won_failed")]
        row["semantic_disagree_won_failed"] = sem["disagreement"].iloc[0] if len(sem) else np.nan
        for kind in ("all", *PAIR_KINDS):
            row[f"n_pairs_{kind}"] = int(same.loc[kind, "n_pairs"]) if kind in same.index else 0
        row["n_control"] = int(same.loc["all", "n_control"]) if "n_control" in same else 0
        out.append(row)
    return pd.DataFrame(out)


def scpo_match_actions(batch: RolloutBatch, cfg: Config, scorer_names: tuple[str, ...]) -> pd.DataFrame:
    """Per scorer: SCPO's credited steps on `batch` and the share whose normalised action differs from the matched
    reference step's (a spurious match credits a different action). Columns scorer, n_credited, n_action_differs."""
    from scpo.credit import compute_advantages
    from scpo.credit.dispatch import default_scorer

    credit = cfg.credit
    rows = []
    for name in scorer_names:
        model = cfg.credit.scpo.scorer_model if name == cfg.credit.scpo.scorer else None
        with_scorer = credit.model_copy(
            update={"scpo": credit.scpo.model_copy(update={"scorer": name, "scorer_model": model})}
        )
        res = compute_advantages("scpo", batch, with_scorer, scorer=default_scorer(name, model))
        ref = res.diagnostics["scpo_ref_row"]
        hit = np.flatnonzero(ref >= 0)
        differs = [normalise_action(batch.action[r]) != normalise_action(batch.action[ref[r]]) for r in hit]
        rows.append({"scorer": name, "n_credited": len(hit), "n_action_differs": int(np.sum(differs))})
    return pd.DataFrame(rows)


def plot_inconsistency(per_file: pd.DataFrame, out: Path, title: str = "") -> Path:
    """One row of panels per env: (a) same-step sign disagreement among non-zero pairs by pair kind; (b) the control:
    share of same-observation, different-action pairs ordered like their returns; (c) each method's won-vs-failed
    disagreement on its own training rollouts over iterations (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator

    pooled = summarise_inconsistency(per_file)
    envs = list(dict.fromkeys(per_file["env"]))
    estimators = list(dict.fromkeys(per_file["estimator"]))
    palette = dict(zip(estimators, sns.color_palette("tab10", len(estimators))))
    fig, axes = plt.subplots(
        len(envs), 3, figsize=(19, 3.9 * len(envs)), squeeze=False, gridspec_kw={"width_ratios": [2.2, 1.2, 1.6]}
    )
    for (ax_kind, ax_ctrl, ax_line), env in zip(axes, envs):
        same = pooled[(pooled["env"] == env) & (pooled["pair_set"] == "same_step")]
        n_of = same[same["estimator"] == estimators[0]].set_index("kind")["n_pairs"]
        long = same[same["kind"] != "all"].assign(
            kind=lambda d, n_of=n_of: d["kind"].map(lambda k: f"{KIND_LABELS[k]} ({int(n_of.get(k, 0))} pairs)")
        )
        sns.barplot(data=long, x="estimator", y="disagreement", hue="kind", order=estimators, ax=ax_kind)
        ax_kind.set_title(f"{env}: same step (identical observation and action), by the pair's outcomes", fontsize=10)
        ax_kind.set_ylabel("sign disagreement\namong non-zero pairs")
        ax_kind.set_ylim(0, 1.25)
        ax_kind.set_yticks(np.linspace(0, 1, 6))
        ax_kind.tick_params(axis="x", rotation=30)
        ax_kind.legend(title=None, fontsize=8, loc="upper center", ncol=3, frameon=False)
        ctrl = same[same["kind"] == "all"]
        sns.barplot(
            data=ctrl,
            x="estimator",
            y="control_ordered",
            hue="estimator",
            order=estimators,
            hue_order=estimators,
            palette=palette,
            legend=False,
            ax=ax_ctrl,
        )
        n_ctrl = int(ctrl["n_control"].max()) if len(ctrl) else 0
        ax_ctrl.set_title(f"control: same observation, other action ({n_ctrl} pairs)", fontsize=10)
        ax_ctrl.set_ylabel("share ordered like the returns")
        ax_ctrl.set_ylim(0, 1)
        ax_ctrl.tick_params(axis="x", rotation=30)
        own = per_file[
            (per_file["env"] == env)
            & per_file["own"]
            & (per_file["pair_set"] == "same_step")
            & (per_file["kind"] == "won_failed")
        ]
        own = rates(own)
        own = own[np.isfinite(own["disagreement"])]
        if own.empty:
            ax_line.text(
                0.5,
                0.5,
                "no won-vs-failed same-step pairs\nin the methods' own rollouts",
                ha="center",
                va="center",
                transform=ax_line.transAxes,
            )
        else:
            shown = [e for e in estimators if e in set(own["estimator"])]
            sns.lineplot(
                data=own,
                x="iteration",
                y="disagreement",
                hue="estimator",
                style="estimator",
                markers=True,
                dashes=False,
                errorbar="sd",
                err_kws={"alpha": 0.08},
                hue_order=shown,
                style_order=shown,
                palette=palette,
                ax=ax_line,
            )
            ax_line.legend(title="method", bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=8)
        ax_line.set_title(f"{env}: one won, one failed, on each method's own rollouts", fontsize=10)
        ax_line.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax_line.set_xlabel("training iteration")
        ax_line.set_ylabel("sign disagreement")
    fig.suptitle(
        "Semantic credit inconsistency, revision 2"
        + (f" — {title}" if title else "")
        + " (HCAPO needs the policy and is not recomputed)",
        fontsize=11,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return out
