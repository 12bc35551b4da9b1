"""The protocols of the environments: `TextEnv` (one episode's environment) and `EnvPackage` (what an environment
package exposes to the collector, SFT and evaluation). Environments return raw observations and know nothing of
credit, policies or trainers (imports point one way: envs <- rollout <- trainer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["TextEnv", "StepResult", "EnvPackage", "CONTRACT", "STATE_DESCRIPTION"]

StepResult = tuple[str, float, bool, dict[str, Any]]
STATE_DESCRIPTION = "state_description"  # the optional `info` key of an environment that describes its states


@runtime_checkable
class TextEnv(Protocol):
    """reset() -> (observation, info); step(action) -> (observation, reward, done, info).

    `info` carries at least: `admissible_commands` (list[str]), `won` (bool), `task_score` (float in [0, 1]),
    `task_type` (str), `goal` (str). Reward is 10.0 on success, else 0.0 (the papers' convention).

    An environment that can describe its state more fully than its observation says so by putting that text in every
    `info` under `STATE_DESCRIPTION` ("state_description", str): ALFWorld adds the agent's location, held item, item
    changes and moves and the sorted admissible commands; WebShop gives the page without its instruction header. The
    collector records it on each step (`Step.state_description` / `next_state_description`).
    """

    max_steps: int

    def reset(self) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: str) -> StepResult: ...


class EnvPackage(Protocol):
    """An environment package: a module with these functions and a `SPEC` (`scpo.envs.spec.EnvSpec`), which declares
    what the environment offers beyond them (tokenizer hints, a planner's oracle progress)."""

    def list_tasks(self, split: str, data_root: str | Path = "data", limit: int | None = None) -> list[str]:
        """Task ids of `split`, sorted; the first `limit` when given."""

    def make_env(
        self, task_id: str, data_root: str | Path = "data", max_steps: int | None = None, **options: Any
    ) -> TextEnv:
        """The environment of one task id; `options` are the env's factory options (`EnvOptions.factory_options`)."""

    def task_type(self, task_id: str, data_root: str | Path = "data") -> str:
        """The task's type (results are reported per type)."""

    def expert_actions(self, task_id: str, data_root: str | Path = "data") -> list[str]:
        """Actions that win the task from reset (behaviour-cloning demonstrations)."""

    def build_prompt(
        self,
        goal: str,
        observation: str,
        admissible: list[str],
        history: list[tuple[str, str]],
        step: int,
        history_length: int = 2,
    ) -> str:
        """The policy's prompt at `step` (0-based), showing the last `history_length` (observation, action) pairs."""

    def project_action(self, text: object, admissible: list[str]) -> tuple[str, bool]:
        """Model text -> (action, valid). Pure; never raises: malformed output is an invalid step."""


CONTRACT = tuple(name for name, member in vars(EnvPackage).items() if callable(member) and not name.startswith("_"))
