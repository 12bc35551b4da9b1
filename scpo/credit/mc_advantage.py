"""Monte-Carlo advantage [ours, after VinePPO: Kazemnejad et al. 2024, arXiv:2410.01679]: the policy's own advantage of
each step, from its value estimates at the state it acted on and at the next one (`policy_value`,
`scpo.rollout.branches`: K continuations of the current policy per state):

    delta_t = (r_t + V(s_{t+1}) - V(s_t)) / R_success - pen_t          V(s_{T_i}) = 0 after a trajectory's last step
    A_t = delta_t / (std_batch(delta) + eps)   (whiten: true)          or A_t = delta_t   (whiten: false)

With exact values this is A^pi(s_t, a_t) = Q^pi(s_t, a_t) - V^pi(s_t) (gamma = 1, deterministic steps), in units of
the success probability: the credit the policy-gradient theorem asks for, for this policy, where the planner's V* of
the `oracle` estimator is the optimal policy's. Its estimate is unbiased given independent continuations (the
baseline V(s_t) does not depend on a_t) and its variance falls as 1/K. Over a trajectory the deltas sum to
(R_i - V(s_0)) / R_success minus its penalties. `whiten` divides by the standard deviation over the batch's rows
(PPO's advantage whitening without the centring, which would move the zero of every step); it puts the advantages on
the scale of GRPO's normalised ones. The batch must carry `policy_value`; the trainer labels it before credit.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch
from scpo.credit.grouping import invalid_penalty, next_row_in_trajectory, segment_sizes
from scpo.credit.grpo import group_stats
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["MCAdvantageOptions", "compute_mc_advantage", "next_values"]


class MCAdvantageOptions(StrictModel):
    """[ours, after VinePPO] the policy's own advantage from Monte-Carlo continuations (scpo.credit.mc_advantage)."""

    rollouts: int = Field(
        2, ge=1, description="K: continuations of the current policy per visited state (its value V is their mean)"
    )
    whiten: bool = Field(
        True,
        description="true: the advantages divided by their standard deviation over the batch (not centred); false: "
        "in units of the success probability",
    )


def next_values(batch: RolloutBatch, values: np.ndarray) -> np.ndarray:
    """Per row, V of the next row of its trajectory (0 after the trajectory's last step)."""
    nxt = next_row_in_trajectory(batch.traj_id)
    return np.where(nxt >= 0, np.asarray(values, dtype=np.float64)[nxt], 0.0)


@credit_method(
    "mc_advantage",
    MCAdvantageOptions,
    columns=("policy_value",),
    bound="reference: the policy's own advantage (Monte-Carlo values)",
)
def compute_mc_advantage(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """Monte-Carlo advantage on `batch` (needs its policy_value column)."""
    v = batch.policy_value
    if v is None:
        raise ValueError(
            "the mc_advantage estimator needs the batch's policy_value column (V^pi(s_t) from Monte-Carlo "
            "continuations); label it with scpo.rollout.branches.policy_values, as the trainer does"
        )
    if not np.all(np.isfinite(v)):
        bad = np.flatnonzero(~np.isfinite(v))[:5]
        raise ValueError(f"policy_value is not finite at rows {bad.tolist()}")
    opts, norm = cfg.mc_advantage, cfg.norm
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    returns = batch.reward + next_values(batch, v)  # Q estimate: r_t + V(s_{t+1})
    delta = (returns - v) / cfg.success_reward - pen
    adv = delta / (delta.std() + norm.epsilon) if opts.whiten else delta
    diag = {"episode_adv": np.zeros(batch.n_rows), "step_adv": adv, "anchor_group_size": segment_sizes(batch.group_id)}
    return CreditResult("mc_advantage", adv, returns, diag, group_stats(batch))
