"""ALFWorld: the real games (`game.tw-pddl`) played by textworld (`engine="textworld"`, the reference) or by our own
interpreter of the same files (`engine="fast"`, the default; parity-tested against the reference by `parity`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from scpo.envs.alfworld.env import DEFAULT_MAX_STEPS, ENGINES, SUCCESS_REWARD, AlfworldEnv
from scpo.envs.alfworld.games import SPLITS, TASK_TYPES, DataError, expert_actions, game_file, list_tasks, task_type
from scpo.envs.alfworld.prompts import PROMPT_PHRASES, build_prompt, project_action
from scpo.envs.spec import EnvOptions, EnvSpec

__all__ = [
    "list_tasks",
    "make_env",
    "task_type",
    "expert_actions",
    "expert_demo",
    "build_prompt",
    "project_action",
    "PROMPT_PHRASES",
    "AlfworldEnv",
    "game_file",
    "TASK_TYPES",
    "SPLITS",
    "ENGINES",
    "SUCCESS_REWARD",
    "DEFAULT_MAX_STEPS",
    "DataError",
    "AlfworldOptions",
    "SPEC",
]


def make_env(
    task_id: str,
    data_root: str | Path = "data",
    max_steps: int | None = None,
    engine: str = "fast",
    reveal_goal_objects: bool = False,
    **options,
) -> AlfworldEnv:
    """The env of one task id (`<split>/<task-folder>/<trial>`, from `list_tasks`) or game-file path."""
    if options:
        raise TypeError(
            f"unknown ALFWorld env options {sorted(options)}; known: engine, max_steps, data_root, reveal_goal_objects"
        )
    return AlfworldEnv(
        game_file(task_id, data_root),
        engine=engine,
        max_steps=max_steps,
        task_id=str(task_id),
        reveal_goal_objects=reveal_goal_objects,
    )


def expert_demo(task_id: str, data_root: str | Path = "data", engine: str = "fast") -> list[dict]:
    """The walkthrough played from reset, for behaviour cloning: one dict per step with the `goal`, the `observation`
    and `admissible` commands the expert saw, its `action`, and the `reward` / `done` that followed."""
    env = make_env(task_id, data_root, engine=engine, max_steps=10_000)
    obs, info = env.reset()
    steps = []
    for action in expert_actions(task_id, data_root):
        next_obs, reward, done, next_info = env.step(action)
        steps.append(
            {
                "goal": info["goal"],
                "observation": obs,
                "admissible": info["admissible_commands"],
                "action": action,
                "reward": reward,
                "done": done,
            }
        )
        obs, info = next_obs, next_info
        if done:
            break
    return steps


class AlfworldOptions(EnvOptions):
    """`env.alfworld` in params.yaml."""

    engine: Literal[ENGINES] = Field(
        "fast", description="fast (our interpreter, parity-tested) | textworld (the reference)"
    )
    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1)
    reveal_goal_objects: bool = Field(
        False,
        description="true: the task line also names where each goal-relevant object starts (the planner's candidates "
        "and lamps), so the planner's V* is ground truth for the agent's problem (scpo.envs.alfworld.reveal)",
    )
    train_split: Literal[SPLITS] = "train"
    eval_splits: tuple[Literal[SPLITS], ...] = Field(("valid_seen", "valid_unseen"), min_length=1)


SPEC = EnvSpec(
    name="alfworld",
    factory=make_env,
    package=__name__,
    options=AlfworldOptions,
    tokenizer_phrases=PROMPT_PHRASES,
    oracle_progress="scpo.envs.alfworld.oracle_rollouts:label_progress",
)
