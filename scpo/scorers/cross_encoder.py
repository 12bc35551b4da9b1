"""Cross-encoder scorer: sentence-transformers `CrossEncoder` with one output label, squashed by a sigmoid to [0, 1].

Any local folder or Hub name works (a Hub name needs internet the first time). The model reads both texts jointly, so
every distinct pair is one forward pass: the pair cache of the base class is what keeps SCPO affordable.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scpo.scorers.base import CachedScorer, ScorerError
from scpo.scorers.bi_encoder import check_model_path, load_model

__all__ = ["CrossEncoderScorer"]


class CrossEncoderScorer(CachedScorer):
    name = "cross_encoder"
    symmetric = False

    def __init__(self, model: str | Path | None = None, batch_size: int = 64, max_length: int = 256, **kwargs) -> None:
        super().__init__(batch_size=batch_size, **kwargs)
        if model is None:
            raise ScorerError(
                "the cross_encoder scorer needs model=<local folder or Hub name of a CrossEncoder>; "
                "no cross-encoder ships offline with scpo (use scorer='bi_encoder' for an offline model)"
            )
        check_model_path(model, "cross-encoder")
        import torch
        from sentence_transformers import CrossEncoder

        self.model_name = str(model)
        self.model = load_model(CrossEncoder, self.model_name, "cross-encoder", max_length=max_length)
        n_labels = getattr(self.model.config, "num_labels", 1) if hasattr(self.model, "config") else 1
        if n_labels != 1:
            raise ScorerError(
                f"cross-encoder {self.model_name!r} has {n_labels} output labels; SCPO needs a "
                "single relevance score (num_labels=1)"
            )
        self._sigmoid = torch.nn.Sigmoid()

    def _score_batch(self, left: list[str], right: list[str]) -> np.ndarray:
        out = self.model.predict(
            list(zip(left, right)),
            batch_size=self.batch_size,
            activation_fn=self._sigmoid,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(out, dtype=np.float64).reshape(-1)
