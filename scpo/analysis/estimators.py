"""Run several credit estimators on the same saved rollouts (for credit maps and the inconsistency metric).

HCAPO is left out here: it re-scores each response with the policy (algorithms.md, HCAPO), so it cannot be computed from
saved rollouts alone; every other registered estimator is a pure function of the batch and the config.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from scpo.config import Config
from scpo.rollout_types import RolloutBatch

__all__ = ["POLICY_METHODS", "rollout_only_methods", "batch_env", "compute_all"]

POLICY_METHODS = frozenset({"hcapo"})


def rollout_only_methods(methods: Iterable[str]) -> list[str]:
    """`methods` without the ones that need the policy (order kept)."""
    return [m for m in methods if m not in POLICY_METHODS]


def batch_env(batch: RolloutBatch) -> str | None:
    """The environment the rollouts came from (their `env_name` column), None when it is empty or mixed."""
    names = {str(n) for n in np.unique(batch.env_name)} - {""}
    return names.pop() if len(names) == 1 else None


def compute_all(batch: RolloutBatch, cfg: Config, methods: Iterable[str], scorer=None, env: str | None = None) -> dict:
    """{method: CreditResult} for each rollout-only method in `methods`, all on `batch` with `cfg.credit` at the
    environment's reference scale (`env`, default: the batch's `env_name`; see `CreditConfig.for_env`).

    `scorer` None: each method builds its configured scorer (scpo.credit caches one per name, so the pair cache is
    shared across calls)."""
    from scpo.credit import compute_advantages

    credit = cfg.credit.for_env(env or batch_env(batch))
    return {m: compute_advantages(m, batch, credit, scorer=scorer) for m in rollout_only_methods(methods)}
