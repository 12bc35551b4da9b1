"""GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization", arXiv 2505.10978; verl-agent `gigpo/core_gigpo.py`).

A^E_{i,t} = norm(R_i - pen_t, steps of group g)                    (Eq. 3, see `grpo.episode_advantage`)
G_{i,t}   = sum_k gamma^k r_{i,t+k} - pen_t                        (Eq. 5; the penalty is applied after discounting)
anchor(t) = rows of group g whose raw observation o_t is identical (Eq. 6; optionally: similarity >= thresh, by
            `credit.gigpo.similarity_scorer`, default difflib's ratio as verl-agent's)
A^S_{i,t} = norm(G_{i,t}, anchor(t)), singleton anchor -> 0       (Eq. 7)
A_{i,t}   = A^E_{i,t} + omega * A^S_{i,t}                          (Eq. 8)
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch
from scpo.credit.grouping import (
    combine_codes,
    discounted_returns,
    factorize,
    invalid_penalty,
    segment_norm,
    segment_sizes,
    similarity_clusters,
)
from scpo.credit.grpo import episode_term, group_stats
from scpo.credit.options import CreditOptions, ScorerName, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = [
    "GiGPOOptions",
    "similarity_scorer",
    "anchor_groups",
    "similarity_anchor_groups",
    "gigpo_from_returns",
    "compute_gigpo",
]


class GiGPOOptions(StrictModel):
    gamma: float = Field(
        0.95,
        gt=0,
        le=1,
        description="discount of the step return G_t (GiGPO Eq. 5); the one "
        "discount of every method (G2PO, HGPO, ProGPO, HCAPO read it here)",
    )
    step_advantage_w: float = Field(1.0, ge=0, description="omega in A = A^E + omega A^S (GiGPO Eq. 8)")
    enable_similarity: bool = Field(
        False, description="merge anchor observations whose similarity >= similarity_thresh"
    )
    similarity_thresh: float = Field(0.95, gt=0, le=1)
    similarity_scorer: ScorerName = Field(
        "difflib",
        description="scorer of the similarity option: difflib (SequenceMatcher(None, a, b).ratio(), verl-agent's "
        "are_similar), lexical (rapidfuzz's Indel ratio, no autojunk) or a model scorer; read by every method built "
        "on GiGPO's anchors (gigpo, scpo, progpo_c)",
    )


def similarity_scorer(cfg: CreditOptions) -> tuple[str, None] | None:
    """The scorer GiGPO's similarity anchors need under `cfg` (`gigpo.similarity_scorer`), None without them."""
    return (cfg.gigpo.similarity_scorer, None) if cfg.gigpo.enable_similarity else None


def anchor_groups(group_id: np.ndarray, observation: np.ndarray) -> np.ndarray:
    """Dense anchor-group code per row: identical raw observation within the same group (GiGPO Eq. 6)."""
    return combine_codes(group_id, factorize(observation))


def similarity_anchor_groups(group_id: np.ndarray, observation: np.ndarray, scorer, thresh: float) -> np.ndarray:
    """Anchor groups that merge similar observations, greedily as verl-agent's
    `build_step_group(enable_similarity=True)`: within each group, observations in row order join the first cluster
    whose representative (its first observation) scores `scorer.score([(o, representative)]) >= thresh`, else found a
    new cluster (`grouping.similarity_clusters`; verl-agent's scorer: difflib's ratio, `scpo.scorers.sequence_matcher`).
    A threshold outside (0, 1] is a ValueError."""
    group_id = np.asarray(group_id)
    out = np.empty(len(group_id), dtype=np.int64)
    n_clusters = 0
    for g in np.unique(group_id):
        rows = np.flatnonzero(group_id == g)
        local = similarity_clusters(observation[rows], scorer, thresh)
        out[rows] = n_clusters + local
        n_clusters += int(local.max()) + 1
    return out


def gigpo_from_returns(
    episode_adv: np.ndarray, step_return: np.ndarray, anchor: np.ndarray, *, omega: float, scale: str, epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    """(A, A^S) with A^S = norm(step_return, anchor group) and A = A^E + omega A^S (Eq. 7-8). `step_return` already
    includes the invalid penalty."""
    step_adv = segment_norm(step_return, anchor, scale=scale, epsilon=epsilon)
    return episode_adv + omega * step_adv, step_adv


@credit_method("gigpo", GiGPOOptions, reads=("grpo",), scorer=similarity_scorer)
def compute_gigpo(
    batch: RolloutBatch,
    cfg: CreditOptions,
    *,
    scorer=None,
    rewards: np.ndarray | None = None,
    episode_return: np.ndarray | None = None,
    method: str = "gigpo",
    **_: object,
) -> CreditResult:
    """GiGPO on `batch`. `rewards` / `episode_return` replace the env rewards / R_i (SCPO's shaping uses this)."""
    opts, norm = cfg.gigpo, cfg.norm
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    ep_ret = batch.episode_return if episode_return is None else episode_return
    ep_adv = episode_term(batch, cfg, pen, ep_ret)
    r = batch.reward if rewards is None else rewards
    returns = discounted_returns(r, batch.traj_id, batch.step, opts.gamma)
    if opts.enable_similarity:
        if scorer is None:
            raise ValueError("gigpo enable_similarity=True needs a scorer (compute_advantages builds the default one)")
        anchor = similarity_anchor_groups(batch.group_id, batch.observation, scorer, opts.similarity_thresh)
    else:
        anchor = anchor_groups(batch.group_id, batch.observation)
    adv, step_adv = gigpo_from_returns(
        ep_adv, returns - pen, anchor, omega=opts.step_advantage_w, scale=norm.scale, epsilon=norm.epsilon
    )
    sizes = segment_sizes(anchor)
    diag = {"episode_adv": ep_adv, "step_adv": step_adv, "anchor_group_size": sizes}
    stats = {
        **group_stats(batch),
        "anchor_group_size_mean": float(sizes.mean()),
        "frac_singleton_anchor_steps": float(np.mean(sizes == 1)),
    }
    return CreditResult(method, adv, returns, diag, stats)
