"""The WebShop environment (the `scpo.envs.TextEnv` protocol): WebShop's text env, page for page and action for action.

    env = scpo.envs.make("webshop", task_id="webshop:test:00003")   # or split="train": a weighted random goal per reset
    obs, info = env.reset()
    obs, reward, done, info = env.step("search[machine wash men's underwear]")
    obs, reward, done, info = env.step("click[b076zy1wsm]")

Actions follow `WebAgentTextEnv.step` and `SimServer.receive`: the action is parsed with `re.match(r"(.+)\\[(.+)\\]")`
(the name is case-sensitive, the argument is lowercased and not stripped); `search[<words>]` searches on any page (the
words are the argument split on single spaces); `click[<label>]` acts when the label is a clickable of the current page
other than "search"; anything else changes nothing (the step still counts). Clicks route by label first: "buy now" ends
the episode, "back to search" returns to the search page, "next >" / "< prev" move between result pages ("< prev" on an
item page returns to its results page and clears the chosen options, on a sub page to the item page), "description" /
"features" / "reviews" open a sub page; any other label opens a product (a product link) or chooses an option (the
option's group). Which page a click is on is read from the page URL WebShop would have (keywords included), as WebShop
does. Searches whose first word is "<r>", "<c>" or "<q>" are WebShop's debugging searches (random products, a main
category, a product query); "<a>" crashes WebShop's text env and here returns no results.

Episode rules (ours, as verl-agent runs WebShop): the episode ends on "buy now" (reward 10.0 if WebShop's score is 1.0,
else 0.0; the score is `info["task_score"]`) or after `max_steps` (default 15; None: no limit, as WebShop's own env).
`info` carries `admissible_commands` (verl-agent's list: "search[<your query>]" while the search bar is shown, then the
clickables as `click[...]`), `choice_commands` (the same with the placeholder replaced by `search_candidates(goal)`:
what an admissible-choice policy chooses among), `won`, `task_score`, `task_type`, `goal`, `task_id`, `step`,
`action_valid` (the action changed the page), `page`, `state_description` (the page's fields after the instruction,
quoted, as verl-agent passes WebShop pages on: `pages.without_instruction`) and, after a purchase, `reward_breakdown`.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from scpo.envs.base import STATE_DESCRIPTION
from scpo.envs.webshop import pages
from scpo.envs.webshop.catalogue import SPLITS, Catalogue, load_catalogue
from scpo.envs.webshop.goals import random_idx
from scpo.envs.webshop.queries import search_candidates
from scpo.envs.webshop.reward import RewardBreakdown, get_reward
from scpo.envs.webshop.search import SEARCH_RETURN_N

__all__ = [
    "WebShopEnv",
    "make_webshop",
    "parse_task_id",
    "format_task_id",
    "parse_action",
    "SEARCH_TEMPLATE",
    "SUCCESS_REWARD",
    "DEFAULT_MAX_STEPS",
    "TASK_PREFIX",
]

SUCCESS_REWARD = 10.0
DEFAULT_MAX_STEPS = 15
TASK_PREFIX = "webshop"
SEARCH_PLACEHOLDER = "<your query>"
SEARCH_TEMPLATE = (
    f"search[{SEARCH_PLACEHOLDER}]"  # the admissible-action placeholder verl-agent shows on the search page
)
BASE_URL = "http://127.0.0.1:3000"
_ACTION = re.compile(r"(.+)\[(.+)\]")
_PAGE_NAMES = ("search_results", "item_page", "item_sub_page", "done")
_SUB_TITLES = {"description": "Description", "features": "Features", "reviews": "Reviews"}
_PAGE_KINDS = {"search_results": "results", "item_page": "item", "item_sub_page": "sub", "done": "done"}


def format_task_id(split: str, index: int) -> str:
    """'webshop:<split>:<goal index, 5 digits>' (zero-padded so string order is index order)."""
    return f"{TASK_PREFIX}:{split}:{index:05d}"


def parse_task_id(task_id: str) -> tuple[str, int]:
    """'webshop:test:00012' -> ('test', 12); a bad id raises ValueError naming it."""
    parts = str(task_id).split(":")
    if len(parts) != 3 or parts[0] != TASK_PREFIX or parts[1] not in SPLITS or not parts[2].isdigit():
        raise ValueError(
            f"bad WebShop task id {task_id!r}; expected 'webshop:<split>:<goal index>' with split in "
            f"{', '.join(SPLITS)}"
        )
    return parts[1], int(parts[2])


def parse_action(action: str) -> tuple[str, str | None]:
    """WebShop's parse_action + lowercasing: (name, lowercased argument) or (action, None) when it does not parse."""
    m = _ACTION.match(action)
    if m is None:
        return action, None
    return m.group(1), m.group(2).lower()


def _page_name(url: str) -> str:
    """WebShop's SimServer.get_page_name: the first page name contained in the URL ('' for the search page)."""
    return next((name for name in _PAGE_NAMES if name in url), "")


