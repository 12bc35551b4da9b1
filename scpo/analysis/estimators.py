"""Run several credit estimators on the same saved rollouts (for credit maps and the inconsistency metric).

Methods whose registry spec needs more than the rollouts (`MethodSpec.rollouts_suffice` is False: HCAPO re-scores each
response with the policy, algorithms.md "HCAPO"; an oracle method needs per-step oracle progress) are left out; every
other registered estimator is a pure function of the batch and the config.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from scpo.config import Config
from scpo.rollout_types import RolloutBatch

__all__ = ["rollout_only_methods", "batch_env", "compute_all"]


def rollout_only_methods(methods: Iterable[str]) -> list[str]:
    """`methods` without the ones whose spec needs the policy or an oracle (order kept)."""
    from scpo.credit.registry import method_spec

    return [m for m in methods if method_spec(m).rollouts_suffice]


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
