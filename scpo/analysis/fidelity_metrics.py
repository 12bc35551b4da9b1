"""Credit fidelity: how well an estimator's step advantages A agree with a planner's oracle progress q (ALFWorld, the
corridor), or with any other per-step label of the step's worth (e.g. an exact on-policy advantage).

Definitions (docs/algorithms.md, "Measuring credit"), all *within groups* (the steps of one task and seed):
- AUC: the probability that a step with q = 1 gets a larger A than a step with q <= 0 of the same group (ties count
  1/2). Pooled over groups as Mann-Whitney counts: sum_g U_g / sum_g P_g N_g.
- recovered progress: the share of q = 1 steps *of failed trajectories* with A > 0.
- false credit: the share of q <= 0 steps with A > 0.
- rank correlation: Spearman's rho of A and q over the steps of a group, averaged over the groups where both vary.
- wrong-sign credit (`wrong_sign_counts`, any label y; here y = q): among the steps credited up, the share whose label
  is negative, wrong_sign_pos = #{A > 0, y < 0} / #{A > 0}; among the steps credited down, the share whose label is
  positive, wrong_sign_neg = #{A < 0, y > 0} / #{A < 0}; and over all signed credit, wrong_sign =
  (#{A > 0, y < 0} + #{A < 0, y > 0}) / #{A != 0}. Steps with A = 0 carry no sign and count in no denominator; a
  step with y = 0 counts in the denominator and is never wrong. Conditioned on the label instead (`wrong_sign_shares`):
  rewarded mistakes #{A > 0, y < 0} / #{y < 0} and punished progress #{A < 0, y > 0} / #{y > 0}.
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
    "wrong_sign_counts",
    "wrong_sign_shares",
    "credit_sign",
]

METRICS = ("auc", "recovered_progress", "false_credit", "rank_corr", "wrong_sign", "wrong_sign_pos", "wrong_sign_neg")
GROUP_KINDS = ("mixed", "all_failed", "all_won")
_SUMS = ("auc_u", "auc_pairs", "rec_hits", "rec_total", "fc_hits", "fc_total", "ws_pos_hits", "ws_pos_total")
_SUMS += ("ws_neg_hits", "ws_neg_total")


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


def _signs(advantages, labels, mask=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.asarray(advantages, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if a.shape != y.shape or a.ndim != 1:
        raise ValueError(f"wrong-sign credit needs 1-D advantages and labels of one length, got {a.shape}, {y.shape}")
    keep = ~np.isnan(y) & ~np.isnan(a)  # a step without a label (or without credit) is left out; -inf labels count
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        if m.shape != a.shape:
            raise ValueError(f"the mask has shape {m.shape}, the advantages {a.shape}")
        keep &= m
    return a, y, keep


def credit_sign(advantages, labels) -> np.ndarray:
    """Per step: +1 where the credit has the wrong sign upward (A > 0, y < 0), -1 downward (A < 0, y > 0), 0 otherwise
    (agreeing signs, A = 0, y = 0 or no label): what the credit explorer marks."""
    a, y, keep = _signs(advantages, labels)
    return np.where(keep & (a > 0) & (y < 0), 1, np.where(keep & (a < 0) & (y > 0), -1, 0)).astype(np.int8)


def wrong_sign_counts(advantages, labels, mask=None) -> dict[str, int]:
    """The counts behind wrong-sign credit (module docstring) of advantages A against per-step labels y (the planner's
    q, an exact advantage A^pi, ...) over the steps of `mask` (default: all) with a label (NaN: none):
    n_pos = #{A > 0}, n_pos_wrong = #{A > 0, y < 0}, n_neg = #{A < 0}, n_neg_wrong = #{A < 0, y > 0},
    n_label_pos = #{y > 0}, n_label_neg = #{y < 0}."""
    a, y, keep = _signs(advantages, labels, mask)
    a, y = a[keep], y[keep]
    return {
        "n_pos": int(np.sum(a > 0)),
        "n_pos_wrong": int(np.sum((a > 0) & (y < 0))),
        "n_neg": int(np.sum(a < 0)),
        "n_neg_wrong": int(np.sum((a < 0) & (y > 0))),
        "n_label_pos": int(np.sum(y > 0)),
        "n_label_neg": int(np.sum(y < 0)),
    }


def wrong_sign_shares(advantages, labels, mask=None) -> dict[str, float]:
    """`wrong_sign_counts` and its shares (NaN over an empty denominator): wrong_sign, wrong_sign_pos (y < 0 given
    A > 0), wrong_sign_neg (y > 0 given A < 0), rewarded_mistakes (A > 0 given y < 0), punished_progress (A < 0
    given y > 0)."""
    c = wrong_sign_counts(advantages, labels, mask)

    def share(hits: int, total: int) -> float:
        return hits / total if total else float("nan")

    return {
        **c,
        "wrong_sign": share(c["n_pos_wrong"] + c["n_neg_wrong"], c["n_pos"] + c["n_neg"]),
        "wrong_sign_pos": share(c["n_pos_wrong"], c["n_pos"]),
        "wrong_sign_neg": share(c["n_neg_wrong"], c["n_neg"]),
        "rewarded_mistakes": share(c["n_pos_wrong"], c["n_label_neg"]),
        "punished_progress": share(c["n_neg_wrong"], c["n_label_pos"]),
    }


def group_fidelity(batch: RolloutBatch, advantages: np.ndarray) -> pd.DataFrame:
    """One row per group: its ids and kind, and the counts every metric pools (AUC's U and pairs, recovered progress,
    false credit and wrong-sign hits / totals) plus its Spearman rho (NaN where A or q is constant in the group)."""
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
    negative = a < 0
    ws_pos_total, ws_pos_hits = count(positive), count(positive & (q < 0))
    ws_neg_total, ws_neg_hits = count(negative), count(negative & (q > 0))
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
            "ws_pos_hits": ws_pos_hits,
            "ws_pos_total": ws_pos_total,
            "ws_neg_hits": ws_neg_hits,
            "ws_neg_total": ws_neg_total,
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

    Columns: by..., split, n_seeds, n_groups, n_pos_failed, n_neg, n_credited_up (A > 0), n_credited_down (A < 0), then
    <metric>_mean / _std / _lo / _hi per metric."""
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
        per_seed["wrong_sign"] = (per_seed["ws_pos_hits"] + per_seed["ws_neg_hits"]) / (
            per_seed["ws_pos_total"] + per_seed["ws_neg_total"]
        )
        per_seed["wrong_sign_pos"] = per_seed["ws_pos_hits"] / per_seed["ws_pos_total"]
        per_seed["wrong_sign_neg"] = per_seed["ws_neg_hits"] / per_seed["ws_neg_total"]
    rows = []
    for key, part in per_seed.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key))
        row.update(
            n_seeds=len(part),
            n_groups=int(part["n_groups"].sum()),
            n_pos_failed=int(part["rec_total"].sum()),
            n_neg=int(part["fc_total"].sum()),
            n_credited_up=int(part["ws_pos_total"].sum()),
            n_credited_down=int(part["ws_neg_total"].sum()),
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
