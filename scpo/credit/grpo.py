"""GRPO, multi-turn: one episode-level advantage per trajectory, broadcast to its steps.

    s_{i,t} = R_i - pen_t,   A_{i,t} = norm(s_{i,t}, all step rows of group g)

Source: GiGPO paper Eq. 3 / verl-agent `episode_norm_reward` (statistics over all step rows of the group by default:
long trajectories weigh more; `stats_over="trajectories"` uses one R_i per trajectory for the mean and std).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch
from scpo.credit.grouping import invalid_penalty, segment_norm, segment_sizes, trajectory_first_rows
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["GRPOOptions", "episode_advantage", "episode_term", "episode_statistics", "compute_grpo", "group_stats"]


class GRPOOptions(StrictModel):
    stats_over: Literal["steps", "trajectories"] = Field(
        "steps",
        description="episode statistics over all step rows of the group (reference) or one value per trajectory",
    )


def episode_statistics(
    episode_return: np.ndarray,
    penalty: np.ndarray,
    group_id: np.ndarray,
    traj_id: np.ndarray,
    *,
    stats_over: str = "steps",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, std, count) per group code of the statistics `episode_advantage` normalises with: over every step row's
    R_i - pen_t ("steps", the reference) or over one R_i per trajectory ("trajectories"); std is unbiased (ddof 1)."""
    group_id = np.asarray(group_id)
    if stats_over == "steps":
        x, g = np.asarray(episode_return, dtype=np.float64) - penalty, group_id
    elif stats_over == "trajectories":
        first = trajectory_first_rows(traj_id)
        x, g = np.asarray(episode_return, dtype=np.float64)[first], group_id[first]
    else:
        raise ValueError(f"stats_over={stats_over!r} is not one of 'steps', 'trajectories'")
    counts = np.bincount(g).astype(np.float64)
    mean = np.bincount(g, weights=x, minlength=len(counts)) / np.maximum(counts, 1)
    sq = np.bincount(g, weights=(x - mean[g]) ** 2, minlength=len(counts))
    return mean, np.sqrt(sq / np.maximum(counts - 1, 1)), counts


def episode_advantage(
    episode_return: np.ndarray,
    penalty: np.ndarray,
    group_id: np.ndarray,
    traj_id: np.ndarray,
    *,
    stats_over: str = "steps",
    scale: str = "std",
    epsilon: float = 1e-6,
) -> np.ndarray:
    """A^E_{i,t} = norm(R_i - pen_t, S_g) where S_g is every step row of group g ("steps") or one R_i per trajectory
    ("trajectories"; the mean/std come from the R_i and are applied to R_i - pen_t). A group with one member gives 0."""
    score = np.asarray(episode_return, dtype=np.float64) - penalty
    if stats_over == "steps":
        return segment_norm(score, group_id, scale=scale, epsilon=epsilon)
    mean, std, counts = episode_statistics(episode_return, penalty, group_id, traj_id, stats_over=stats_over)
    out = score - mean[group_id]
    if scale == "std":
        out = out / (std[group_id] + epsilon)
    return np.where(counts[group_id] > 1, out, 0.0)


def group_stats(batch: RolloutBatch) -> dict[str, float]:
    """Batch-level success structure: fraction of groups with no success / all successes / mixed."""
    won_any = np.bincount(batch.group_id, weights=batch.won.astype(float)) > 0
    won_all = np.bincount(batch.group_id, weights=(~batch.won).astype(float)) == 0
    return {
        "frac_all_failed_groups": float(np.mean(~won_any)),
        "frac_all_success_groups": float(np.mean(won_all)),
        "frac_mixed_groups": float(np.mean(won_any & ~won_all)),
    }


def episode_term(
    batch: RolloutBatch, cfg: CreditOptions, penalty: np.ndarray, episode_return: np.ndarray | None = None
) -> np.ndarray:
    """A^E per row under `cfg`: `episode_advantage` of `episode_return` (default: the batch's R_i) minus `penalty`,
    over the statistics `grpo.stats_over` names, with `norm.scale` and `norm.epsilon` (GiGPO Eq. 3). The episode term
    of GRPO and of every method built on it."""
    return episode_advantage(
        batch.episode_return if episode_return is None else episode_return,
        penalty,
        batch.group_id,
        batch.traj_id,
        stats_over=cfg.grpo.stats_over,
        scale=cfg.norm.scale,
        epsilon=cfg.norm.epsilon,
    )


@credit_method("grpo", GRPOOptions)
def compute_grpo(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """GRPO (trajectory level): A = A^E; the step term is 0. Returns are R_i (undiscounted)."""
    pen = invalid_penalty(batch.valid, cfg.norm.lambda_invalid)
    adv = episode_term(batch, cfg, pen)
    diag = {"episode_adv": adv, "step_adv": np.zeros_like(adv), "anchor_group_size": segment_sizes(batch.group_id)}
    return CreditResult("grpo", adv, batch.episode_return.astype(np.float64).copy(), diag, group_stats(batch))
