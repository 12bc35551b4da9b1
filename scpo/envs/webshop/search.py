"""BM25 product search (bm25s), standing in for WebShop's Lucene (pyserini) index.

Each product is indexed under WebShop's document text (`search_engine/convert_product_file_format.py`): title,
description, first bullet point and "<option>: <v1>, <v2>, and ..." text, lowercased. Scoring is BM25 with pyserini's
defaults k1 = 0.9, b = 0.4 (Lucene's variant); the analyzer is bm25s's (word tokens of 2+ characters, English stop
words, no stemming) where pyserini's uses Lucene's tokenizer and Porter stemmer, so rankings differ somewhat. A query
returns up to `SEARCH_RETURN_N` = 50 ASINs (WebShop's limit), best first, dropping products that share no term with
the query (as Lucene does). Results are cached per query, so repeated searches (N rollouts of one task) cost a lookup.
"""

from __future__ import annotations

import functools
import logging

import bm25s
import numpy as np

__all__ = ["ProductSearch", "SEARCH_RETURN_N", "product_text"]

SEARCH_RETURN_N = 50


def product_text(product) -> str:
    """WebShop's document text of one product (see the module docstring)."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product.options.items())
    first_bullet = product.features[0] if product.features else ""
    return " ".join([product.title, product.description, first_bullet, option_text]).lower()


class ProductSearch:
    """search(query) -> tuple of ASINs (at most `k`), ranked by BM25 (Lucene's variant, k1=0.9, b=0.4)."""

    def __init__(self, products, k: int = SEARCH_RETURN_N, cache_size: int = 8192) -> None:
        self.asins = [p.asin for p in products]
        self.k = min(k, len(self.asins))
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        corpus = bm25s.tokenize([product_text(p) for p in products], stopwords="en", show_progress=False)
        self._retriever = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
        self._retriever.index(corpus, show_progress=False)
        self._vocab = corpus.vocab
        self.search = functools.lru_cache(maxsize=cache_size)(self._search)

    def _search(self, query: str) -> tuple[str, ...]:
        tokens = bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0]
        ids = [self._vocab[t] for t in tokens if t in self._vocab]
        if not ids or self.k == 0:
            return ()
        docs, scores = self._retriever.retrieve([ids], k=self.k, show_progress=False, n_threads=1)
        docs, scores = docs[0], scores[0]
        keep = scores > 0
        return tuple(self.asins[i] for i in np.asarray(docs)[keep])
