"""HCAPO (Hindsight Credit Assignment PO): the pure formula, given the hindsight log-probs the trainer computes.

The trainer (`scpo/policy/hindsight.py`) re-scores each step's response with the prompt extended by the trajectory's
final observation, at temperature 5, and passes `hindsight_logprob[r]` = mean token log-prob of row r's response. Then

    pi_H(a_t) = exp(hindsight_logprob_t)
    rho_t     = clip(pi_H(a_t) / mean_{k in trajectory} pi_H(a_k), clip_low, clip_high)
    Q_t       = rho_t gamma^(T - 1 - t) R
    A         = A^E + omega norm(Q, steps of group g),   step term clipped to >= 0 in successful trajectories

A^E is GRPO's episode advantage (norm(R_i - pen_t) over the group's steps). Source: docs/algorithms.md, "HCAPO".
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch
from scpo.credit.grouping import invalid_penalty, segment_norm, segment_sizes
from scpo.credit.grpo import episode_term, group_stats
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["HCAPOOptions", "hindsight_ratio", "compute_hcapo"]


class HCAPOOptions(StrictModel):
    """HCAPO; `temperature` is read by the trainer's hindsight re-scoring, the rest by the pure formula."""

    temperature: float = Field(5.0, gt=0)
    clip_low: float = Field(0.8, gt=0)
    clip_high: float = Field(1.2, gt=0)
    omega: float = Field(1.0, ge=0)


def hindsight_ratio(
    hindsight_logprob: np.ndarray, traj_id: np.ndarray, clip_low: float, clip_high: float
) -> np.ndarray:
    """rho_t = clip(exp(lp_t) / mean_{k in traj} exp(lp_k), clip_low, clip_high); exp is taken relative to the
    trajectory's max log-prob (the ratio is unchanged, nothing underflows)."""
    lp = np.asarray(hindsight_logprob, dtype=np.float64)
    top = np.full(int(traj_id.max()) + 1, -np.inf)
    np.maximum.at(top, traj_id, lp)
    p = np.exp(lp - top[traj_id])
    counts = np.bincount(traj_id)
    mean = np.bincount(traj_id, weights=p) / np.maximum(counts, 1)
    return np.clip(p / mean[traj_id], clip_low, clip_high)


@credit_method("hcapo", HCAPOOptions, reads=("gigpo", "grpo"), policy_scores=True)
def compute_hcapo(
    batch: RolloutBatch, cfg: CreditOptions, *, hindsight_logprob: np.ndarray | None = None, **_: object
) -> CreditResult:
    """HCAPO on `batch` with the trainer's `hindsight_logprob` (n_rows,)."""
    if hindsight_logprob is None:
        raise ValueError(
            "hcapo needs hindsight_logprob (n_rows,): the mean token log-prob of each step's response under "
            "the hindsight prompt at temperature 5. It calls the policy, so the trainer computes it "
            "(scpo.policy.hindsight) and passes it to compute_advantages('hcapo', batch, hindsight_logprob=...)"
        )
    lp = np.asarray(hindsight_logprob, dtype=np.float64).reshape(-1)
    if len(lp) != batch.n_rows or not np.all(np.isfinite(lp)):
        raise ValueError(
            f"hindsight_logprob must be {batch.n_rows} finite values (one per row), got shape "
            f"{np.shape(hindsight_logprob)} with {int(np.sum(~np.isfinite(lp)))} non-finite"
        )
    opts, norm = cfg.hcapo, cfg.norm
    if opts.clip_low > opts.clip_high:
        raise ValueError(f"hcapo clip_low={opts.clip_low} > clip_high={opts.clip_high}")
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    ep_adv = episode_term(batch, cfg, pen)
    rho = hindsight_ratio(lp, batch.traj_id, opts.clip_low, opts.clip_high)
    q = rho * cfg.gigpo.gamma ** (batch.traj_len - 1 - batch.step) * batch.episode_return
    step_adv = opts.omega * segment_norm(q, batch.group_id, scale=norm.scale, epsilon=norm.epsilon)
    step_adv = np.where(batch.won, np.maximum(step_adv, 0.0), step_adv)
    diag = {
        "episode_adv": ep_adv,
        "step_adv": step_adv,
        "anchor_group_size": segment_sizes(batch.group_id),
        "hindsight_ratio": rho,
    }
    return CreditResult("hcapo", ep_adv + step_adv, q, diag, group_stats(batch))
