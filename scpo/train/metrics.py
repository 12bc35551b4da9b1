"""Per-iteration metrics of the batch and its credit (names explained in reports/METRICS.md); the trainer logs them
to the run's history (`scpo.run.history`)."""

from __future__ import annotations

import math

import numpy as np

from scpo.batch import RolloutBatch

__all__ = ["rollout_metrics", "credit_metrics"]


def rollout_metrics(batch: RolloutBatch) -> dict[str, float]:
    """charts/*: success overall and per task type, task score, episode length (means over trajectories),
    invalid-answer rate (over steps)."""
    first = np.unique(batch.traj_id, return_index=True)[1]  # each trajectory's first row, in trajectory order
    won = batch.won[first].astype(float)
    types = batch.task_type[first]
    out = {
        "charts/success_rate": float(won.mean()),
        "charts/task_score": float(np.mean(batch.task_score[first].tolist())),
        "charts/episode_length": float(np.mean(batch.traj_len[first].tolist())),
        "charts/invalid_rate": float(1.0 - batch.valid.mean()),
    }
    for tt in sorted(set(types.tolist())):
        out[f"charts/success_rate_by_type/{tt}"] = float(np.mean(batch.won[first][types == tt].tolist()))
    return out


def credit_metrics(batch: RolloutBatch, result) -> dict[str, float]:
    """credit/*: group composition (all-failed / mixed / all-success), advantage moments, and the estimator's own stats
    (`CreditResult.stats`, e.g. scpo_credit_mean), which take precedence on equal names."""
    first = np.unique(batch.traj_id, return_index=True)[1]
    g, won = batch.group_id[first], batch.won[first].astype(float)
    n_groups = int(g.max()) + 1
    rate = np.bincount(g, weights=won, minlength=n_groups) / np.maximum(np.bincount(g, minlength=n_groups), 1)
    adv = np.asarray(result.advantages, dtype=float)
    out = {
        "credit/frac_all_failed_groups": float(np.mean(rate == 0)),
        "credit/frac_mixed_groups": float(np.mean((rate > 0) & (rate < 1))),
        "credit/frac_all_success_groups": float(np.mean(rate == 1)),
        "credit/adv_mean": float(adv.mean()),
        "credit/adv_std": float(adv.std()),
        "credit/adv_abs_mean": float(np.abs(adv).mean()),
    }
    for k, v in (result.stats or {}).items():
        if isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(float(v)):
            out[f"credit/{k}"] = float(v)
    return out
