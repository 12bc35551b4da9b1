"""Credit fidelity: how well an estimator's step advantages A agree with the planner's oracle progress q (ALFWorld).

Definitions (docs/algorithms.md, "Measuring credit"), all *within groups* (the steps of one task and seed):
- AUC: the probability that a step with q = 1 gets a larger A than a step with q <= 0 of the same group (ties count
  1/2). Pooled over groups as Mann-Whitney counts: sum_g U_g / sum_g P_g N_g.
- recovered progress: the share of q = 1 steps *of failed trajectories* with A > 0.
- false credit: the share of q <= 0 steps with A > 0.
- rank correlation: Spearman's rho of A and q over the steps of a group, averaged over the groups where both vary.
Splits: the group kind (mixed: won and failed episodes; all_failed; all_won; all) and the task type. Each metric is
computed per seed (a pooled ratio of sums over that seed's groups) and reported as mean, std and a 95% Student-t
interval over the seeds.

Full knowledge is a proxy: a step that explores (opens a cabinet to look inside) has q <= 0 although an agent without
the map needs it, so "false credit" includes credit for useful exploration. Read the numbers with that in mind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from scpo.batch import RolloutBatch

__all__ = [
    "METRICS",
    "GROUP_KINDS",
    "group_kinds",
    "group_fidelity",
    "fidelity_table",
    "summarize",
    "group_view",
]

METRICS = ("auc", "recovered_progress", "false_credit", "rank_corr")
GROUP_KINDS = ("mixed", "all_failed", "all_won")
_SUMS = ("auc_u", "auc_pairs", "rec_hits", "rec_total", "fc_hits", "fc_total")


def _dense(x: np.ndarray) -> np.ndarray:
    return np.unique(x, return_inverse=True)[1].astype(np.int64)


def group_kinds(batch: RolloutBatch) -> np.ndarray:
    """Per group code 0..G-1: 'mixed', 'all_failed' or 'all_won' (by the outcomes of its trajectories)."""
    g = _dense(batch.group_id)
    won = np.bincount(g, weights=batch.won.astype(float)) > 0
    lost = np.bincount(g, weights=(~batch.won).astype(float)) > 0
    return np.where(won & lost, "mixed", np.where(won, "all_won", "all_failed")).astype(object)


def _ranks_within(values: np.ndarray, seg: np.ndarray, n_seg: int) -> np.ndarray:
    """1-based average ranks of `values` inside each segment (ties share their mean rank), vectorised."""
    order = np.lexsort((values, seg))
    v, s = values[order], seg[order]
    n = len(v)
    new_block = np.r_[True, (s[1:] != s[:-1]) | (v[1:] != v[:-1])]
    starts = np.flatnonzero(new_block)
    seg_start = np.zeros(n_seg, dtype=np.int64)
    first_of_seg = np.r_[True, s[1:] != s[:-1]]
    seg_start[s[first_of_seg]] = np.flatnonzero(first_of_seg)
    pos = np.arange(n) - seg_start[s] + 1.0
    block_mean = np.add.reduceat(pos, starts) / np.diff(np.r_[starts, n])
    ranks = np.empty(n)
    ranks[order] = np.repeat(block_mean, np.diff(np.r_[starts, n]))
    return ranks


def group_fidelity(batch: RolloutBatch, advantages: np.ndarray) -> pd.DataFrame:
    """One row per group: its ids and kind, and the counts every metric pools (AUC's U and pairs, recovered progress
    and false credit hits / totals) plus its Spearman rho (NaN where A or q is constant in the group)."""
    q = batch.oracle_progress
    if q is None:
        raise ValueError(
            "credit fidelity needs the batch's oracle_progress column (scpo.envs.alfworld.oracle_rollouts)"
        )
    a = np.asarray(advantages, dtype=np.float64)
    if a.shape != q.shape:
        raise ValueError(f"advantages have shape {a.shape}, the batch has {q.shape[0]} rows")
    g = _dense(batch.group_id)
    n_g = int(g.max()) + 1
    pos, neg = q == 1, q <= 0
    count = lambda mask, w=None: np.bincount(g[mask], weights=None if w is None else w[mask], minlength=n_g)  # noqa: E731
    sub = pos | neg
    ranks = np.zeros(len(a))
    ranks[sub] = _ranks_within(a[sub], g[sub], n_g)
    n_pos, n_neg = count(pos), count(neg)
    auc_u = count(pos, ranks) - n_pos * (n_pos + 1) / 2.0
    failed = ~batch.won
    positive = a > 0
    rec_total, rec_hits = count(pos & failed), count(pos & failed & positive)
    fc_total, fc_hits = count(neg), count(neg & positive)
    # Spearman: Pearson correlation of within-group ranks
    ra, rq = _ranks_within(a, g, n_g), _ranks_within(q, g, n_g)
    size = np.bincount(g, minlength=n_g).astype(float)
    ma, mq = np.bincount(g, ra, n_g) / size, np.bincount(g, rq, n_g) / size
    da, dq = ra - ma[g], rq - mq[g]
    cov, va, vq = np.bincount(g, da * dq, n_g), np.bincount(g, da * da, n_g), np.bincount(g, dq * dq, n_g)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where((va > 1e-12) & (vq > 1e-12), cov / np.sqrt(va * vq), np.nan)
    first = np.unique(g, return_index=True)[1]
    return pd.DataFrame(
        {
            "group": np.arange(n_g),
            "task_id": batch.task_id[first],
            "task_type": batch.task_type[first],
            "seed": batch.seed[first],
            "kind": group_kinds(batch),
            "n_steps": size.astype(np.int64),
            "auc_u": auc_u,
            "auc_pairs": n_pos * n_neg,
            "rec_hits": rec_hits,
            "rec_total": rec_total,
            "fc_hits": fc_hits,
            "fc_total": fc_total,
            "rank_corr": rho,
        }
    )


def fidelity_table(batch: RolloutBatch, advantages: Mapping[str, np.ndarray], **labels) -> pd.DataFrame:
    """Per-group fidelity counts of every estimator on `batch`, with columns `estimator` and the given labels (e.g.
    source="eps=0.4")."""
    parts = []
    for m, a in advantages.items():
        t = group_fidelity(batch, a)
        t.insert(0, "estimator", m)
        for k, v in labels.items():
            t.insert(1, k, v)
        parts.append(t)
    return pd.concat(parts, ignore_index=True)


def _t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float, float]:
    v = values[np.isfinite(values)]
    if len(v) == 0:
        return (np.nan,) * 4
    mean = float(v.mean())
    if len(v) == 1:
        return mean, np.nan, np.nan, np.nan
    sd = float(v.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, len(v) - 1)) * sd / np.sqrt(len(v))
    return mean, sd, mean - half, mean + half


def summarize(
    groups: pd.DataFrame, by: Iterable[str] = ("estimator",), split: str | None = "kind", seed_col: str = "seed"
) -> pd.DataFrame:
    """Fidelity metrics from `group_fidelity` rows: per `by` (+ `split`, whose values also get an 'all' level) and
    seed, the pooled metrics; then mean, std and the 95% t-interval over seeds, and the counts they rest on.

    Columns: by..., split, n_seeds, n_groups, n_pos_failed, n_neg, then <metric>_mean / _std / _lo / _hi per metric."""
    by = list(by)
    frames = [groups.assign(**{split: "all"})] if split else [groups]
    if split:
        frames.append(groups)
    data = pd.concat(frames, ignore_index=True)
    keys = by + ([split] if split else [])
    per_seed = (
        data.groupby(keys + [seed_col], sort=False)
        .agg(**{c: (c, "sum") for c in _SUMS}, rank_corr=("rank_corr", "mean"), n_groups=("group", "size"))
        .reset_index()
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        per_seed["auc"] = per_seed["auc_u"] / per_seed["auc_pairs"]
        per_seed["recovered_progress"] = per_seed["rec_hits"] / per_seed["rec_total"]
        per_seed["false_credit"] = per_seed["fc_hits"] / per_seed["fc_total"]
    rows = []
    for key, part in per_seed.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        row.update(
            n_seeds=len(part),
            n_groups=int(part["n_groups"].sum()),
            n_pos_failed=int(part["rec_total"].sum()),
            n_neg=int(part["fc_total"].sum()),
        )
        for m in METRICS:
            row[f"{m}_mean"], row[f"{m}_std"], row[f"{m}_lo"], row[f"{m}_hi"] = _t_interval(part[m].to_numpy(float))
        rows.append(row)
    return pd.DataFrame(rows)


def group_view(batch: RolloutBatch, advantages: Mapping[str, np.ndarray], group: int) -> pd.DataFrame:
    """The steps of one group (dense group code `group`) with q and every estimator's credit, for reading side by side:
    trajectory, outcome, step, action, q, then one column per estimator."""
    g = _dense(batch.group_id)
    if not 0 <= group <= int(g.max()):
        raise ValueError(f"group {group} is out of range; the batch has groups 0..{int(g.max())}")
    rows = np.flatnonzero(g == group)
    traj = _dense(batch.traj_id[rows])
    out = pd.DataFrame(
        {
            "trajectory": traj,
            "won": batch.won[rows],
            "step": batch.step[rows],
            "action": batch.action[rows],
            "q": batch.oracle_progress[rows],
        }
    )
    for m, a in advantages.items():
        out[m] = np.round(np.asarray(a)[rows], 3)
    return out
