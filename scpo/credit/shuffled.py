"""Shuffled credit [ours]: the lower bound of the learning benchmark. GRPO's advantages, permuted among the rows of
each group: the same magnitudes per group, no information about which step or trajectory earned them.

    A_{r} = A^GRPO_{pi_g(r)}   for every row r of group g, pi_g a permutation of g's rows

pi_g is drawn from a generator seeded by (`shuffled.seed`, the group's content id `group_uid`) and applied to the
group's rows in a canonical order (by their trajectory's content digest, then step), so a group's credit depends on
its own rows only, not on the order trajectories were collected in or on the other groups (identical trajectories of
a group may exchange their values). docs/algorithms.md, "Shuffled credit (control)".
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch, stable_uid
from scpo.credit.grpo import compute_grpo
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["ShuffledOptions", "compute_shuffled", "group_permutation", "trajectory_digests"]


class ShuffledOptions(StrictModel):
    """[ours] the learning benchmark's lower bound: GRPO's advantages permuted among each group's rows."""

    seed: int = Field(0, description="seeds each group's permutation (with the group's content id)")


def trajectory_digests(batch: RolloutBatch) -> np.ndarray:
    """Per row, a digest of its trajectory's content (every step's observation, action, reward, validity and next
    observation): the same for identical trajectories, whatever their place in the batch."""
    traj = np.asarray(batch.traj_id)
    digest: dict[int, str] = {}
    for t in np.unique(traj):
        rows = np.flatnonzero(traj == t)
        parts = [
            f"{batch.observation[r]}\x1f{batch.action[r]}\x1f{batch.reward[r]!r}\x1f{bool(batch.valid[r])}"
            f"\x1f{batch.next_observation[r]}"
            for r in rows[np.argsort(batch.step[rows], kind="stable")]
        ]
        digest[int(t)] = stable_uid("trajectory", *parts)
    return np.array([digest[int(t)] for t in traj], dtype=object)


def group_permutation(
    group_id: np.ndarray, group_uid: np.ndarray, seed: int, canonical: np.ndarray | None = None
) -> np.ndarray:
    """Row indices `src` with src[r] a row of r's group: within each group, a permutation drawn from
    default_rng([seed, hash(group_uid)]) of its rows in the order `canonical` gives (a per-row sort key: ties keep
    batch order; None: batch order)."""
    group_id = np.asarray(group_id)
    src = np.arange(len(group_id))
    for g in np.unique(group_id):
        rows = np.flatnonzero(group_id == g)
        if canonical is not None:
            rows = rows[np.argsort(canonical[rows], kind="stable")]
        key = int(stable_uid("shuffled", group_uid[rows[0]], length=12), 16)
        src[rows] = rows[np.random.default_rng([int(seed), key]).permutation(len(rows))]
    return src


@credit_method("shuffled", ShuffledOptions, reads=("grpo",), bound="lower bound: no information")
def compute_shuffled(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """GRPO's advantages on `batch`, permuted within each group (`group_permutation` in the rows' content order)."""
    base = compute_grpo(batch, cfg)
    canonical = np.array([f"{d}:{int(s):06d}" for d, s in zip(trajectory_digests(batch), batch.step)], dtype=object)
    src = group_permutation(batch.group_id, batch.group_uid, cfg.shuffled.seed, canonical)
    adv = base.advantages[src]
    diag = {**base.diagnostics, "episode_adv": adv, "shuffled_source_row": src}
    return CreditResult("shuffled", adv, base.returns, diag, base.stats)