class WebShopEnv:
    """One shopper session over a catalogue. Fixed goal (`goal_index`) or, with `goal_pool` (a split), a goal drawn per
    reset by WebShop's weighted `random_idx` over that split's goals (seeded)."""

    def __init__(
        self,
        catalogue: Catalogue,
        goal_index: int | None = None,
        goal_pool: str | None = None,
        max_steps: int | None = DEFAULT_MAX_STEPS,
        seed: int = 0,
    ):
        if max_steps is not None and int(max_steps) < 1:
            raise ValueError(f"max_steps must be >= 1 or None (no limit), got {max_steps}")
        if (goal_index is None) == (goal_pool is None):
            raise ValueError("WebShopEnv needs exactly one of goal_index= or goal_pool=")
        if goal_index is not None and not 0 <= goal_index < len(catalogue.goals):
            raise ValueError(f"goal index {goal_index} outside the catalogue's {len(catalogue.goals)} goals")
        self.catalogue = catalogue
        self.max_steps = None if max_steps is None else int(max_steps)
        self._fixed_goal = goal_index
        self._goal_split = goal_pool
        if goal_pool is not None:
            catalogue.split_indices(goal_pool)  # validates the split name
        self._rng = random.Random(seed)
        self._done = True
        self._steps = 0
        self._task_field: str | None = None
        self.goal = catalogue.goals[goal_index if goal_index is not None else catalogue.split_indices(goal_pool)[0]]

    # ----- episode ---------------------------------------------------------------------------------------------------
    @property
    def task_id(self) -> str:
        return format_task_id(self.catalogue.split_of(self.goal.index), self.goal.index)

    def reset(self) -> tuple[str, dict[str, Any]]:
        if self._goal_split is not None:
            indices = self.catalogue.split_indices(self._goal_split)
            self.goal = self.catalogue.goals[
                indices[random_idx(self.catalogue.cum_weights[self._goal_split], self._rng)]
            ]
        self._session = str(self.goal.index)
        self._steps, self._done = 0, False
        self._keywords: list[str] | None = None
        self._page: int | None = None
        self._asin: str | None = None
        self._options: dict[str, str] = {}
        self._results: list = []
        self._breakdown: RewardBreakdown | None = None
        self._show_search()
        fields = self._obs.split(pages.SEP)
        self._task_field = fields[2] if len(fields) > 2 else None  # the goal's field on the search page
        return self._obs, self._info(valid=True)

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError(f"step() on a finished WebShop episode ({self.task_id}); call reset() first")
        self._steps += 1
        valid = self._apply(str(action))
        won = self._breakdown is not None and self._breakdown.score >= 1.0 - 1e-9
        self._done = self._breakdown is not None or (self.max_steps is not None and self._steps >= self.max_steps)
        return self._obs, SUCCESS_REWARD if won else 0.0, self._done, self._info(valid)

    # ----- WebAgentTextEnv.step + SimServer.receive ----------------------------------------------------------------
    def _apply(self, action: str) -> bool:
        """Change the page for an action WebShop acts on and return True; return False (nothing changes) otherwise."""
        name, arg = parse_action(action)
        if name == "search" and arg:
            self._search(arg.split(" "), 1)
            return True
        if name == "click" and arg in self._clickables and arg != "search":
            self._click(arg)
            return True
        return False

    def _click(self, label: str) -> None:
        where = _page_name(self._url)
        if label == pages.BUY_NOW:
            product = self.catalogue.by_asin[self._asin]
            self._breakdown = get_reward(product, self.goal, product.price, self._options)
            options_repr = str(self._options)
            self._obs, self._clickables = pages.done_page(self._asin, self._options, self._breakdown.score)
            self._url = f"{BASE_URL}/done/{self._session}/{self._asin}/{options_repr}"
        elif label == pages.BACK_TO_SEARCH:
            self._show_search()
        elif label == pages.NEXT and where == "search_results":
            self._search(self._keywords, self._page + 1)
        elif label == pages.PREV and where == "search_results":
            self._search(self._keywords, self._page - 1)
        elif label == pages.PREV and where == "item_sub_page":
            self._show_item()
        elif label == pages.PREV and where == "item_page":
            self._search(self._keywords, self._page)
        elif label in pages.SUB_PAGES:
            self._show_sub(label)
        elif self._kinds.get(label) == "product":
            self._asin = label.upper()
            self._show_item()
        else:  # an option value: set in its group
            self._options[self._option_groups[label]] = label
            self._show_item()

    # ----- pages ------------------------------------------------------------------------------------------------------
    def _show_search(self) -> None:
        self._keywords, self._page, self._asin, self._options = None, None, None, {}
        self._obs, self._clickables = pages.search_page(self.goal.instruction)
        self._kinds: dict[str, str] = {}
        self._url = f"{BASE_URL}/{self._session}"

    def _search(self, keywords: list[str], page: int) -> None:
        self._keywords, self._page, self._asin, self._options = keywords, page, None, {}
        self._results = self._top_products(keywords)
        shown = self._results[(page - 1) * pages.RESULTS_PER_PAGE : page * pages.RESULTS_PER_PAGE]
        self._obs, self._clickables = pages.results_page(self.goal.instruction, shown, page, len(self._results))
        self._kinds = {p.asin.lower(): "product" for p in shown}
        self._url = f"{BASE_URL}/search_results/{self._session}/{'+'.join(keywords)}/{page}"

    def _top_products(self, keywords: list[str]) -> list:
        """WebShop's get_top_n_product_from_keywords (the '<a>' and malformed debugging searches give no results)."""
        cat = self.catalogue
        head = keywords[0]
        if head == "<r>":
            return self._rng.sample(cat.products, k=min(SEARCH_RETURN_N, len(cat.products)))
        if head == "<c>":
            return [p for p in cat.products if p.category == keywords[1].strip()] if len(keywords) > 1 else []
        if head == "<q>":
            query = " ".join(keywords[1:]).strip()
            return [p for p in cat.products if p.query == query]
        if head == "<a>":
            return []
        return [cat.by_asin[a] for a in cat.search.search(" ".join(keywords))]

    def _show_item(self) -> None:
        product = self.catalogue.by_asin[self._asin]
        self._obs, self._clickables, self._option_groups = pages.item_page(self.goal.instruction, product)
        self._kinds = {}
        kw = "+".join(self._keywords) if self._keywords is not None else "None"
        self._url = f"{BASE_URL}/item_page/{self._session}/{self._asin}/{kw}/{self._page}/{json.dumps(self._options)}"

    def _show_sub(self, which: str) -> None:
        self._obs, self._clickables = pages.sub_page(self.goal.instruction, self.catalogue.by_asin[self._asin], which)
        self._kinds = {}
        kw = "+".join(self._keywords) if self._keywords is not None else "None"
        self._url = (
            f"{BASE_URL}/item_sub_page/{self._session}/{self._asin}/{kw}/{self._page}/{_SUB_TITLES[which]}/"
            f"{self._options}"
        )

    # ----- info -------------------------------------------------------------------------------------------------------
    @property
    def shown_asins(self) -> list[str]:
        """The product links of the current page (lowercased ASINs; empty off a results page)."""
        return list(self._kinds)

    @property
    def page(self) -> str:
        """'search' | 'results' | 'item' | 'sub' | 'done': the page shown (its URL's first path element)."""
        head = self._url[len(BASE_URL) + 1 :].split("/", 1)
        return _PAGE_KINDS.get(head[0], "search") if len(head) > 1 else "search"

    def admissible_commands(self) -> list[str]:
        head = [SEARCH_TEMPLATE] if self.page == "search" else []
        return head + [f"click[{c}]" for c in self._clickables if c != "search"]

    def choice_commands(self) -> list[str]:
        """The admissible commands with the search placeholder replaced by this goal's candidate searches."""
        head = [f"search[{q}]" for q in search_candidates(self.goal)] if self.page == "search" else []
        return head + [f"click[{c}]" for c in self._clickables if c != "search"]

    def _info(self, valid: bool) -> dict[str, Any]:
        score = self._breakdown.score if self._breakdown is not None else 0.0
        return {
            "admissible_commands": self.admissible_commands(),
            "choice_commands": self.choice_commands(),
            "won": score >= 1.0 - 1e-9,
            "task_score": score,
            "task_type": self.goal.source,
            "goal": self.goal.instruction,
            "task_id": self.task_id,
            "step": self._steps,
            "action_valid": valid,
            "page": self.page,
            "reward_breakdown": asdict(self._breakdown) if self._breakdown is not None else None,
            STATE_DESCRIPTION: self._obs
            if self._task_field is None
            else pages.without_instruction(self._obs, self._task_field),
        }


def make_webshop(
    task_id: str | None = None,
    split: str | None = None,
    data_root: str | Path = "data",
    max_steps: int | None = DEFAULT_MAX_STEPS,
    seed: int = 0,
    catalogue: Catalogue | None = None,
) -> WebShopEnv:
    """Registry factory: a fixed goal (`task_id` from `list_tasks`) or a weighted random goal of `split` per reset."""
    if (task_id is None) == (split is None):
        raise ValueError(
            f"make_webshop needs exactly one of task_id= or split= (got task_id={task_id!r}, split={split!r})"
        )
    catalogue = catalogue if catalogue is not None else load_catalogue(data_root)
    if task_id is not None:
        split_name, index = parse_task_id(task_id)
        if index >= len(catalogue.goals) or catalogue.split_of(index) != split_name:
            raise ValueError(
                f"task id {task_id!r} is not in this catalogue's {split_name} split "
                f"(goals {catalogue.splits.get(split_name)})"
            )
        return WebShopEnv(catalogue, goal_index=index, max_steps=max_steps, seed=seed)
    return WebShopEnv(catalogue, goal_pool=split, max_steps=max_steps, seed=seed)
