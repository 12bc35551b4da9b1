"""WebShop's goals (`web_agent_site/engine/goal.py` and `envs/web_agent_text_env.py::SimServer`): building, weighting,
shuffling, limiting and sampling, reproduced step for step.

- synthetic goals (`get_synthetic_goals`): for each product with a synthetic instruction, in product order, one goal per
  combination of its option values (option names sorted): instruction + " with <name>: <value>, and ..." + price clause;
  goal_options = {name: value}; weight = mean over the goal's attributes of 1 / (number of goals naming the attribute).
- human goals (`get_human_goals`): each human instruction of a product, if it has attributes: the instruction with '.'
  stripped at both ends + price clause; goal_options = its instruction_options (a list); weight 1.
- price clause: the four multiples of $10 above the price; with at least two, two distinct ones are drawn and the larger
  is the bound (", and price lower than X.00 dollars"); else no clause and the bound is 1,000,000. One draw per goal
  (human) or per product (synthetic), from `rng` in that order (WebShop: the unseeded global `random`, right after the
  reward prices of `source.load_products`).
- order: `random.seed(233); random.shuffle(goals)`; then, with a limit below the count (`limit_goals`), distinct goals
  are drawn by weight with `random_idx` from the same stream until the limit is reached, in draw order.
- `random_idx(cum_weights)`: pos = uniform(0, total); idx = min(bisect_right(cum_weights, pos), n - 1) with
  cum_weights = [0, w0, w0 + w1, ...]. Index i >= 1 is drawn with weight w_(i-1) (and n - 1 also with w_(n-1)): goal 0
  is never drawn and every other goal takes its predecessor's weight. That is WebShop's code; we keep it.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scpo.envs.webshop.reward import NO_PRICE_BOUND

__all__ = [
    "Goal",
    "PRICE_RANGE",
    "GOAL_SHUFFLE_SEED",
    "price_clause",
    "synthetic_goals",
    "human_goals",
    "order_goals",
    "random_idx",
    "cumulative_weights",
]

PRICE_RANGE = [10.0 * i for i in range(1, 100)]
GOAL_SHUFFLE_SEED = 233


@dataclass(frozen=True)
class Goal:
    """One goal as WebShop's goal dicts hold it (ours: `instruction`; WebShop's: instruction_text)."""

    index: int
    asin: str
    instruction: str
    attributes: tuple[str, ...]
    goal_options: dict[str, str] | tuple[str, ...]  # synthetic: {name: value}; human: option strings
    price_upper: float  # NO_PRICE_BOUND when the instruction has no price clause
    query: str
    name: str  # the goal product's title
    category: str
    product_category: str
    weight: float
    source: str  # "synthetic" | "human"

    @property
    def option_values(self) -> tuple[str, ...]:
        """The option values the goal asks for (a dict's values, or the human goal's strings)."""
        return tuple(self.goal_options.values()) if isinstance(self.goal_options, dict) else tuple(self.goal_options)


def price_clause(rng: random.Random, price: float) -> tuple[float, str]:
    """(price_upper, text) by WebShop's rule (see the module docstring)."""
    price_range = [p for p in PRICE_RANGE if p > price][:4]
    if len(price_range) >= 2:
        _, upper = sorted(rng.sample(price_range, 2))
        return upper, f", and price lower than {upper:.2f} dollars"
    return NO_PRICE_BOUND, ""


def synthetic_goals(products: Sequence, rng: random.Random) -> list[dict]:
    """WebShop's get_synthetic_goals over `source.Product`s (goal dicts without index)."""
    goals: list[dict] = []
    counts: dict[str, int] = defaultdict(int)
    for p in products:
        if p.instruction is None:
            continue
        if not p.instruction_attributes:
            raise ValueError(
                f"product {p.asin}: a synthetic instruction without instruction_attributes "
                "(WebShop asserts there is at least one)"
            )
        upper, text = price_clause(rng, p.price)
        names = sorted(p.options)
        for combination in itertools.product(*(p.options[n] for n in names)):
            chosen = dict(zip(names, combination, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            option_text = " with " + option_text if option_text else ""
            goals.append(
                {
                    "asin": p.asin,
                    "instruction": f"{p.instruction}{option_text}{text}",
                    "attributes": list(p.instruction_attributes),
                    "goal_options": chosen,
                    "price_upper": upper,
                    "query": p.query,
                    "name": p.title,
                    "category": p.category,
                    "product_category": p.product_category,
                    "source": "synthetic",
                }
            )
            for att in p.instruction_attributes:
                counts[att] += 1
    for g in goals:
        g["weight"] = sum(1.0 / counts[a] for a in g["attributes"]) / len(g["attributes"])
    return goals


def human_goals(products: Sequence, instructions: dict[str, list[dict]], rng: random.Random) -> list[dict]:
    """WebShop's get_human_goals: one goal per human instruction with attributes, products in order."""
    goals: list[dict] = []
    for p in products:
        for ins in instructions.get(p.asin, ()):
            attributes = ins["instruction_attributes"]
            if len(attributes) == 0:
                continue
            upper, text = price_clause(rng, p.price)
            goals.append(
                {
                    "asin": p.asin,
                    "instruction": ins["instruction"].strip(".") + text,
                    "attributes": list(attributes),
                    "goal_options": list(ins["instruction_options"]),
                    "price_upper": upper,
                    "query": p.query,
                    "name": p.title,
                    "category": p.category,
                    "product_category": p.product_category,
                    "weight": 1.0,
                    "source": "human",
                }
            )
    return goals


def cumulative_weights(weights: Sequence[float]) -> list[float]:
    """WebShop's `[0] + np.cumsum(weights).tolist()`."""
    return [0] + np.cumsum(np.asarray(weights, dtype=float)).tolist()


def random_idx(cum_weights: Sequence[float], rng: random.Random) -> int:
    """WebShop's `utils.random_idx` with an explicit random stream."""
    pos = rng.uniform(0, cum_weights[-1])
    return min(bisect.bisect(cum_weights, pos), len(cum_weights) - 2)


def order_goals(goals: list[dict], limit: int | None = None, seed: int = GOAL_SHUFFLE_SEED) -> list[dict]:
    """SimServer's goal order: shuffle with Random(233), then (limit < len) a weighted draw of `limit` distinct
    goals."""
    rng = random.Random(seed)
    goals = list(goals)
    rng.shuffle(goals)
    if limit is not None and limit != -1 and limit < len(goals):
        cum = cumulative_weights([g["weight"] for g in goals])
        picked: list[int] = []
        seen: set[int] = set()
        while len(picked) < limit:
            idx = random_idx(cum, rng)
            if idx not in seen:
                seen.add(idx)
                picked.append(idx)
        goals = [goals[i] for i in picked]
    return goals
