"""The credit-fidelity benchmark end to end: rollouts with oracle progress -> every estimator -> fidelity tables,
figures.

    res = noisy_fidelity(cfg)                    # eps grid x tasks x seeds of the noisy-optimal policy (cfg.fidelity)
    res = trained_fidelity(cfg, run_dirs)        # the saved rollouts of trained policies (ALFWorld or the corridor),
                                                 # labelled by replay with their environment's planner
    res.summary / res.by_task_type / res.groups  # tables (scpo.analysis.fidelity_metrics.summarize)
    plot_fidelity_vs_eps(res.summary, path)      # the metrics vs eps, one line per estimator, 95% intervals
    sweep = scpo_sweep(cfg, res.batches, grid)   # SCPO's fidelity per option set (tau, step text, scorer, match)
    calibrate_tau(sweep, cfg.credit.scpo)        # per scorer, the tau of least wrong-sign credit, and of best AUC

Every estimator goes through `scpo.credit.estimate` (at ALFWorld's reference scale, read from the batch); HCAPO
reads the hindsight log-probs of `cfg.fidelity.hindsight_policy` (default: the ALFWorld warm start), scored once over
all batches (`scpo.policy.hindsight.hindsight_scores`). Timings are wall and process-CPU seconds per phase.
Full knowledge is a proxy: exploring steps have q <= 0 (see scpo.analysis.fidelity_metrics).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.analysis.fidelity_metrics import fidelity_table, summarize
from scpo.batch import RolloutBatch
from scpo.credit import estimate
from scpo.envs.alfworld.oracle_rollouts import PlannerPool, label_progress, noisy_optimal_rollouts

__all__ = [
    "FidelityResult",
    "Timer",
    "cpu_seconds",
    "hindsight_policy_dir",
    "noisy_fidelity",
    "trained_fidelity",
    "label_with_planner",
    "oracle_inconsistency",
    "plot_fidelity_vs_eps",
    "scpo_sweep",
    "plot_scpo_sweep",
    "calibrate_tau",
    "METRIC_LABELS",
]

METRIC_LABELS = {
    "auc": "AUC (q = 1 vs q <= 0)",
    "recovered_progress": "recovered progress (failed, q = 1: A > 0)",
    "false_credit": "false credit (q <= 0: A > 0)",
    "rank_corr": "Spearman rho(A, q)",
    "wrong_sign": "wrong-sign credit (A > 0, q < 0 or A < 0, q > 0: share of A != 0)",
    "wrong_sign_pos": "wrong-sign up (q < 0 given A > 0)",
    "wrong_sign_neg": "wrong-sign down (q > 0 given A < 0)",
}
PLOTTED = ("auc", "recovered_progress", "false_credit", "rank_corr", "wrong_sign_pos", "wrong_sign_neg")


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished child processes (the forked hindsight workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Timer:
    """Wall and CPU seconds (this process and its finished workers) of named phases: `with timer("rollouts"): ...`;
    `timer.seconds` -> dict."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, name: str):
        timer = self

        class _Phase:
            def __enter__(self):
                self.w, self.c = time.perf_counter(), cpu_seconds()

            def __exit__(self, *exc):
                timer.seconds[f"{name}_wall_s"] = (
                    timer.seconds.get(f"{name}_wall_s", 0.0) + time.perf_counter() - self.w
                )
                timer.seconds[f"{name}_cpu_s"] = timer.seconds.get(f"{name}_cpu_s", 0.0) + cpu_seconds() - self.c

        return _Phase()


@dataclass
class FidelityResult:
    """Per-group counts (`groups`), the summaries, the batches and advantages they come from, and timings."""

    groups: pd.DataFrame
    summary: pd.DataFrame
    by_task_type: pd.DataFrame
    batches: dict[str, RolloutBatch] = field(default_factory=dict)
    advantages: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    planner: dict[str, float] = field(default_factory=dict)
    inconsistency: pd.DataFrame | None = None  # counts of scpo.analysis.inconsistency on the same rollouts


def hindsight_policy_dir(cfg) -> Path:
    """HCAPO's hindsight scorer: cfg.fidelity.hindsight_policy, else the ALFWorld warm start of the sft stage."""
    from scpo.pipeline.layout import run_dir

    path = cfg.fidelity.hindsight_policy or run_dir(cfg.train.out_dir, "alfworld", "sft", cfg.train.seed)
    return Path(path)


