"""ProGPO-R (Progress- and Reliability-Oriented GPO) [our definition]: exact-prefix groups + fused state potentials.

    A^P_{i,t}  = norm(G_{i,t}, steps of g with the identical history (o_0, a_0, ..., o_t))
    Phi_d(s)   = mean of G over the steps of g whose last d observations equal s's;  var_d(s) = sample var / count
                 (one member: `prior_variance`; floored at `variance_floor`). A key with fewer than `min_members`
                 members also pools the members of similar keys of its group (semantic expansion, below).
    Phi(s)     = sum_d Phi_d(s) / var_d(s) / sum_d 1 / var_d(s)                        (inverse-variance fusion)
    delta_t    = r_t + gamma Phi(s_{t+1}) - Phi(s_t),  Phi(terminal) = 0                  (a TD error)
    A          = A^E + omega_p A^P + omega_d norm(delta - pen, steps of g)

In A^P, G is GiGPO's step return (discounted, minus the invalid penalty). The potentials average the discounted return
without the penalty (Phi(s) is the mean return from s onward, r at s included), so that delta_t of an exact potential is
0; the penalty is then subtracted from delta_t itself and never leaks to earlier steps. Revision 1 used terminal Phi =
10 without r_t, which gave a winning final step a negative delta. Two keys are similar when their current observations
score >= `similarity_thresh` and the mean over the d aligned positions of the observation scores is >=
`similarity_thresh` (padding before the start matches only padding) [ours]: it needs scores between the distinct
observations of a group only, and a sparse neighbour list, never a history-by-history matrix. Spec: docs/algorithms.md,
"ProGPO-R".
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from scpo.batch import RolloutBatch
from scpo.credit.grouping import (
    combine_codes,
    discounted_returns,
    factorize,
    invalid_penalty,
    next_row_in_trajectory,
    segment_norm,
    segment_sizes,
    shifted_codes,
)
from scpo.credit.grpo import episode_term, group_stats
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = [
    "ProGPOROptions",
    "prefix_groups",
    "ObservationSimilarity",
    "depth_potential",
    "fuse_potentials",
    "compute_progpo_r",
]


class ProGPOROptions(StrictModel):
    """[ours] exact-prefix groups + fused multi-depth state potentials, TD transition credit with terminal Phi = 0."""

    depths: tuple[int, ...] = Field((1, 2, 4), min_length=1, description="history depths d of the potentials Phi_d")
    min_members: int = Field(2, ge=1, description="m: keys with fewer members pool similar keys (semantic expansion)")
    similarity_thresh: float = Field(0.9, gt=0, le=1)
    similarity_scorer: Literal["difflib", "lexical", "bi_encoder", "cross_encoder", "none"] = Field(
        "lexical",
        description="scorer of the semantic expansion ('none': exact keys only); [ours], so lexical (rapidfuzz's "
        "Indel ratio) rather than verl-agent's difflib",
    )
    prior_variance: float = Field(25.0, gt=0, description="variance given to single-member keys")
    variance_floor: float = Field(1e-6, gt=0, description="lower bound of var_d(s) (keys whose returns all agree)")
    omega_p: float = Field(1.0, ge=0, description="weight of the exact-prefix step term A^P")
    omega_d: float = Field(1.0, ge=0, description="weight of the TD transition term norm(delta)")

    @field_validator("depths")
    @classmethod
    def _positive_depths(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(d < 1 for d in v):
            raise ValueError(f"every depth must be >= 1, got {list(v)}")
        return v


def prefix_groups(
    group_id: np.ndarray, obs: np.ndarray, act: np.ndarray, traj_id: np.ndarray, step: np.ndarray
) -> np.ndarray:
    """Code of the full history (group, o_0, a_0, ..., o_t) per row, from observation / action codes.

    Vectorised by sorting: each trajectory is one padded row (group, o_0, a_0, o_1, ...); after a lexicographic sort,
    two neighbours share the step-t history iff their longest common prefix covers its 2t + 2 entries, so the history
    groups at step t are the runs between neighbours whose common prefix is shorter.
    """
    step = np.asarray(step)
    traj = np.unique(traj_id, return_inverse=True)[1].reshape(-1)
    n_traj, t_max = int(traj.max()) + 1, int(step.max()) + 1
    seq = np.full((n_traj, 2 * t_max + 1), -1, dtype=np.int64)
    seq[traj, 0] = group_id
    seq[traj, 2 * step + 1] = obs
    seq[traj, 2 * step + 2] = act
    order = np.lexsort(seq.T[::-1])
    sorted_seq = seq[order]
    same = sorted_seq[1:] == sorted_seq[:-1]
    lcp = np.where(same.all(axis=1), seq.shape[1], same.argmin(axis=1))  # (n_traj - 1,)
    needed = 2 * np.arange(t_max) + 2  # entries of the step-t history
    new_run = np.vstack([np.ones((1, t_max), dtype=bool), lcp[:, None] < needed[None, :]])
    run_id = np.cumsum(new_run, axis=0) - 1  # (n_traj, t_max) in sorted order
    position = np.empty(n_traj, dtype=np.int64)
    position[order] = np.arange(n_traj)
    return run_id[position[traj], step] + step * n_traj


class ObservationSimilarity:
    """Scorer similarities between the distinct observations of each group, for the semantic expansion.

    `codes` are group-specific observation codes (one per distinct (group, observation)); -1 is the padding before a
    trajectory's start (padding matches only padding). `neighbours()` lists the pairs (u, v) with S(u, v) >= thresh.
    """

    def __init__(self, group_id: np.ndarray, codes: np.ndarray, texts: np.ndarray, scorer, thresh: float) -> None:
        n_codes = int(codes.max()) + 1
        self.loc = np.zeros(n_codes, dtype=np.int64)
        self.base = np.zeros(n_codes, dtype=np.int64)
        self.size = np.zeros(n_codes, dtype=np.int64)
        flats, us, vs, ss, offset = [], [], [], [], 0
        first = np.unique(codes, return_index=True)[1]  # first row of each code (codes are dense)
        for g in np.unique(group_id):
            members = np.flatnonzero(group_id[first] == g)  # codes of group g
            sim = scorer.score_matrix([str(t) for t in texts[first[members]]], [str(t) for t in texts[first[members]]])
            self.loc[members], self.base[members], self.size[members] = np.arange(len(members)), offset, len(members)
            flats.append(sim.ravel())
            offset += sim.size
            u, v = np.nonzero(sim >= thresh)
            us.append(members[u])
            vs.append(members[v])
            ss.append(sim[u, v])
        self.flat = np.concatenate(flats)
        self.row_start = self.base + self.loc * self.size  # flat offset of row u
        order = np.argsort(np.concatenate(us), kind="stable")
        self.nb_u, self.nb_v, self.nb_s = (np.concatenate(x)[order] for x in (us, vs, ss))

    def lookup(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """S(u, v) for same-group codes; padding (-1) scores 1 against padding and 0 against an observation."""
        pad = (u < 0) | (v < 0)
        if not pad.any():
            return self.flat[self.row_start[u] + self.loc[v]]
        val = self.flat[self.row_start[np.maximum(u, 0)] + self.loc[np.maximum(v, 0)]]
        return np.where(pad, ((u < 0) & (v < 0)).astype(np.float64), val)


def _expand(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges [starts[i], starts[i] + counts[i]): (owner i, position) of every member, vectorised."""
    owner = np.repeat(np.arange(len(starts)), counts)
    pos = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(starts, counts)
    return owner, pos


