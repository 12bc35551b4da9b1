"""Search queries derived from a goal's instruction: the expert's query and the candidate searches of the search page.

A policy that answers by choosing among admissible commands (the tiny CPU policy, `rollout.action_choice: admissible`)
cannot choose "search[<your query>]": WebShop's search takes free text. `search_candidates(goal)` gives it a fixed menu
instead, made from the instruction alone (nothing the agent cannot see) and the same for every method, seed and
rollout (the random parts are seeded by the instruction text):

1. the instruction without its price clause, lowercased (`expert_query`: what the scripted expert types);
2. the same without the option clause (" with <name>: <value>, and ..." of a synthetic goal), if it has one;
3. word-dropout variants of 1: each word kept with probability 0.6 (at least one), until `n` distinct queries.

WebShop's own imitation-learning baseline gives its choice model a similar menu (`baseline_models/env.py`:
the goal's product query, attribute + query, the instruction); ours avoids the product query, which the agent does not
see.
"""

from __future__ import annotations

import functools
import random
import re

from scpo.batch import stable_uid

__all__ = ["expert_query", "search_candidates", "N_SEARCH_CANDIDATES"]

N_SEARCH_CANDIDATES = 5
KEEP_PROB = 0.6
_PRICE_CLAUSE = re.compile(r",? and price lower than [\d.]+ dollars\s*$")


def expert_query(instruction: str) -> str:
    """The instruction without its price clause, lowercased: what the expert types into the search box."""
    return _PRICE_CLAUSE.sub("", instruction).strip().lower()


@functools.lru_cache(maxsize=65536)
def _candidates(instruction: str, option_text: str, n: int) -> tuple[str, ...]:
    full = expert_query(instruction)
    out = [full]
    suffix = (" with " + option_text).lower() if option_text else ""
    if suffix and full.endswith(suffix) and len(full) > len(suffix):
        out.append(full[: -len(suffix)].strip())
    words = full.split()
    rng = random.Random(int(stable_uid("webshop-search-candidates", instruction), 16))
    for _ in range(20 * n):
        if len(out) >= n or len(words) < 2:
            break
        kept = [w for w in words if rng.random() < KEEP_PROB] or [rng.choice(words)]
        query = " ".join(kept)
        if query not in out:
            out.append(query)
    return tuple(out[:n])


def search_candidates(goal, n: int = N_SEARCH_CANDIDATES) -> tuple[str, ...]:
    """`n` (or fewer, for very short instructions) distinct candidate searches for `goal` (see the module docstring)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    opts = goal.goal_options
    option_text = ", and ".join(f"{k}: {v}" for k, v in opts.items()) if isinstance(opts, dict) else ""
    return _candidates(goal.instruction, option_text, n)
