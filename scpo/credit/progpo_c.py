"""ProGPO-C (Progress-conditioned GPO) [our definition]: exploration credit in groups where every trajectory failed.

In an all-failed group (no trajectory won) GiGPO's advantages are all 0 up to the invalid penalty. ProGPO-C replaces the
reward there by first-visit coverage:

    c_{i,t} = 1 if o_{t+1} was not seen earlier in group g, else 0;   C_i = sum_t c_{i,t}
    A^E_i   = kappa_c * norm(C_i, trajectories of g);   A^S = GiGPO's step advantage on rewards c_{i,t}
    A       = A^E + omega * A^S

"Seen earlier" compares step indices only: time 0 are the initial observations, step t visits o_{t+1} at time t+1, and
c_{i,t} = 1 iff no visit of the group at a smaller time reached o_{t+1} (scope "trajectory": only the trajectory's own
visits). Several trajectories first reaching a state at the same time all count it, so the result never depends on the
order of the trajectories. Groups with a success use GiGPO unchanged. Spec: docs/algorithms.md, "ProGPO-C".
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch
from scpo.credit.gigpo import (
    anchor_groups,
    compute_gigpo,
    gigpo_from_returns,
    similarity_anchor_groups,
    similarity_scorer,
)
from scpo.credit.grouping import (
    combine_codes,
    discounted_returns,
    factorize,
    invalid_penalty,
    segment_norm,
    trajectory_first_rows,
)
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["ProGPOCOptions", "first_visit_coverage", "coverage_episode_term", "compute_progpo_c"]


class ProGPOCOptions(StrictModel):
    """[ours] first-visit coverage in all-failed groups (order-free: simultaneous first visits all count)."""

    kappa_c: float = Field(0.5, ge=0)
    coverage_scope: Literal["group", "trajectory"] = "group"


def first_visit_coverage(
    group_id: np.ndarray,
    traj_id: np.ndarray,
    step: np.ndarray,
    observation: np.ndarray,
    next_observation: np.ndarray,
    scope: str = "group",
) -> np.ndarray:
    """c_{i,t} in {0, 1} per row: is o_{t+1} a first visit (see the module docstring)? No row loop."""
    if scope not in ("group", "trajectory"):
        raise ValueError(f"coverage_scope={scope!r} is not one of 'group', 'trajectory'")
    n = len(step)
    codes = factorize(
        np.concatenate([np.asarray(observation, dtype=object), np.asarray(next_observation, dtype=object)])
    )
    obs_code, next_code = codes[:n], codes[n:]
    first = trajectory_first_rows(traj_id)
    # events: initial observations (time 0) then every next observation (time t + 1); event k < n0 is not a row
    owner = group_id if scope == "group" else traj_id
    ev_owner = np.r_[owner[first], owner]
    ev_state = np.r_[obs_code[first], next_code]
    ev_time = np.r_[np.zeros(len(first), dtype=np.int64), np.asarray(step) + 1]
    key = combine_codes(ev_owner, ev_state)  # (owner, state) of every visit
    earliest = np.full(int(key.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(earliest, key, ev_time)
    first_visit = ev_time == earliest[key]
    return first_visit[len(first) :].astype(np.float64)


def coverage_episode_term(
    coverage_total: np.ndarray, traj_group: np.ndarray, *, kappa_c: float, scale: str, epsilon: float
) -> np.ndarray:
    """A^E_i = kappa_c * norm(C_i, trajectories of the group), one value per trajectory (non-decreasing in C_i)."""
    return kappa_c * segment_norm(coverage_total, traj_group, scale=scale, epsilon=epsilon)


@credit_method("progpo_c", ProGPOCOptions, reads=("gigpo", "grpo"), scorer=similarity_scorer)
def compute_progpo_c(batch: RolloutBatch, cfg: CreditOptions, *, scorer=None, **_: object) -> CreditResult:
    """ProGPO-C on `batch`: GiGPO in groups with a success, coverage credit in all-failed groups."""
    opts, norm, gopts = cfg.progpo_c, cfg.norm, cfg.gigpo
    base = compute_gigpo(batch, cfg, scorer=scorer, method="progpo_c")
    cov = first_visit_coverage(
        batch.group_id, batch.traj_id, batch.step, batch.observation, batch.next_observation, opts.coverage_scope
    )
    all_failed = (np.bincount(batch.group_id, weights=batch.won.astype(float)) == 0)[batch.group_id]
    first = trajectory_first_rows(batch.traj_id)
    c_total = np.bincount(batch.traj_id, weights=cov)
    ep_traj = coverage_episode_term(
        c_total[batch.traj_id[first]],
        batch.group_id[first],
        kappa_c=opts.kappa_c,
        scale=norm.scale,
        epsilon=norm.epsilon,
    )
    ep = np.zeros(int(batch.traj_id.max()) + 1)
    ep[batch.traj_id[first]] = ep_traj
    ep_adv = ep[batch.traj_id]
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    cov_returns = discounted_returns(cov, batch.traj_id, batch.step, gopts.gamma)
    if gopts.enable_similarity:
        anchor = similarity_anchor_groups(batch.group_id, batch.observation, scorer, gopts.similarity_thresh)
    else:
        anchor = anchor_groups(batch.group_id, batch.observation)
    adv_c, step_c = gigpo_from_returns(
        ep_adv, cov_returns - pen, anchor, omega=gopts.step_advantage_w, scale=norm.scale, epsilon=norm.epsilon
    )
    pick = lambda a, b: np.where(all_failed, b, a)  # noqa: E731 - all-failed rows take the coverage value
    diag = {
        "episode_adv": pick(base.diagnostics["episode_adv"], ep_adv),
        "step_adv": pick(base.diagnostics["step_adv"], step_c),
        "anchor_group_size": base.diagnostics["anchor_group_size"],
        "coverage": cov,
        "all_failed_group": all_failed,
    }
    stats = {**base.stats, "progpo_c_coverage_mean": float(cov[all_failed].mean()) if all_failed.any() else 0.0}
    return CreditResult("progpo_c", pick(base.advantages, adv_c), pick(base.returns, cov_returns), diag, stats)