def depth_potential(
    g_return: np.ndarray,
    group_id: np.ndarray,
    obs: np.ndarray,
    step: np.ndarray,
    depth: int,
    *,
    min_members: int,
    prior_variance: float,
    variance_floor: float,
    similarity: ObservationSimilarity | None = None,
    thresh: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(Phi_d, var_d) per row for history depth d; `obs` are group-specific observation codes.

    Semantic expansion (when `similarity` is given): a key with fewer than `min_members` members pools every key of its
    group whose current observation scores >= thresh against its own and whose mean position-wise score >= thresh.
    Candidates come from the sparse neighbour list of the current observation, so no key-by-key matrix is built.
    """
    cols = [shifted_codes(obs, step, lag) for lag in range(depth)]
    key = combine_codes(*cols)  # obs codes are group-specific: the key implies the group
    n_keys = int(key.max()) + 1
    cnt = np.bincount(key, minlength=n_keys).astype(np.float64)
    s1 = np.bincount(key, weights=g_return, minlength=n_keys)
    s2 = np.bincount(key, weights=g_return * g_return, minlength=n_keys)
    small = np.flatnonzero(cnt < min_members)
    if similarity is not None and len(small):
        rep = np.unique(key, return_index=True)[1]  # first row of each key (codes are dense)
        key_obs = np.stack([c[rep] for c in cols], axis=1)  # (n_keys, d); column 0 is the current observation
        # small key i -> neighbour observations v of its current observation -> keys j whose current observation is v
        lo = np.searchsorted(similarity.nb_u, key_obs[small, 0], side="left")
        hi = np.searchsorted(similarity.nb_u, key_obs[small, 0], side="right")
        i_nb, nb = _expand(lo, hi - lo)
        by_last = np.argsort(key_obs[:, 0], kind="stable")
        last_sorted = key_obs[by_last, 0]
        v = similarity.nb_v[nb]
        lo2 = np.searchsorted(last_sorted, v, side="left")
        hi2 = np.searchsorted(last_sorted, v, side="right")
        which, pos = _expand(lo2, hi2 - lo2)
        i_key, j_key, key_sim = small[i_nb[which]], by_last[pos], similarity.nb_s[nb[which]]  # position 0 score
        keep = i_key != j_key
        i_key, j_key, key_sim = i_key[keep], j_key[keep], key_sim[keep]
        for p in range(1, depth):
            key_sim = key_sim + similarity.lookup(key_obs[i_key, p], key_obs[j_key, p])
        key_sim = key_sim / depth
        ok = key_sim >= thresh
        i_key, j_key = i_key[ok], j_key[ok]
        cnt, s1, s2 = (x + np.bincount(i_key, weights=x[j_key], minlength=n_keys) for x in (cnt, s1, s2))
    mean = s1 / cnt
    var = np.maximum(s2 - cnt * mean * mean, 0.0) / np.maximum(cnt - 1, 1) / cnt
    var = np.where(cnt > 1, np.maximum(var, variance_floor), prior_variance)
    return mean[key], var[key]


def fuse_potentials(phis: list[np.ndarray], variances: list[np.ndarray]) -> np.ndarray:
    """Phi = sum_d Phi_d / var_d / sum_d 1 / var_d."""
    w = [1.0 / v for v in variances]
    return sum(p * wi for p, wi in zip(phis, w)) / sum(w)


def expansion_scorer(cfg: CreditOptions) -> tuple[str, None] | None:
    """The scorer of the semantic expansion under `cfg` (`progpo_r.similarity_scorer`), None for exact keys only."""
    name = cfg.progpo_r.similarity_scorer
    return (name, None) if name != "none" else None


@credit_method("progpo_r", ProGPOROptions, reads=("gigpo", "grpo"), scorer=expansion_scorer)
def compute_progpo_r(batch: RolloutBatch, cfg: CreditOptions, *, scorer=None, **_: object) -> CreditResult:
    """ProGPO-R on `batch`; diagnostics add "potential" (Phi(s_t)), "prefix_adv", "delta"."""
    opts, norm = cfg.progpo_r, cfg.norm
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    ep_adv = episode_term(batch, cfg, pen)
    disc = discounted_returns(batch.reward, batch.traj_id, batch.step, cfg.gigpo.gamma)
    g_ret = disc - pen
    obs = combine_codes(batch.group_id, factorize(batch.observation))  # group-specific observation codes
    prefix = prefix_groups(batch.group_id, obs, factorize(batch.action), batch.traj_id, batch.step)
    a_p = segment_norm(g_ret, prefix, scale=norm.scale, epsilon=norm.epsilon)
    similarity = None
    if opts.similarity_scorer != "none":
        if scorer is None:
            raise ValueError("progpo_r semantic expansion needs a scorer (or similarity_scorer='none')")
        similarity = ObservationSimilarity(batch.group_id, obs, batch.observation, scorer, opts.similarity_thresh)
    phis, variances = [], []
    for d in opts.depths:
        phi_d, var_d = depth_potential(
            disc,
            batch.group_id,
            obs,
            batch.step,
            d,
            min_members=opts.min_members,
            prior_variance=opts.prior_variance,
            variance_floor=opts.variance_floor,
            similarity=similarity,
            thresh=opts.similarity_thresh,
        )
        phis.append(phi_d)
        variances.append(var_d)
    phi = fuse_potentials(phis, variances)
    nxt = next_row_in_trajectory(batch.traj_id)
    phi_next = np.where(nxt >= 0, phi[np.maximum(nxt, 0)], 0.0)
    delta = batch.reward + cfg.gigpo.gamma * phi_next - phi
    a_d = segment_norm(delta - pen, batch.group_id, scale=norm.scale, epsilon=norm.epsilon)
    step_adv = opts.omega_p * a_p + opts.omega_d * a_d
    diag = {
        "episode_adv": ep_adv,
        "step_adv": step_adv,
        "anchor_group_size": segment_sizes(prefix),
        "potential": phi,
        "prefix_adv": a_p,
        "delta": delta,
    }
    return CreditResult("progpo_r", ep_adv + step_adv, disc, diag, group_stats(batch))
