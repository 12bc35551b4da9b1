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

from typing import Literal

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch
from scpo.credit.grouping import invalid_penalty, segment_sizes, trajectory_first_rows
from scpo.credit.grpo import group_stats
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["RLOOOptions", "leave_one_out", "compute_rloo"]


class RLOOOptions(StrictModel):
    """RLOO as verl's `compute_rloo_outcome_advantage` (docs/algorithms.md, "RLOO")."""

    baseline_over: Literal["steps", "trajectories"] = Field(
        "steps",
        description="the leave-one-out unit: every step row of the group (verl's default) or one score per "
        "trajectory (its first row's, as verl's compute_mean_std_cross_steps=False)",
    )


def leave_one_out(score: np.ndarray, group: np.ndarray, baseline_rows: np.ndarray) -> np.ndarray:
    """score * N / (N - 1) - mean * N / (N - 1) per row (verl's arithmetic), N and the mean over the rows
    `baseline_rows` of the row's group; a group with N = 1 has mean 0 and factor 1, so its rows keep their score.
    Every group has at least one baseline row."""
    n = np.bincount(group[baseline_rows])[group]
    total = np.bincount(group[baseline_rows], weights=score[baseline_rows])[group]
    factor = n / np.maximum(n - 1, 1)
    mean = np.where(n > 1, total / n, 0.0)
    return score * factor - mean * factor


@credit_method("rloo", RLOOOptions)
def compute_rloo(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """RLOO on `batch`: the advantage is the leave-one-out term; the step term is 0. Returns are R_i."""
    pen = invalid_penalty(batch.valid, cfg.norm.lambda_invalid)
    if cfg.rloo.baseline_over == "steps":
        rows = np.arange(batch.n_rows)
    else:
        rows = trajectory_first_rows(batch.traj_id)
    adv = leave_one_out(batch.episode_return - pen, batch.group_id, rows)
    diag = {"episode_adv": adv, "step_adv": np.zeros_like(adv), "anchor_group_size": segment_sizes(batch.group_id)}
    return CreditResult("rloo", adv, batch.episode_return.copy(), diag, group_stats(batch))
