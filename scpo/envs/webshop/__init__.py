"""WebShop: WebShop's pages, actions and purchase reward over a catalogue built from the public WebShop files.

Contract (shared with ALFWorld): `list_tasks`, `make_env`, `task_type`, `expert_actions`, `build_prompt`,
`project_action`. Task ids are 'webshop:<split>:<goal index>' (splits: test, valid, train; see catalogue.split_ranges).
`make_original_webshop` (original.py) adapts a separately installed original WebShop to the same interface.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from scpo.envs.spec import EnvOptions, EnvSpec
from scpo.envs.webshop.catalogue import SPLITS, Catalogue, build_catalogue, load_catalogue, split_ranges
from scpo.envs.webshop.env import (
    DEFAULT_MAX_STEPS,
    SEARCH_TEMPLATE,
    SUCCESS_REWARD,
    WebShopEnv,
    format_task_id,
    make_webshop,
    parse_task_id,
)
from scpo.envs.webshop.policies import RandomPolicy, expert_actions, run_episode
from scpo.envs.webshop.prompts import PROMPT_PHRASES, build_prompt, project_action

__all__ = [
    "list_tasks",
    "make_env",
    "task_type",
    "expert_actions",
    "build_prompt",
    "project_action",
    "PROMPT_PHRASES",
    "WebShopEnv",
    "make_webshop",
    "RandomPolicy",
    "run_episode",
    "build_catalogue",
    "load_catalogue",
    "split_ranges",
    "Catalogue",
    "SPLITS",
    "SEARCH_TEMPLATE",
    "SUCCESS_REWARD",
    "DEFAULT_MAX_STEPS",
    "TASK_TYPES",
    "WebShopOptions",
    "SPEC",
]

TASK_TYPES = ("human", "synthetic")  # the goal's instruction: written by a person or by WebShop's template


def list_tasks(split: str, data_root: str | Path = "data", limit: int | None = None) -> list[str]:
    """Task ids of `split` in goal order (zero-padded, so also string-sorted); the first `limit` when given."""
    if split not in SPLITS:
        raise ValueError(f"unknown WebShop split {split!r}; allowed: {', '.join(SPLITS)}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    indices = load_catalogue(data_root).split_indices(split)
    ids = [format_task_id(split, i) for i in indices]
    return ids if limit is None else ids[:limit]


def make_env(task_id: str, data_root: str | Path = "data", max_steps: int | None = None, **options) -> WebShopEnv:
    """The env of one task id from `list_tasks` (options: seed, catalogue); max_steps None = the default 15."""
    unknown = set(options) - {"seed", "catalogue"}
    if unknown:
        raise TypeError(f"unknown WebShop env options {sorted(unknown)}; known: max_steps, data_root, seed, catalogue")
    return make_webshop(
        task_id=task_id, data_root=data_root, max_steps=DEFAULT_MAX_STEPS if max_steps is None else max_steps, **options
    )


def task_type(task_id: str, data_root: str | Path = "data") -> str:
    """'human' or 'synthetic': who wrote the goal's instruction."""
    _, index = parse_task_id(task_id)
    goals = load_catalogue(data_root).goals
    if index >= len(goals):
        raise ValueError(f"task id {task_id!r}: goal index {index} outside the catalogue's {len(goals)} goals")
    return goals[index].source


class WebShopOptions(EnvOptions):
    """`env.webshop` in params.yaml. Evaluation on `test`, as the WebShop and GiGPO papers report."""

    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1)
    train_split: Literal[SPLITS] = "train"
    eval_splits: tuple[Literal[SPLITS], ...] = Field(("test",), min_length=1)


SPEC = EnvSpec(
    name="webshop",
    factory=make_webshop,
    package=__name__,
    options=WebShopOptions,
    tokenizer_phrases=PROMPT_PHRASES,
    # the tiny policy's tokenizer folds case: WebShop shows an ASIN as "B09RPRRNVP" and clicks it as
    # "click[b09rprrnvp]", and a small model can only learn to click the product it read if both are the same tokens
    tokenizer_lowercase=True,
)
