"""The normalisations of docs/algorithms.md written out plainly, for credit values worked by hand in the tests."""

from __future__ import annotations

import numpy as np

EPS = 1e-6  # credit.norm.epsilon's default


def norm(x, ddof: int = 1, eps: float = EPS) -> np.ndarray:
    """norm(x) over the whole of x: (x - mean) / (std + eps), sample std by default."""
    x = np.asarray(x, dtype=float)
    return (x - x.mean()) / (x.std(ddof=ddof) + eps)


def pop_norm(x, values) -> np.ndarray:
    """x normalised by the mean and population std of `values` (HGPO's statistics)."""
    return (np.asarray(x, dtype=float) - np.mean(values)) / (np.std(values) + EPS)
