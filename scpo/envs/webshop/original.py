"""Adapter for a separately installed original WebShop (princeton-nlp/WebShop's `WebAgentTextEnv`, text mode).

    env = scpo.envs.make("webshop-original", task_id="webshop:test:00003")

Not a dependency: the original needs Java, a Lucene index and its 1.1M-product files, so it is imported only here, and a
clear ImportError says how to install it when it is missing. The adapter gives it our interface: task ids
'webshop:<split>:<goal index>' with WebShop's own split ranges (test [0, 500), valid [500, 1500), train [1500, n)), the
`search[<your query>]` / `click[...]` admissible list built from `get_available_actions()` (as verl-agent does; the bare
"search" button is left out), reward 10.0
when the original's score is 1.0, `task_score` = that score, and the `max_steps` limit (the original has none).
The wrapped object needs only `reset(session=i) -> (obs, _)`, `step(a) -> (obs, score, done, _)`,
`get_available_actions() -> {"has_search_bar", "clickables"}`, `get_instruction_text()` and `server.goals`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scpo.envs.prompting import action_answer
from scpo.envs.spec import EnvSpec
from scpo.envs.webshop.env import DEFAULT_MAX_STEPS, SEARCH_TEMPLATE, SUCCESS_REWARD, format_task_id, parse_task_id
from scpo.envs.webshop.prompts import project_action

__all__ = [
    "OriginalWebShopEnv",
    "make_original_webshop",
    "original_split_ranges",
    "load_original_env",
    "ORIGINAL_MISSING_MESSAGE",
    "SPEC",
]

ORIGINAL_MISSING_MESSAGE = (
    "the original WebShop is not installed (module web_agent_site not found). Install it separately: clone the "
    "princeton-nlp/WebShop repository, run its setup.sh (Java 11 for pyserini's Lucene index; `-d all` for the full "
    "catalogue) and `pip install -e .` it into this environment. Or use scpo.envs.make('webshop', ...), our own "
    "WebShop environment, which needs none of this."
)


def original_split_ranges(n_goals: int) -> dict[str, tuple[int, int]]:
    """WebShop's goal index ranges: test [0, 500), valid [500, 1500), train [1500, n_goals)."""
    return {
        "test": (0, min(500, n_goals)),
        "valid": (min(500, n_goals), min(1500, n_goals)),
        "train": (min(1500, n_goals), n_goals),
    }


def load_original_env(**env_kwargs: Any):
    """The original `WebAgentTextEnv` in text mode (human goals by default); ImportError with instructions if
    missing."""
    try:
        from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv  # type: ignore[import-not-found]
    except ImportError as err:
        raise ImportError(ORIGINAL_MISSING_MESSAGE) from err
    kwargs = {"observation_mode": "text", "human_goals": True, **env_kwargs}
    return WebAgentTextEnv(**kwargs)


class OriginalWebShopEnv:
    """One goal (session) of the original WebShop behind the `TextEnv` protocol."""

    def __init__(self, original, task_id: str, max_steps: int | None = None):
        self.original = original
        self.max_steps = DEFAULT_MAX_STEPS if max_steps is None else int(max_steps)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        split, self.goal_index = parse_task_id(task_id)
        start, end = original_split_ranges(len(original.server.goals))[split]
        if not start <= self.goal_index < end:
            raise ValueError(
                f"task id {task_id!r}: goal {self.goal_index} is not in the original's {split} split [{start}, {end})"
            )
        self.task_id = format_task_id(split, self.goal_index)
        self.goal = ""
        self._steps, self._done, self._score = 0, True, 0.0

    def admissible_commands(self) -> list[str]:
        available = self.original.get_available_actions()
        head = [SEARCH_TEMPLATE] if available.get("has_search_bar") else []
        return head + [f"click[{c}]" for c in available.get("clickables", []) if c != "search"]

    def _info(self, admissible: list[str], valid: bool) -> dict[str, Any]:
        won = self._score >= 1.0 - 1e-9
        return {
            "admissible_commands": admissible,
            "won": won,
            "task_score": self._score,
            "task_type": "human",
            "goal": self.goal,
            "task_id": self.task_id,
            "step": self._steps,
            "action_valid": valid,
        }

    def reset(self) -> tuple[str, dict[str, Any]]:
        obs, _ = self.original.reset(session=self.goal_index)
        self.goal = self.original.get_instruction_text()
        self._steps, self._done, self._score = 0, False, 0.0
        return obs, self._info(self.admissible_commands(), True)

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError(f"step() on a finished WebShop episode ({self.task_id}); call reset() first")
        # the original lowercases the argument of an action; so does the projection
        _, valid = project_action(action_answer(action), [a.lower() for a in self.admissible_commands()])
        obs, score, done, _ = self.original.step(str(action))
        self._steps += 1
        if done:
            self._score = float(score or 0.0)
        self._done = bool(done) or self._steps >= self.max_steps
        admissible = [] if done else self.admissible_commands()
        return obs, SUCCESS_REWARD if self._score >= 1.0 - 1e-9 else 0.0, self._done, self._info(admissible, valid)


def make_original_webshop(
    task_id: str,
    max_steps: int | None = None,
    original=None,
    env_factory: Callable[..., Any] | None = None,
    **env_kwargs: Any,
) -> OriginalWebShopEnv:
    """Registry factory: wrap `original` (an already built original env, shared by many wrappers), else build one with
    `env_factory(**env_kwargs)` (default: `load_original_env`, which raises a clear ImportError when it is missing)."""
    if original is None:
        original = (env_factory or load_original_env)(**env_kwargs)
    return OriginalWebShopEnv(original, task_id=task_id, max_steps=max_steps)


# `scpo.envs.make("webshop-original", ...)` only: training runs on our WebShop (`webshop`), which has the task list
SPEC = EnvSpec(name="webshop-original", factory=make_original_webshop)
