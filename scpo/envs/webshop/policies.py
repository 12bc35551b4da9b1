"""Scripted WebShop policies: the expert (demonstrations, tests) and a seeded random policy (the floor).

Expert: search with the goal's first candidate search (the instruction without its price clause; `queries`), page
through the results until the goal's product shows (while the page is full, at most 5 pages: WebShop returns at most
50), open it, click each goal option, buy. If the product is not among the results it goes back and tries the next
candidate search, then the product's title. The expert knows the goal's product (privileged); with the goal's own
product, options and price its score is 1.0 by construction of the reward, so a failure means search or paging missed
it. Random: a uniform draw among the admissible commands; on the search page it searches a random subset of the
instruction's words.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from scpo.envs.webshop import pages
from scpo.envs.webshop.env import SEARCH_TEMPLATE, WebShopEnv, make_webshop
from scpo.envs.webshop.queries import expert_query, search_candidates

__all__ = ["expert_query", "expert_actions", "expert_plan", "RandomPolicy", "run_episode", "MAX_RESULT_PAGES"]

MAX_RESULT_PAGES = 5  # WebShop returns at most 50 results, 10 per page


def expert_plan(env: WebShopEnv) -> list[str]:
    """Play the expert on `env` from reset and return its actions (the env is left at the end of the episode)."""
    _, info = env.reset()
    goal = env.goal
    product = env.catalogue.by_asin[goal.asin]
    target = f"click[{goal.asin.lower()}]"
    actions: list[str] = []

    def act(action: str) -> dict[str, Any]:
        actions.append(action)
        return env.step(action)[3]

    for query in (*search_candidates(goal)[:2], product.title.lower()):
        info = act(f"search[{query}]")
        page = 1
        while (
            target not in info["admissible_commands"]
            and page < MAX_RESULT_PAGES
            and len(env.shown_asins) == pages.RESULTS_PER_PAGE
        ):
            info = act(f"click[{pages.NEXT}]")
            page += 1
        if target in info["admissible_commands"]:
            break
        info = act(f"click[{pages.BACK_TO_SEARCH}]")
    else:
        return actions  # not found: the expert fails (never seen on the built catalogues; see the tests)
    info = act(target)
    for option in goal.option_values:
        if f"click[{option}]" in info["admissible_commands"]:
            info = act(f"click[{option}]")
    act(f"click[{pages.BUY_NOW}]")
    return actions


def expert_actions(task_id: str, data_root: str | Path = "data", catalogue=None) -> list[str]:
    """An expert action sequence that solves `task_id` when played from reset."""
    return expert_plan(make_webshop(task_id=task_id, data_root=data_root, catalogue=catalogue))


class RandomPolicy:
    """Uniform over the admissible commands (seeded); searches use a random subset of the instruction's words."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        action = self.rng.choice(info["admissible_commands"])
        if action == SEARCH_TEMPLATE:
            words = expert_query(info["goal"]).split()
            k = self.rng.randint(1, max(1, len(words)))
            return "search[" + " ".join(self.rng.sample(words, k)) + "]"
        return action


def run_episode(env: WebShopEnv, policy) -> dict[str, Any]:
    """Play one episode of `policy(observation, info) -> action` from reset; return its score, win and step count."""
    obs, info = env.reset()
    done, steps = False, 0
    while not done:
        obs, _, done, info = env.step(policy(obs, info))
        steps += 1
    return {"task_id": info["task_id"], "task_score": info["task_score"], "won": info["won"], "steps": steps}
