"""HGPO (Hierarchy-of-Groups Policy Optimization): step advantages pooled over nested history contexts, as the public
HGPO code computes them (its `HGPO` routine behind `compute_hgpo_outcome_advantage`). Spec: docs/algorithms.md, "HGPO".

    C_l(t) = (o_{t-l}, ..., o_t) for l = 0..K;  a step with t < l is in no depth-l cluster (no padding)
    a_l    = norm(G, steps of group g with the same C_l), population std; clusters of one step give no a_l
    A      = sum_{l in S} w_l a_l,  w_l = (l+1)^alpha / sum_{l' in S} (l'+1)^alpha,   S = {l : a_l != 0}

G is GiGPO's step return (discounted, minus the invalid penalty). A step whose observation is unique in its group gets
0. HGPO has no episode term. Revision 1 weighted by (k+1)^alpha with k = l + 1 and padded early steps into clusters.
"""

from __future__ import annotations

import numpy as np

from scpo.batch import RolloutBatch
from scpo.credit.grouping import (
    combine_codes,
    discounted_returns,
    factorize,
    invalid_penalty,
    segment_norm,
    segment_sizes,
    shifted_codes,
)
from scpo.credit.grpo import group_stats
from scpo.credit.options import CreditConfig
from scpo.credit.result import CreditResult

__all__ = ["context_clusters", "hgpo_step_advantage", "compute_hgpo"]


def context_clusters(group_id: np.ndarray, observation: np.ndarray, step: np.ndarray, depth: int) -> np.ndarray:
    """Dense cluster code per row of the key (group, o_{t-l}, ..., o_t), l = `depth` >= 0; rows with t < l get -1."""
    if depth < 0:
        raise ValueError(f"context depth l={depth} must be >= 0")
    obs = factorize(observation)
    codes = combine_codes(group_id, *(shifted_codes(obs, step, lag) for lag in range(depth + 1)))
    return np.where(np.asarray(step) >= depth, codes, -1)


def hgpo_step_advantage(
    g_return: np.ndarray,
    group_id: np.ndarray,
    observation: np.ndarray,
    step: np.ndarray,
    *,
    history_length: int,
    alpha: float,
    scale: str,
    epsilon: float,
) -> tuple[np.ndarray, dict]:
    """A = sum_{l: a_l != 0} w_l a_l with renormalised w_l (see the module docstring); returns (A, per-depth diagnostics
    "hgpo_a<l>" and "hgpo_size<l>", the cluster size, 0 for rows in no depth-l cluster)."""
    g_return = np.asarray(g_return, dtype=np.float64)
    num = np.zeros(len(step))
    den = np.zeros(len(step))
    diag: dict[str, np.ndarray] = {}
    for depth in range(history_length + 1):
        cluster = context_clusters(group_id, observation, step, depth)
        inside = cluster >= 0
        a_l = np.zeros(len(step))
        size = np.zeros(len(step), dtype=np.int64)
        if inside.any():
            seg = np.unique(cluster[inside], return_inverse=True)[1].reshape(-1)
            a_l[inside] = segment_norm(g_return[inside], seg, scale=scale, epsilon=epsilon, ddof=0)
            size[inside] = segment_sizes(seg)
        w = (depth + 1.0) ** alpha
        alive = a_l != 0
        num += np.where(alive, w * a_l, 0.0)
        den += np.where(alive, w, 0.0)
        diag[f"hgpo_a{depth}"] = a_l
        diag[f"hgpo_size{depth}"] = size
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0), diag


def compute_hgpo(batch: RolloutBatch, cfg: CreditConfig, **_: object) -> CreditResult:
    """HGPO on `batch`; diagnostics add "hgpo_a<l>" and "hgpo_size<l>" per context depth l = 0..K."""
    opts, norm = cfg.hgpo, cfg.norm
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    returns = discounted_returns(batch.reward, batch.traj_id, batch.step, cfg.gigpo.gamma)
    adv, per_l = hgpo_step_advantage(
        returns - pen,
        batch.group_id,
        batch.observation,
        batch.step,
        history_length=opts.history_length,
        alpha=opts.alpha,
        scale=norm.scale,
        epsilon=norm.epsilon,
    )
    diag = {"episode_adv": np.zeros_like(adv), "step_adv": adv, "anchor_group_size": per_l["hgpo_size0"], **per_l}
    return CreditResult("hgpo", adv, returns, diag, group_stats(batch))
