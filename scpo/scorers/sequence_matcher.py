"""difflib scorer: `difflib.SequenceMatcher(None, a, b).ratio()`, called exactly as verl-agent calls it (GiGPO's
`are_similar` in `gigpo/core_gigpo.py`, GraphGPO's `StateCanonicalizer` in `recipe/GraphGPO/core_graph.py`): no junk
function and the default `autojunk=True`.

    ratio(a, b) = 2 M / (len(a) + len(b)),   M = characters in the matching blocks SequenceMatcher finds

SequenceMatcher seeds each block with the longest run of characters that are not "popular" in b: when b has 200
characters or more, a character occurring more than len(b) // 100 + 1 times in b is popular (the autojunk heuristic).
On long texts most letters are popular, so two texts that differ in a few characters can score far below their edit
distance: two 408-character ALFWorld rooms differing in 4 digits score 0.3186 here against 0.9902 under the lexical
scorer (rapidfuzz's Indel ratio, `scpo.scorers.lexical`). Not symmetric (b is the text whose characters are judged);
identical texts score 1 (a block seeded nowhere still extends over equal characters), two empty texts score 1.
Pure Python: milliseconds per pair of ALFWorld-length texts where rapidfuzz takes microseconds
(benchmarks/credit_bench.py times GiGPO's similarity option under both); pairs are cached by the base class.
"""

from __future__ import annotations

from difflib import SequenceMatcher

import numpy as np

from scpo.scorers.base import CachedScorer

__all__ = ["SequenceMatcherScorer", "sequence_ratio"]


def sequence_ratio(a: str, b: str) -> float:
    """`SequenceMatcher(None, a, b).ratio()`: verl-agent's similarity of two texts (a the candidate, b the cluster's
    representative)."""
    return SequenceMatcher(None, a, b).ratio()


class SequenceMatcherScorer(CachedScorer):
    name = "difflib"
    symmetric = False

    def _score_batch(self, left: list[str], right: list[str]) -> np.ndarray:
        return np.array([sequence_ratio(a, b) for a, b in zip(left, right)])