def _needs_policy_scores(methods: Sequence[str]) -> bool:
    """Whether any of `methods` declares it needs the policy's scores (HCAPO's hindsight log-probs)."""
    from scpo.credit.registry import method_spec

    return any(method_spec(m).policy_scores for m in methods)


def _load_hindsight_policy(cfg):
    """The hindsight scorer, with torch's CPU threads set from train.torch_threads (1 on shared cores: small scoring
    batches with 2 threads spin and cost 3-8x the CPU time on a loaded machine)."""
    from scpo.policy import load_policy
    from scpo.train.seeding import set_threads

    set_threads(cfg.train.torch_threads)

    path = hindsight_policy_dir(cfg)
    if not path.exists():
        raise FileNotFoundError(
            f"HCAPO needs a policy for its hindsight scores; none at {path}. Run the sft stage "
            "(`scpo train --stage sft --env alfworld`) or set fidelity.hindsight_policy"
        )
    return load_policy(path)


def _hindsight(
    cfg, batches: list[RolloutBatch], methods: Sequence[str], policy, timer: Timer, progress: bool
) -> list[np.ndarray | None]:
    """HCAPO's hindsight log-probs of each batch, every distinct row scored once over all of them (None: no hcapo)."""
    if not _needs_policy_scores(methods):
        return [None] * len(batches)
    from scpo.policy.hindsight import hindsight_scores

    with timer("hcapo_hindsight"):
        return hindsight_scores(
            policy,
            batches,
            temperature=cfg.credit.hcapo.temperature,
            max_prompt_tokens=cfg.policy.max_prompt_tokens,
            workers=cfg.fidelity.workers,
            progress=progress,
        )


def _estimate(cfg, batch: RolloutBatch, methods: Sequence[str], hindsight, timer: Timer) -> dict:
    """{method: advantages} of `methods` on `batch`. A method that reads a learned critic's values (PPO) is scored
    only on rollouts that carry them (the critic's run's own); any other unmet need is an error."""
    from scpo.credit.registry import method_spec

    critic = [m for m in methods if method_spec(m).critic]
    with timer("estimators"):
        results = estimate(batch, [m for m in methods if m not in critic], cfg.credit, hindsight_logprob=hindsight)
        results |= estimate(batch, critic, cfg.credit, unmet="skip")
        return {m: results[m].advantages for m in methods if m in results}


