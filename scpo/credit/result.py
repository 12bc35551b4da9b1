"""`CreditResult`: what every estimator returns (per-row advantages, returns, diagnostics for credit maps, batch
stats)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["CreditResult"]


@dataclass
class CreditResult:
    """Output of `compute_advantages`.

    advantages  : float64 (n_rows,) A_{i,t}, one per step row (the trainer broadcasts it to the step's response tokens).
    returns     : float64 (n_rows,) the step returns G_{i,t} the method used (shaped for SCPO, coverage returns for
                  ProGPO-C's all-failed groups), before the invalid penalty.
    diagnostics : per-row arrays for credit maps; always "episode_adv", "step_adv", "anchor_group_size".
    stats       : batch-level floats (logged as `credit/<name>`).
    """

    method: str
    advantages: np.ndarray
    returns: np.ndarray
    diagnostics: dict[str, np.ndarray] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.advantages)
        for name, arr in {"returns": self.returns, **self.diagnostics}.items():
            if len(arr) != n:
                raise ValueError(f"CreditResult[{self.method}] {name!r} has {len(arr)} rows, advantages has {n}")
        if not np.all(np.isfinite(self.advantages)):
            bad = np.flatnonzero(~np.isfinite(self.advantages))[:5]
            raise ValueError(f"CreditResult[{self.method}] has non-finite advantages at rows {bad.tolist()}")
