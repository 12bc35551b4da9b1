"""The fuzzy matcher of WebShop's reward: thefuzz 0.19.0's `fuzz.token_set_ratio` as WebShop runs it.

WebShop pins thefuzz==0.19.0 and does not install python-Levenshtein, so thefuzz falls back to `difflib.SequenceMatcher`
(the "slow pure-python SequenceMatcher" warning). Its semantics, reproduced here by hand because no maintained package
has them (rapidfuzz and thefuzz >= 0.20 use Indel distances, and the score is not rounded the same way):

    full_process(s) = strip(lower(re.sub(r"(?ui)\\W", " ", asciidammit(s))))
        asciidammit: str(s) for a non-string (a (name, value) tuple becomes "('size', 'small')"), then the characters
        U+0080..U+00FF are deleted (not transliterated); everything else is kept
    t1, t2 = set(full_process(s1).split()), set(full_process(s2).split())      (0 if either processed string is empty)
    sect = " ".join(sorted(t1 & t2)); c12 = (sect + " " + " ".join(sorted(t1 - t2))).strip(); likewise c21
    token_set_ratio = max(ratio(sect, c12), ratio(sect, c21), ratio(c12, c21))
    ratio(a, b) = 100 if a == b; 0 if a or b is empty; else int(round(100 * SequenceMatcher(None, a, b).ratio()))

round() is Python's (half to even), and SequenceMatcher keeps its default autojunk heuristic (strings of 200+
characters).
WebShop counts a match when the score is > 85, so a raw similarity of 85.4 (rounded to 85) is not a match.
"""

from __future__ import annotations

import difflib
import functools
import re

__all__ = ["full_process", "ratio", "token_set_ratio", "FUZZY_THRESHOLD"]

FUZZY_THRESHOLD = 85  # WebShop: a match when token_set_ratio(...) > 85

_NON_WORD = re.compile(r"(?ui)\W")
_LATIN1 = dict.fromkeys(range(128, 256))  # thefuzz's asciionly deletes exactly these code points


def full_process(s: object) -> str:
    """thefuzz 0.19.0 `utils.full_process(s, force_ascii=True)`."""
    text = s if type(s) is str else str(s)
    return _NON_WORD.sub(" ", text.translate(_LATIN1)).lower().strip()


def ratio(a: str, b: str) -> int:
    """thefuzz 0.19.0 `fuzz.ratio` on two processed strings (difflib backend)."""
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


@functools.lru_cache(maxsize=262144)
def _token_set_processed(p1: str, p2: str) -> int:
    if not p1 or not p2:
        return 0
    t1, t2 = set(p1.split()), set(p2.split())
    sect = " ".join(sorted(t1 & t2))
    c12 = (sect + " " + " ".join(sorted(t1 - t2))).strip()
    c21 = (sect + " " + " ".join(sorted(t2 - t1))).strip()
    return max(ratio(sect.strip(), c12), ratio(sect.strip(), c21), ratio(c12, c21))


def token_set_ratio(s1: object, s2: object) -> int:
    """thefuzz 0.19.0 `fuzz.token_set_ratio(s1, s2)` with its defaults (force_ascii, full_process), difflib backend.
    Accepts any objects, as thefuzz does (None -> 0; anything else through str())."""
    if s1 is None or s2 is None:
        return 0
    return _token_set_processed(full_process(s1), full_process(s2))
