"""Oracle credit [ours]: the planner's oracle progress as the step credit (ALFWorld and the corridor, the environments
with a planner; the upper bound of fidelity tables).

q_t = V*(s_t) - V*(s_{t+1}) is potential-based shaping (Ng, Harada & Russell 1999) with the potential Phi(s) = -V*(s)
and no discount inside the potential: F_t = Phi(s_{t+1}) - Phi(s_t) = q_t, 1 on a step of an optimal path, 0 or less
otherwise. The estimator uses it as the step term, uncentred so that its sign is q's:

    A^S_t = omega (max(q_t, -dead_end) - pen_t),        A_t = w_E A^E_t + A^S_t

where A^E is GRPO's episode advantage (norm(R_i - pen_t) over the group's steps) and pen_t the invalid-action penalty.
With w_E = 0 (default) the credit is positive exactly on the steps that bring the goal closer; w_E > 0 adds outcome
credit for training runs. `baseline: group_mean` subtracts the step term's mean over the group's rows, b_g = mean_{rows
of g} A^S_t: a baseline constant over the group, which leaves the expected policy gradient unchanged up to the row's own
share of the mean (sum_k pi_k grad log pi_k = 0; GRPO's group mean has the same share) and makes the advantages
mean-zero, as GRPO's are; the order of a group's steps (fidelity AUC, rank correlation) is unchanged, the signs (false
credit, recovered progress) are not. `baseline: optimal` subtracts omega: the step term becomes omega A*(s_t, a_t) with
the optimal advantage A*(s, a) = Q*(s, a) - V*(s) = q_t - 1 in steps (deterministic moves, unit cost), 0 on every
optimal step and below 0 on every other, so a step that undoes a mistake (q = 1 after a q = -1 step) is optimal there
but not credited above it. `level: trajectory` credits every step of a trajectory alike with the progress the
whole trajectory made: GRPO on the shaped return R_i + omega sum_t q_t (`_trajectory_level`). A step into a dead end
(q = -inf: e.g. picking up an object no receptacle accepts, after which the goal cannot be reached) gets -dead_end.
The batch must carry `oracle_progress` (the environment's planner, `EnvSpec.oracle_progress`: on ALFWorld
scpo.envs.alfworld.oracle_rollouts' noisy-optimal rollouts or `label_progress` on any rollouts; on the corridor
`scpo.envs.corridor.label_progress`). On ALFWorld full knowledge is a proxy: exploring steps get q <= 0.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from scpo.batch import RolloutBatch
from scpo.credit.grouping import invalid_penalty, segment_norm, segment_sizes
from scpo.credit.grpo import episode_term, group_stats
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["OracleOptions", "compute_oracle"]


class OracleOptions(StrictModel):
    """[ours] credit from the planner's oracle progress q_t (ALFWorld): A = episode_weight A^E + omega (q_t - pen_t)."""

    omega: float = Field(1.0, gt=0, description="weight of the oracle progress q_t")
    episode_weight: float = Field(0.0, ge=0, description="w_E: weight of GRPO's episode advantage (0: progress only)")
    dead_end: float = Field(
        10.0, gt=0, description="a step into a state the goal cannot be reached from (q = -inf) gets q = -dead_end"
    )
    baseline: Literal["none", "group_mean", "optimal"] = Field(
        "none",
        description="none: the step term uncentred (its sign is q's); group_mean: minus its mean over the group's "
        "rows (mean-zero advantages, as GRPO's); optimal: minus omega, the optimal advantage "
        "A*(s, a) = Q*(s, a) - V*(s) = q - 1 (0 on an optimal step, below 0 on every other)",
    )
    level: Literal["step", "trajectory"] = Field(
        "step",
        description="step: each step credited with its own q_t; trajectory: GRPO on the shaped return, "
        "A = norm(R_i + omega sum_t q_t - pen_t, group's rows): the progress the whole trajectory made (potential-"
        "based shaping summed over the episode), every step of it alike",
    )

    @model_validator(mode="after")
    def _trajectory_level_has_its_own_baseline(self):
        if self.level == "trajectory" and (self.baseline != "none" or self.episode_weight):
            raise ValueError(
                f"credit.oracle.level=trajectory normalises the shaped return within the group itself: it takes "
                f"baseline=none and episode_weight=0 (got baseline={self.baseline!r}, "
                f"episode_weight={self.episode_weight})"
            )
        return self


@credit_method(
    "oracle",
    OracleOptions,
    reads=("grpo",),
    columns=("oracle_progress",),
    bound="reference: ground-truth credit of the fully observed task (V*)",
)
def compute_oracle(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """Oracle credit on `batch` (needs its oracle_progress column)."""
    q = batch.oracle_progress
    if q is None:
        raise ValueError(
            "the oracle estimator needs the batch's oracle_progress column (q_t = V*(s_t) - V*(s_t+1)); "
            "label ALFWorld rollouts with scpo.envs.alfworld.oracle_rollouts.label_progress"
        )
    if np.any(np.isnan(q) | (q == np.inf)):
        bad = np.flatnonzero(np.isnan(q) | (q == np.inf))[:5]
        raise ValueError(f"oracle_progress is NaN or +inf at rows {bad.tolist()}; q_t is at most 1")
    opts, norm = cfg.oracle, cfg.norm
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    if opts.level == "trajectory":
        return _trajectory_level(batch, cfg, q, pen)
    step_adv = opts.omega * (np.maximum(q, -opts.dead_end) - pen)
    if opts.baseline == "optimal":
        step_adv = step_adv - opts.omega
    elif opts.baseline == "group_mean":
        step_adv = segment_norm(step_adv, batch.group_id, scale="none")
    ep_adv = np.zeros_like(step_adv)
    if opts.episode_weight:
        ep_adv = opts.episode_weight * episode_term(batch, cfg, pen)
    diag = {"episode_adv": ep_adv, "step_adv": step_adv, "anchor_group_size": segment_sizes(batch.group_id)}
    return CreditResult("oracle", ep_adv + step_adv, q.astype(np.float64).copy(), diag, group_stats(batch))


def _trajectory_level(batch: RolloutBatch, cfg: CreditOptions, q: np.ndarray, pen: np.ndarray) -> CreditResult:
    """`level: trajectory`: A_{i,t} = norm(R_i + omega P_i - pen_t, all step rows of group g), with the trajectory's
    progress P_i = sum_t max(q_t, -dead_end) (= V*(s_0) - V*(s_T) without dead ends): GRPO (Eq. 3 of GiGPO) on the
    return shaped by the potential -V* (Ng et al. 1999: sum_t [r_t + Phi(s_t+1) - Phi(s_t)] = R + Phi(s_T) - Phi(s_0),
    where Phi(s_0) is one value per group)."""
    opts = cfg.oracle
    traj = np.asarray(batch.traj_id)
    progress = np.bincount(traj, weights=np.maximum(q, -opts.dead_end).astype(np.float64))[traj]
    shaped = np.asarray(batch.episode_return, dtype=np.float64) + opts.omega * progress
    adv = episode_term(batch, cfg, pen, shaped)
    diag = {"episode_adv": adv, "step_adv": np.zeros_like(adv), "anchor_group_size": segment_sizes(batch.group_id)}
    return CreditResult("oracle", adv, q.astype(np.float64).copy(), diag, group_stats(batch))
