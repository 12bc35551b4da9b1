"""A tiny cross-encoder built locally (random init, no download) for tests, benchmarks and offline demos.

It exercises the real `CrossEncoder` loading and batching path; its scores are meaningless (untrained).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["build_tiny_cross_encoder"]

_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_cross_encoder(
    path: str | Path, texts: Iterable[str] = (), *, hidden_size: int = 16, layers: int = 1, seed: int = 0
) -> Path:
    """Save a 1-label BERT cross-encoder and a word-level tokenizer (vocabulary: the lower-cased words of `texts`)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())} - set(_SPECIAL))
    vocab = {w: i for i, w in enumerate(_SPECIAL + words)}
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=512,
        num_labels=1,
    )
    torch.manual_seed(seed)
    path = Path(path)
    BertForSequenceClassification(cfg).save_pretrained(path)
    BertTokenizer(vocab=vocab).save_pretrained(path)
    return path
