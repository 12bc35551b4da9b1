"""HGPO (Hierarchy-of-Groups Policy Optimization): step advantages pooled over nested history contexts, in both public
versions: the HGPO authors' code (its `HGPO` routine behind `compute_hgpo_outcome_advantage`, version "authors", the
default) and verl-agent's recipe/hgpo (`hgpo_advantage_estimate`, version "verl_agent"). Spec: docs/algorithms.md,
"HGPO".

    C_l(t) = (o_{t-l}, ..., o_t) for l = 0..K;  a step with t < l is in no depth-l cluster (no padding)
    a_l    = norm(G, steps of group g with the same C_l), population std; clusters of one step give no a_l
    authors:    A = sum_{l in S} w_l a_l,  w_l = (l+1)^alpha / sum_{l' in S} (l'+1)^alpha,           S = {l : a_l != 0}
    verl_agent: A = sum_{l in S} w_l a_l,  w_l = (l+2)^alpha / (sum_{l' in S} (l'+2)^alpha + eps)
                with base_group, the episode term A^E (verl's: norm over the group's rows, a one-row group keeps its
                score) joins S as one more member of weight 1^alpha = 1 when it is non-zero

G is GiGPO's step return (discounted, minus the invalid penalty). Without the base group a step whose observation is
unique in its group gets 0; HGPO has no other episode term. Revision 1 weighted by (k+1)^alpha with k = l + 1 and padded
early steps into clusters.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from scpo.batch import RolloutBatch
from scpo.credit.grouping import (
    combine_codes,
    discounted_returns,
    factorize,
    invalid_penalty,
    segment_norm,
    segment_norm_keep_single,
    segment_sizes,
    shifted_codes,
)
from scpo.credit.grpo import group_stats
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["HGPOOptions", "VERSIONS", "context_clusters", "hgpo_step_advantage", "compute_hgpo"]


class HGPOOptions(StrictModel):
    """HGPO as its two public versions compute it (docs/algorithms.md, "HGPO"): the authors' code (default) and
    verl-agent's recipe."""

    history_length: int = Field(2, ge=0, description="K: context depths l = 0..K (l earlier observations in the key)")
    alpha: float = Field(
        1.0, description="w_l proportional to (l+1)^alpha (version authors) or (l+2)^alpha (version verl_agent)"
    )
    version: Literal["authors", "verl_agent"] = Field(
        "authors",
        description="authors: the HGPO authors' code, w_l = (l+1)^alpha / sum; verl_agent: verl-agent's recipe/hgpo, "
        "w_l = (l+2)^alpha / (sum + eps), with the optional base group",
    )
    base_group: bool = Field(
        False,
        description="version verl_agent: also pool the episode term (verl's, over the group's rows) as a depth with "
        "weight 1^alpha",
    )

    @model_validator(mode="after")
    def _base_group_is_the_recipes(self) -> HGPOOptions:
        if self.base_group and self.version != "verl_agent":
            raise ValueError("base_group=True belongs to version='verl_agent' (the recipe); the authors' code has none")
        return self


VERSIONS = {"authors": 1.0, "verl_agent": 2.0}  # version -> the offset c of w_l = (l + c)^alpha


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
    version: str = "authors",
    base: np.ndarray | None = None,
) -> tuple[np.ndarray, dict]:
    """A = sum_{l: a_l != 0} w_l a_l with the weights of `version` (see the module docstring; `base`: the recipe's
    base-group term per row, weight 1); returns (A, per-depth diagnostics "hgpo_a<l>" and "hgpo_size<l>", the cluster
    size, 0 for rows in no depth-l cluster)."""
    if version not in VERSIONS:
        raise ValueError(f"HGPO version={version!r} is not one of {', '.join(VERSIONS)}")
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
        w = (depth + VERSIONS[version]) ** alpha
        alive = a_l != 0
        num += np.where(alive, w * a_l, 0.0)
        den += np.where(alive, w, 0.0)
        diag[f"hgpo_a{depth}"] = a_l
        diag[f"hgpo_size{depth}"] = size
    if base is not None:  # weight 1 when non-zero (a zero adds nothing to num)
        num += base
        den += base != 0
    if version == "verl_agent":
        return num / (den + epsilon), diag  # den = 0 only where num = 0
    out = np.zeros_like(num)
    np.divide(num, den, out=out, where=den > 0)
    return out, diag


@credit_method("hgpo", HGPOOptions, reads=("gigpo",))
def compute_hgpo(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """HGPO on `batch`; diagnostics add "hgpo_a<l>" and "hgpo_size<l>" per context depth l = 0..K."""
    opts, norm = cfg.hgpo, cfg.norm
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    returns = discounted_returns(batch.reward, batch.traj_id, batch.step, cfg.gigpo.gamma)
    base = None
    if opts.base_group:
        base = segment_norm_keep_single(
            batch.episode_return - pen, batch.group_id, scale=norm.scale, epsilon=norm.epsilon
        )
    adv, per_l = hgpo_step_advantage(
        returns - pen,
        batch.group_id,
        batch.observation,
        batch.step,
        history_length=opts.history_length,
        alpha=opts.alpha,
        scale=norm.scale,
        epsilon=norm.epsilon,
        version=opts.version,
        base=base,
    )
    episode_adv = np.zeros_like(adv) if base is None else base
    diag = {"episode_adv": episode_adv, "step_adv": adv, "anchor_group_size": per_l["hgpo_size0"], **per_l}
    return CreditResult("hgpo", adv, returns, diag, group_stats(batch))