def oracle_inconsistency(batch: RolloutBatch, advantages: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Semantic inconsistency revision 2 (scpo.analysis.inconsistency: exact same-step pairs) of every estimator on
    `batch`, its control ordered by the oracle progress q (a dead end's -inf counts as -1e6)."""
    from scpo.analysis.inconsistency import inconsistency_counts

    target = np.maximum(batch.oracle_progress, -1e6)
    return inconsistency_counts(advantages, batch, target=target)


def _result(tables: list[pd.DataFrame], by: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    groups = pd.concat(tables, ignore_index=True)
    return (groups, summarize(groups, by=by, split="kind"), summarize(groups, by=by, split="task_type"))


def noisy_fidelity(
    cfg,
    *,
    eps: Sequence[float] | None = None,
    task_ids: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    methods: Sequence[str] | None = None,
    progress: bool = True,
    pool: PlannerPool | None = None,
) -> FidelityResult:
    """Fidelity of every estimator on noisy-optimal rollouts, one source per eps (arguments default to cfg.fidelity)."""
    from scpo.envs.alfworld import list_tasks

    f = cfg.fidelity
    eps = list(f.eps if eps is None else eps)
    seeds = list(f.seeds if seeds is None else seeds)
    methods = list(f.methods if methods is None else methods)
    task_ids = list(task_ids if task_ids is not None else list_tasks(f.split, cfg.data.root, limit=f.n_tasks))
    pool = pool or PlannerPool(cfg.data.root)
    timer = Timer()
    policy = _load_hindsight_policy(cfg) if _needs_policy_scores(methods) else None
    tables, incons, batches, advs = [], [], {}, {}
    with timer("rollouts"):
        sources = [
            noisy_optimal_rollouts(
                task_ids,
                seeds,
                e,
                group_size=f.group_size,
                max_steps=f.max_steps,
                data_root=cfg.data.root,
                pool=pool,
                progress=progress,
                history_length=cfg.env.history_length,
            )
            for e in eps
        ]
    hindsight = _hindsight(cfg, sources, methods, policy, timer, progress)
    for e, batch, h in zip(eps, sources, hindsight):
        a = _estimate(cfg, batch, methods, h, timer)
        with timer("metrics"):
            tables.append(fidelity_table(batch, a, eps=e))
        with timer("inconsistency"):
            incons.append(oracle_inconsistency(batch, a).assign(eps=e))
        batches[f"eps={e}"], advs[f"eps={e}"] = batch, a
    with timer("metrics"):
        groups, summary, by_type = _result(tables, ("estimator", "eps"))
    st = pool.stats()
    secs = np.array(st.seconds) if st.seconds else np.zeros(1)
    calls = np.array(st.call_seconds) if st.call_seconds else np.zeros(1)
    planner = {
        "v_star_queries": st.queries,
        "cache_hit_rate": st.hit_rate,
        "searches": st.searches,
        "call_ms_median": float(np.median(calls) * 1e3),
        "call_ms_p99": float(np.percentile(calls, 99) * 1e3),
        "search_ms_median": float(np.median(secs) * 1e3),
        "search_ms_p99": float(np.percentile(secs, 99) * 1e3),
        "search_ms_max": float(secs.max() * 1e3),
        "planner_s_total": float(calls.sum()),
    }
    return FidelityResult(
        groups,
        summary,
        by_type,
        batches,
        advs,
        timer.seconds,
        planner,
        inconsistency=pd.concat(incons, ignore_index=True),
    )


def label_with_planner(batch: RolloutBatch, data_root, pool: PlannerPool | None = None) -> RolloutBatch:
    """`batch` with its oracle progress q: ALFWorld's rollouts by replay in the fast engine through `pool` (shared
    planner processes and cache), any other environment's through the planner it declares (`EnvSpec.oracle_progress`,
    e.g. the corridor's `optimal_cost`); ValueError for an environment without one."""
    if batch.env in (None, "alfworld"):
        return label_progress(batch, data_root=data_root, pool=pool or PlannerPool(data_root), progress=False)
    from scpo.envs.registry import with_oracle_progress

    return with_oracle_progress(batch, data_root)


def trained_fidelity(
    cfg,
    run_dirs: Mapping[str, Sequence[Path]],
    *,
    methods: Sequence[str] | None = None,
    progress: bool = True,
    pool: PlannerPool | None = None,
    iterations: Sequence[int] | None = None,
) -> FidelityResult:
    """Fidelity of every estimator on the saved rollouts of trained runs: `run_dirs` maps a label (the method that
    trained the policy) to its runs (one per seed); every saved iteration is used (or the positions `iterations` of
    each run's saved ones, e.g. [-1]: the last), q labelled by replay with the planner of the rollouts' environment
    (`label_with_planner`: ALFWorld's through `pool`, the corridor's closed form)."""
    from scpo.analysis.rollout_files import iteration_files

    methods = list(cfg.fidelity.methods if methods is None else methods)
    timer = Timer()
    policy = _load_hindsight_policy(cfg) if _needs_policy_scores(methods) else None
    tables, incons, batches, advs = [], [], {}, {}
    labelled = []
    for label, runs in run_dirs.items():
        for k, run in enumerate(runs):
            files = iteration_files(run)
            for file in files if iterations is None else [files[i] for i in iterations]:
                with timer("label_q"):
                    batch = RolloutBatch.read(file)
                    if batch.env in (None, "alfworld") and pool is None:
                        pool = PlannerPool(cfg.data.root)
                    batch = label_with_planner(batch, cfg.data.root, pool)
                labelled.append((label, k, run, file, batch))
    hindsight = _hindsight(cfg, [b for *_, b in labelled], methods, policy, timer, progress)
    for (label, k, run, file, batch), h in zip(labelled, hindsight):
        a = _estimate(cfg, batch, methods, h, timer)
        with timer("inconsistency"):
            incons.append(oracle_inconsistency(batch, a).assign(policy_of=label, seed=k))
        with timer("metrics"):
            t = fidelity_table(batch, a, policy_of=label, run=str(run), iteration=file.stem)
            t["seed"] = k  # the run seed: mean and interval over the runs of a method
            t["group"] = t["iteration"] + "/" + t["group"].astype(str)
            tables.append(t)
        batches[f"{label}/{Path(run).name}/{file.stem}"] = batch
        advs[f"{label}/{Path(run).name}/{file.stem}"] = a
    if not tables:
        raise FileNotFoundError(f"no saved rollouts in the runs {dict(run_dirs)}")
    with timer("metrics"):
        groups, summary, by_type = _result(tables, ("estimator", "policy_of"))
    return FidelityResult(
        groups, summary, by_type, batches, advs, timer.seconds, inconsistency=pd.concat(incons, ignore_index=True)
    )


def plot_fidelity_vs_eps(summary: pd.DataFrame, path: str | Path, kind: str = "all") -> Path:
    """Six panels (AUC, recovered progress, false credit, Spearman, the two wrong-sign shares) vs eps, one line per
    estimator, 95% t-intervals over seeds as bars; rows of `summary` with kind == `kind`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = summary[summary["kind"] == kind]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    estimators = list(dict.fromkeys(data["estimator"]))
    eps_values = np.sort(data["eps"].unique())
    width = 0.6 * (np.min(np.diff(eps_values)) if len(eps_values) > 1 else 0.1)
    for ax, m in zip(axes.flat, PLOTTED):
        for j, est in enumerate(estimators):
            part = data[data["estimator"] == est].sort_values("eps")
            y = part[f"{m}_mean"].to_numpy(float)
            err = np.vstack([y - part[f"{m}_lo"].to_numpy(float), part[f"{m}_hi"].to_numpy(float) - y])
            x = part["eps"].to_numpy(float) + width * (j / max(len(estimators) - 1, 1) - 0.5)  # side by side
            style = {"color": "black", "linestyle": "--"} if est == "oracle" else {}
            ax.errorbar(
                x,
                y,
                yerr=np.nan_to_num(err),
                marker="o",
                markersize=4,
                capsize=2,
                label=est,
                linewidth=2.5 if est == "scpo" else 1.2,
                **style,
            )
        ax.set_ylim((-1.02, 1.02) if m == "rank_corr" else (-0.02, 1.02))
        ax.set_xticks(eps_values)
        ax.set_title(METRIC_LABELS[m], fontsize=10)
        ax.set_xlabel("eps (share of random steps)")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8, ncol=2)
    fig.suptitle(
        f"Credit fidelity vs the planner's oracle progress, {kind} groups (mean over task seeds, 95% t-interval)."
        " Full knowledge is a proxy: exploring steps count as q <= 0.",
        fontsize=10,
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def scpo_sweep(
    cfg, batches: Mapping[str, RolloutBatch], grid: Sequence[Mapping], *, progress: bool = True
) -> pd.DataFrame:
    """SCPO's fidelity for every option set of `grid` (dicts of SCPO options) on the same batches (e.g. one per eps):
    one summary row per (option set, source, group kind), the options as columns."""
    from tqdm.auto import tqdm

    from scpo.credit import compute_advantages

    rows = []
    for opts in tqdm(list(grid), desc="scpo sweep", unit="config", disable=not progress, leave=False):
        credit = cfg.credit.model_copy(deep=True)
        for k, v in opts.items():  # set on the section: `scorer=` of compute_advantages is the scorer object
            setattr(credit.scpo, k, v)
        tables = []
        for source, batch in batches.items():
            a = compute_advantages("scpo", batch, credit).advantages
            tables.append(fidelity_table(batch, {"scpo": a}, source=source))
        s = summarize(pd.concat(tables, ignore_index=True), by=("source",), split="kind")
        for k, v in opts.items():
            s.insert(0, k, v)
        rows.append(s)
    return pd.concat(rows, ignore_index=True)


def plot_scpo_sweep(sweep: pd.DataFrame, path: str | Path, kind: str = "mixed") -> Path:
    """Recovered progress vs false credit of every swept SCPO option set (mean over sources and seeds), one marker per
    scorer x step text, tau written beside each point; `kind` groups only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = sweep[sweep["kind"] == kind]
    keys = [c for c in ("scorer", "step_text", "match", "mode", "reference") if c in data.columns]
    agg = data.groupby(keys + ["tau"], sort=False)[["recovered_progress_mean", "false_credit_mean", "auc_mean"]].mean()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for key, part in agg.reset_index().groupby(keys, sort=False):
        label = " / ".join(map(str, key if isinstance(key, tuple) else (key,)))
        axes[0].plot(part["false_credit_mean"], part["recovered_progress_mean"], marker="o", label=label)
        for _, r in part.iterrows():
            axes[0].annotate(f"{r['tau']:g}", (r["false_credit_mean"], r["recovered_progress_mean"]), fontsize=7)
        axes[1].plot(part["tau"], part["auc_mean"], marker="o", label=label)
    axes[0].set_xlabel("false credit (q <= 0: A > 0)")
    axes[0].set_ylabel("recovered progress (failed, q = 1: A > 0)")
    axes[1].set_xlabel("tau")
    axes[1].set_ylabel("AUC (q = 1 vs q <= 0)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.suptitle(
        f"SCPO options on credit fidelity ({kind} groups; mean over eps and task seeds; numbers: tau)", fontsize=10
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def calibrate_tau(sweep: pd.DataFrame, defaults, kind: str = "mixed") -> pd.DataFrame:
    """SCPO's tau calibrated per scorer on the rollouts of `sweep` (`scpo_sweep`): for every (scorer, step_text,
    match) of the sweep, the metrics of each tau averaged over its sources (the eps levels) in `kind` groups (mixed:
    where SCPO acts), then the tau with the least wrong-sign credit (`wrong_sign`, the share of A != 0 whose sign
    disagrees with q; ties: the higher AUC, then the tau nearest the default) and the tau with the highest AUC. One row
    per option set, with the default tau's values beside (`defaults`: the config's SCPO options, e.g.
    cfg.credit.scpo) and `calibrated`: whether the default tau is the least-wrong-sign one; for scale, the default's
    standard error over seeds (`wrong_sign_se_at_default`: std / sqrt(seeds), mean over sources), which a gap to the
    least-wrong-sign tau can be read against. `is_default`: the row whose step text and match are the config's."""
    keys = [c for c in ("scorer", "step_text", "match") if c in sweep.columns]
    data = sweep[sweep["kind"] == kind]
    if data.empty or "tau" not in data.columns:
        raise ValueError(
            f"calibrate_tau needs a sweep over tau with {kind!r} groups; got columns {list(sweep.columns)}"
        )
    cols = ["wrong_sign_mean", "wrong_sign_pos_mean", "wrong_sign_neg_mean", "auc_mean", "wrong_sign_se"]
    data = data.assign(wrong_sign_se=data["wrong_sign_std"] / np.sqrt(data["n_seeds"]))
    per_tau = data.groupby(keys + ["tau"], sort=False)[cols].mean().reset_index()
    default_tau = float(defaults.tau)
    rows = []
    for key, part in per_tau.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        part = part.assign(distance=(part["tau"] - default_tau).abs())
        least = part.sort_values(["wrong_sign_mean", "auc_mean", "distance"], ascending=[True, False, True]).iloc[0]
        best_auc = part.sort_values(["auc_mean", "wrong_sign_mean", "distance"], ascending=[False, True, True]).iloc[0]
        at_default = part[np.isclose(part["tau"], default_tau)]
        row = dict(zip(keys, key))
        row["is_default"] = all(getattr(defaults, k) == v for k, v in row.items() if k != "scorer")
        row.update(
            taus=", ".join(f"{t:g}" for t in sorted(part["tau"])),
            tau_least_wrong_sign=float(least["tau"]),
            wrong_sign_at_least=float(least["wrong_sign_mean"]),
            auc_at_least=float(least["auc_mean"]),
            tau_best_auc=float(best_auc["tau"]),
            auc_at_best=float(best_auc["auc_mean"]),
            wrong_sign_at_best_auc=float(best_auc["wrong_sign_mean"]),
            tau_default=default_tau,
            wrong_sign_at_default=float(at_default["wrong_sign_mean"].iloc[0]) if len(at_default) else np.nan,
            wrong_sign_pos_at_default=float(at_default["wrong_sign_pos_mean"].iloc[0]) if len(at_default) else np.nan,
            auc_at_default=float(at_default["auc_mean"].iloc[0]) if len(at_default) else np.nan,
            wrong_sign_se_at_default=float(at_default["wrong_sign_se"].iloc[0]) if len(at_default) else np.nan,
            calibrated=bool(np.isclose(least["tau"], default_tau)),
        )
        rows.append(row)
    return pd.DataFrame(rows)
