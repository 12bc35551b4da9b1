"""The scorer interface: `score(pairs) -> array in [0, 1]`, batched, cached by text pair.

Subclasses implement `_score_batch(left, right)` for pairs never seen before; `score` deduplicates the request, looks
every pair up in the cache, scores the misses in batches of `batch_size` and stores them. `stats` counts the work.
The cache is a plain dict bounded by `max_cache` pairs: when a batch would overflow it, it is emptied (simple and
bounded; rollouts of consecutive iterations repeat the same recent pairs, so an LRU would buy little).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

__all__ = ["CachedScorer", "ScorerError"]


class ScorerError(RuntimeError):
    """A scorer could not be built (missing model, unknown name)."""


class CachedScorer:
    """Base class: pair cache + batching + counters. Scores are symmetric only if the subclass says so."""

    name = "base"
    symmetric = False

    def __init__(self, batch_size: int = 256, max_cache: int = 2_000_000) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self.batch_size = batch_size
        self.max_cache = max_cache
        self._cache: dict[tuple[str, str], float] = {}
        self._stats = {"pairs_requested": 0, "pairs_scored": 0, "cache_hits": 0, "batches": 0}

    # ---------------------------------------------------------------- public
    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """S(a, b) in [0, 1] for each (a, b); float64 array of len(pairs)."""
        keys = [self._key(a, b) for a, b in pairs]
        self._stats["pairs_requested"] += len(keys)
        cache = self._cache
        missing = list(dict.fromkeys(k for k in keys if k not in cache))
        self._stats["cache_hits"] += len(keys) - len(missing)  # served without scoring (cached or repeated in request)
        starts = range(0, len(missing), self.batch_size)
        for start in tqdm(starts, desc=f"{self.name} scorer", unit="batch", leave=False, disable=len(starts) < 20):
            chunk = missing[start : start + self.batch_size]
            vals = np.clip(np.asarray(self._score_batch([a for a, _ in chunk], [b for _, b in chunk]), float), 0.0, 1.0)
            if len(vals) != len(chunk):
                raise RuntimeError(f"{type(self).__name__} returned {len(vals)} scores for {len(chunk)} pairs")
            if len(cache) + len(chunk) > self.max_cache:
                cache.clear()
            cache.update(zip(chunk, vals.tolist()))
            self._stats["pairs_scored"] += len(chunk)
            self._stats["batches"] += 1
        return np.fromiter((cache[k] for k in keys), dtype=np.float64, count=len(keys))

    def score_matrix(self, left: Sequence[str], right: Sequence[str]) -> np.ndarray:
        """S[i, j] = score(left[i], right[j]), shape (len(left), len(right)); one batched `score` call."""
        pairs = [(a, b) for a in left for b in right]
        return self.score(pairs).reshape(len(left), len(right))

    @property
    def stats(self) -> dict[str, float]:
        out: dict[str, float] = dict(self._stats)
        req = out["pairs_requested"]
        out["cache_hit_rate"] = out["cache_hits"] / req if req else 0.0
        out["cache_size"] = len(self._cache)
        return out

    def reset_stats(self) -> None:
        for k in self._stats:
            self._stats[k] = 0

    def clear_cache(self) -> None:
        self._cache.clear()

    # ---------------------------------------------------------------- subclass hooks
    def _key(self, a: str, b: str) -> tuple[str, str]:
        a, b = str(a), str(b)
        return (b, a) if self.symmetric and b < a else (a, b)

    def _score_batch(self, left: list[str], right: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={self.batch_size}, cached={len(self._cache)})"
