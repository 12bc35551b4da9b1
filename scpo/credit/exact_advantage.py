"""Exact on-policy advantage [ours]: the policy's own advantage of each step for the success objective, from its exact
success values (the batch's `exact_value` column, `scpo.rollout.exact_values`: dynamic programming over the states of
an environment that can enumerate them; docs/algorithms.md, "Exact on-policy ground truth"):

    Q_t = 1[step t wins] + V_{t+1}          (V_{T_i} = 0 after a trajectory's last step)
    delta_t = Q_t - V_t - pen_t            = A^pi(s_t, a_t) - pen_t
    A_t = delta_t / (std_batch(delta) + eps)   (whiten: true)          or A_t = delta_t   (whiten: false)

V_t = V^pi_{T-t}(s_t) is the probability that the policy wins from the node step t acted on within the steps left;
the environment is deterministic, so V_{t+1} of the next row is Q^pi_{T-t}(s_t, a_t) exactly, and delta_t without the
penalty is the advantage A^pi(s_t, a_t) = Q^pi - V^pi the policy-gradient theorem asks for (the upper bound of the
estimators that see only the rollouts). Rewards are not read (reward shaping is ignored: the objective is success);
a step wins when it is the last step of a won trajectory.

Scaling. In units of the success probability the advantages are small (|A| <= 1, a few hundredths on most steps), so
`whiten` (default) divides them by their standard deviation over the batch's rows, as `mc_advantage` does: the
update's size is then on the scale of GRPO's normalised advantages at the same learning rate, and its direction is
unchanged (one positive factor for the whole batch). There is no centring (it would move the zero of every step) and
no normalisation within groups (a per-group factor would weight the groups' terms of the gradient unequally). With
the same values in `policy_value` (times R_success), `mc_advantage` gives the same advantages on environments whose
only reward is R_success on a win (the corridor).
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

__all__ = ["ExactAdvantageOptions", "compute_exact_advantage", "success_q"]


class ExactAdvantageOptions(StrictModel):
    """[ours] the policy's exact advantage A^pi = Q^pi - V^pi of the success objective (scpo.credit.exact_advantage)."""

    whiten: bool = Field(
        True,
        description="true: divided by the standard deviation over the batch's rows (not centred: the direction of "
        "the batch's update is unchanged); false: in units of the success probability",
    )


def success_q(batch: RolloutBatch, values: np.ndarray) -> np.ndarray:
    """Per row, Q_t = 1[the row is the winning last step of its trajectory] + V of the next row (0 after the last)."""
    nxt = next_row_in_trajectory(batch.traj_id)
    v = np.asarray(values, dtype=np.float64)
    return np.where(nxt >= 0, v[np.maximum(nxt, 0)], np.asarray(batch.won, dtype=np.float64))


@credit_method(
    "exact_advantage",
    ExactAdvantageOptions,
    columns=("exact_value",),
    bound="reference: the policy's own advantage (exact values)",
)
def compute_exact_advantage(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """Exact on-policy advantage on `batch` (needs its exact_value column)."""
    v = batch.exact_value
    if v is None:
        raise ValueError(
            "the exact_advantage estimator needs the batch's exact_value column (V^pi_t(s_t), the policy's exact "
            "success values); label it with scpo.rollout.exact_values.exact_values (environments with a tabular model)"
        )
    bad = np.flatnonzero(~np.isfinite(v) | (v < 0) | (v > 1))
    if len(bad):
        raise ValueError(f"exact_value must be a probability in [0, 1]; it is not at rows {bad[:5].tolist()}")
    q = success_q(batch, v)
    delta = q - v - invalid_penalty(batch.valid, cfg.norm.lambda_invalid)
    adv = delta / (delta.std() + cfg.norm.epsilon) if cfg.exact_advantage.whiten else delta
    diag = {"episode_adv": np.zeros(batch.n_rows), "step_adv": adv, "anchor_group_size": segment_sizes(batch.group_id)}
    return CreditResult("exact_advantage", adv, q, diag, group_stats(batch))
