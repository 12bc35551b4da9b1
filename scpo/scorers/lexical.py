"""Lexical scorer (no model): normalised Indel similarity of the two texts, rapidfuzz `fuzz.ratio / 100`.

ratio(a, b) = 1 - (insertions + deletions to turn a into b) / (len(a) + len(b)); identical texts score 1, two empty
texts score 1. Symmetric. rapidfuzz's C++ `process.cpdist` scores a whole batch in one call.
"""

from __future__ import annotations

import numpy as np
from rapidfuzz import fuzz, process

from scpo.scorers.base import CachedScorer

__all__ = ["LexicalScorer"]


class LexicalScorer(CachedScorer):
    name = "lexical"
    symmetric = True

    def __init__(self, batch_size: int = 4096, **kwargs) -> None:
        super().__init__(batch_size=batch_size, **kwargs)

    def _score_batch(self, left: list[str], right: list[str]) -> np.ndarray:
        return np.asarray(process.cpdist(left, right, scorer=fuzz.ratio, workers=1), dtype=np.float64) / 100.0

    def score_matrix(self, left, right) -> np.ndarray:
        """Whole matrix through rapidfuzz `cdist` (C++), bypassing the pair cache: cheaper than caching for this
        scorer."""
        left, right = [str(x) for x in left], [str(x) for x in right]
        n = len(left) * len(right)
        self._stats["pairs_requested"] += n
        self._stats["pairs_scored"] += n
        self._stats["batches"] += 1
        if n == 0:
            return np.zeros((len(left), len(right)))
        return np.asarray(process.cdist(left, right, scorer=fuzz.ratio, workers=1), dtype=np.float64) / 100.0
