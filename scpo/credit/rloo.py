"""RLOO, multi-turn: each step row's score against the leave-one-out mean of its group, as verl computes it
(`compute_rloo_outcome_advantage`, called by verl-agent's trainer). Spec: docs/algorithms.md, "RLOO".

    s_{i,t} = R_i - pen_t                                   (the row's score: token_level_rewards summed)
    A_{i,t} = N / (N - 1) * (s_{i,t} - mean(S_g))  if N > 1,   A_{i,t} = s_{i,t}  if N = 1

With `baseline_over = "steps"` (verl's default) S_g holds every step row of group g and N is their number, so a
trajectory's own other steps stay in its baseline; with "trajectories" S_g holds one score per trajectory, its first
row's (R_i - pen_{i,0}, verl's `compute_mean_std_cross_steps=False`), and N is the number of trajectories. No std, no
discount.
"""

from __future__ import annotations

import numpy as np

from scpo.credit.grouping import invalid_penalty, segment_sizes, trajectory_first_rows
from scpo.credit.grpo import group_stats
from scpo.credit.options import CreditConfig
from scpo.credit.result import CreditResult
from scpo.rollout_types import RolloutBatch

__all__ = ["leave_one_out", "compute_rloo"]


def leave_one_out(score: np.ndarray, group: np.ndarray, baseline_rows: np.ndarray) -> np.ndarray:
    """N / (N - 1) (score - mean) per row, N and mean over the rows `baseline_rows` of the row's group (N = 1: the
    score itself), computed as verl does: score * N / (N - 1) - mean * N / (N - 1)."""
    score = np.asarray(score, dtype=np.float64)
    group = np.asarray(group, dtype=np.int64)
    k = int(group.max()) + 1
    count = np.bincount(group[baseline_rows], minlength=k).astype(np.float64)
    mean = np.bincount(group[baseline_rows], weights=score[baseline_rows], minlength=k) / np.maximum(count, 1)
    n = count[group]
    factor = np.divide(n, n - 1, out=np.ones_like(n), where=n > 1)
    return np.where(n > 1, score * factor - mean[group] * factor, score)


def compute_rloo(batch: RolloutBatch, cfg: CreditConfig, **_: object) -> CreditResult:
    """RLOO on `batch`: the advantage is the leave-one-out term; the step term is 0. Returns are R_i."""
    pen = invalid_penalty(batch.valid, cfg.norm.lambda_invalid)
    score = np.asarray(batch.episode_return, dtype=np.float64) - pen
    if cfg.rloo.baseline_over == "steps":
        rows = np.arange(batch.n_rows)
    else:
        rows = trajectory_first_rows(batch.traj_id)
    adv = leave_one_out(score, batch.group_id, rows)
    diag = {"episode_adv": adv, "step_adv": np.zeros_like(adv), "anchor_group_size": segment_sizes(batch.group_id)}
    returns = np.asarray(batch.episode_return, dtype=np.float64).copy()
    return CreditResult("rloo", adv, returns, diag, group_stats(batch))
