"""Shuffled credit [ours]: the lower bound of the learning benchmark. GRPO's advantages, permuted among the rows of
each group: the same magnitudes per group, no information about which step or trajectory earned them.

    A_{r} = A^GRPO_{pi_g(r)}   for every row r of group g, pi_g a permutation of g's rows

pi_g is drawn from a generator seeded by (`shuffled.seed`, the group's content id `group_uid`), so a group's
permutation depends on its own rows only (not on batch order or the other groups) and a run is reproducible; the
rows of a group are permuted in their batch order. docs/algorithms.md, "Shuffled credit (control)".
"""

from __future__ import annotations

import numpy as np

from scpo.batch import RolloutBatch, stable_uid
from scpo.credit.grpo import compute_grpo
from scpo.credit.options import CreditConfig
from scpo.credit.result import CreditResult

__all__ = ["compute_shuffled", "group_permutation"]


def group_permutation(group_id: np.ndarray, group_uid: np.ndarray, seed: int) -> np.ndarray:
    """Row indices `src` with src[r] a row of r's group: within each group, a permutation of its rows drawn from
    default_rng([seed, hash(group_uid)])."""
    group_id = np.asarray(group_id)
    src = np.arange(len(group_id))
    for g in np.unique(group_id):
        rows = np.flatnonzero(group_id == g)
        key = int(stable_uid("shuffled", group_uid[rows[0]], length=12), 16)
        src[rows] = rows[np.random.default_rng([int(seed), key]).permutation(len(rows))]
    return src


def compute_shuffled(batch: RolloutBatch, cfg: CreditConfig, **_: object) -> CreditResult:
    """GRPO's advantages on `batch`, permuted within each group (`group_permutation`)."""
    base = compute_grpo(batch, cfg)
    src = group_permutation(batch.group_id, batch.group_uid, cfg.shuffled.seed)
    adv = base.advantages[src]
    diag = {**base.diagnostics, "episode_adv": adv, "shuffled_source_row": src}
    return CreditResult("shuffled", adv, base.returns, diag, base.stats)
