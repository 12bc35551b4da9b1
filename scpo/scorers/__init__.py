"""Frozen scorers behind SCPO's matching and similarity grouping: `make_scorer(name)`.

scorer = make_scorer("difflib" | "lexical" | "bi_encoder" | "cross_encoder", model=None, batch_size=...)
scorer.score([(a, b), ...]) -> np.ndarray in [0, 1];  scorer.score_matrix(left, right);  scorer.stats

difflib: `difflib.SequenceMatcher(None, a, b).ratio()`, verl-agent's similarity (GiGPO's and GraphGPO's default here);
lexical: rapidfuzz's Indel ratio (SCPO's and ProGPO-R's default); bi_encoder / cross_encoder: sentence-transformers
models.
"""

from __future__ import annotations

from pathlib import Path

from scpo.scorers.base import CachedScorer, ScorerError

__all__ = ["make_scorer", "available_scorers", "CachedScorer", "ScorerError"]

_SCORERS = ("difflib", "lexical", "bi_encoder", "cross_encoder")


def available_scorers() -> tuple[str, ...]:
    return _SCORERS


def make_scorer(name: str, model: str | Path | None = None, batch_size: int | None = None, **kwargs) -> CachedScorer:
    """Build a scorer by name. `model`: local folder or Hub name (model scorers only; None = the default)."""
    extra = {"batch_size": batch_size} if batch_size is not None else {}
    if name in ("difflib", "lexical") and model is not None:
        raise ValueError(f"the {name} scorer takes no model (got model={model!r})")
    if name == "difflib":
        from scpo.scorers.sequence_matcher import SequenceMatcherScorer

        return SequenceMatcherScorer(**extra, **kwargs)
    if name == "lexical":
        from scpo.scorers.lexical import LexicalScorer

        return LexicalScorer(**extra, **kwargs)
    if name == "bi_encoder":
        from scpo.scorers.bi_encoder import BiEncoderScorer

        return BiEncoderScorer(model=model, **extra, **kwargs)
    if name == "cross_encoder":
        from scpo.scorers.cross_encoder import CrossEncoderScorer

        return CrossEncoderScorer(model=model, **extra, **kwargs)
    raise KeyError(f"unknown scorer {name!r}; available: {', '.join(_SCORERS)}")
