"""`sokoban`: verl-agent's third environment, data-free: its text grid, moves, prompts and reward, on the rooms its
reset(seed) generates (gym-sokoban's reverse play), with an exact solver (V*, deadlocks, expert plans, the planner's
oracle progress). docs/environments.md, "Sokoban", lists every deliberate difference from verl-agent.

Task `sokoban-<rows>x<cols>-<n>box-<seed>` (`tasks.py`: the splits, 6x6 with 1 box by default, 2 boxes in
`train_hard` / `valid_hard`). The package follows the `EnvPackage` contract (`scpo.envs.base`) and declares its `SPEC`.

The state space, for exact dynamic programming (pure functions; nothing here depends on an episode):

    s = initial_state(task_id)            # State(room, player, boxes): hashable; the room is fixed per task
    admissible_actions(s)                 # ["up", "down", "left", "right"], the env's listing order, in every state
    step(s, a, reward="success")          # -> (next_state, reward, done, won), what SokobanEnv.step returns for a
                                          #    move; done = won (the step limit is the episode's, not the state's)
    observation(s)                        # the grid the env shows in s (render)
    state_space(s)                        # every state reachable from s: successor[i, a], won[i], V*[i] as arrays
    optimal_cost(s), is_deadlock(s), expert_plan(s), optimal_action(s)
    tabular_model(task_id)                # the same functions as a `scpo.envs.tabular.TabularModel` (SPEC.tabular)

With `env.history_length: 0` the prompt is `build_prompt` of the grid alone, so a policy's action probabilities are a
function of the state. An answer that names no move plays NO_OP ("still"): nothing moves, reward 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from scpo.envs.sokoban.env import DEFAULT_MAX_STEPS, GOAL, SokobanEnv
from scpo.envs.sokoban.model import SokobanModel, tabular_model
from scpo.envs.sokoban.prompts import PROMPT_PHRASES, build_prompt, project_action
from scpo.envs.sokoban.room import ACTIONS, NO_OP, REWARDS, State, render, room_from_text, step
from scpo.envs.sokoban.solver import (
    StateSpace,
    expert_plan,
    is_deadlock,
    label_progress,
    optimal_action,
    optimal_cost,
    oracle_progress,
    state_space,
)
from scpo.envs.sokoban.tasks import SPLIT_NAMES, SPLITS, initial_state, list_tasks, parse_task_id, task_type
from scpo.envs.spec import EnvOptions, EnvSpec

__all__ = [
    "list_tasks",
    "make_env",
    "task_type",
    "expert_actions",
    "build_prompt",
    "project_action",
    "SokobanEnv",
    "SokobanOptions",
    "SPEC",
    "SPLITS",
    "ACTIONS",
    "NO_OP",
    "GOAL",
    "State",
    "StateSpace",
    "initial_state",
    "admissible_actions",
    "step",
    "observation",
    "room_from_text",
    "state_space",
    "optimal_cost",
    "is_deadlock",
    "expert_plan",
    "optimal_action",
    "oracle_progress",
    "label_progress",
    "parse_task_id",
    "DEFAULT_MAX_STEPS",
    "SokobanModel",
    "tabular_model",
]


def make_env(
    task_id: str,
    data_root: str | Path = "data",
    max_steps: int | None = None,
    reward: Literal["success", "verl_agent"] = "success",
    **options,
) -> SokobanEnv:
    """The environment of one task id (any `sokoban-<rows>x<cols>-<n>box-<seed>`, not only the splits')."""
    if options:
        raise TypeError(f"unknown Sokoban env options {sorted(options)}; known: max_steps, data_root, reward")
    return SokobanEnv(task_id, max_steps=max_steps, reward=reward)


def expert_actions(task_id: str, data_root: str | Path = "data") -> list[str]:
    """An optimal plan from the task's room (`expert_plan`): V* moves."""
    return expert_plan(initial_state(task_id))


def admissible_actions(state: State) -> list[str]:
    """The moves of `state` in the env's listing order: all four in every state (a blocked move is a step that
    changes nothing, as in verl-agent)."""
    return list(ACTIONS)


def observation(state: State) -> str:
    """The grid the env shows in `state`."""
    return render(state)


class SokobanOptions(EnvOptions):
    """`env.sokoban` in params.yaml."""

    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1)
    train_split: Literal[SPLIT_NAMES] = "train"
    eval_splits: tuple[Literal[SPLIT_NAMES], ...] = Field(("valid_seen", "valid_unseen"), min_length=1)
    reward: Literal[REWARDS] = Field(
        "success",
        description="success: 10 on the winning step, else 0 (the suite's convention) | verl_agent: gym-sokoban's "
        "-0.1 per step, +1 / -1 per box onto / off a target, +10 when all are on",
    )


SPEC = EnvSpec(
    name="sokoban",
    factory=make_env,
    package=__name__,
    options=SokobanOptions,
    tokenizer_phrases=PROMPT_PHRASES,
    oracle_progress="scpo.envs.sokoban.solver:label_progress",
    tabular="scpo.envs.sokoban.model:tabular_model",
)
