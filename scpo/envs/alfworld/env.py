"""The ALFWorld text environment (the `scpo.envs.TextEnv` protocol) over either engine.

    env = scpo.envs.make("alfworld", task_id="valid_seen/<task-folder>/<trial>", data_root="data", engine="fast")
    obs, info = env.reset()
    obs, reward, done, info = env.step("go to desk 1")

Reward is 10.0 on the step that wins, else 0.0; the episode ends on a win or after `max_steps` steps. `info` carries
`admissible_commands`, `won`, `task_score` (1.0 if won), `task_type`, `goal`, `task_id`, `step` and `state_description`
(the observation with the agent's location, held item, item changes and moves, and the sorted admissible commands:
`scpo.envs.alfworld.state_description`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scpo.envs.alfworld.games import goal_of, load_game, task_type
from scpo.envs.alfworld.reveal import starting_places
from scpo.envs.alfworld.state_description import AlfworldStateTracker
from scpo.envs.base import STATE_DESCRIPTION

__all__ = ["AlfworldEnv", "ENGINES", "SUCCESS_REWARD", "DEFAULT_MAX_STEPS", "make_engine"]

ENGINES = ("fast", "textworld")
SUCCESS_REWARD = 10.0
DEFAULT_MAX_STEPS = 50


def make_engine(game_path: str | Path, engine: str = "fast"):
    """An engine object with reset() / step(command) -> (observation, admissible_commands, won)."""
    if engine == "fast":
        from scpo.envs.alfworld.fast_engine import FastEngine

        return FastEngine(game_path)
    if engine == "textworld":
        from scpo.envs.alfworld.textworld_engine import TextworldEngine

        return TextworldEngine(game_path)
    raise ValueError(f"unknown ALFWorld engine {engine!r}; allowed: {', '.join(ENGINES)}")


class AlfworldEnv:
    """One ALFWorld game with the episode rules (reward, max_steps) on top of an engine."""

    def __init__(
        self,
        game_path: str | Path,
        engine: str = "fast",
        max_steps: int | None = None,
        task_id: str | None = None,
        reveal_goal_objects: bool = False,
    ):
        max_steps = DEFAULT_MAX_STEPS if max_steps is None else max_steps
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.game_path = Path(game_path)
        self.engine_name = engine
        self.max_steps = int(max_steps)
        game = load_game(self.game_path)
        self.goal = goal_of(game)
        if reveal_goal_objects:
            self.goal = f"{self.goal} {starting_places(self.game_path)}"
        self.task_id = task_id or self.game_path.parent.as_posix()
        self.task_type = task_type(self.game_path)
        self.engine = make_engine(self.game_path, engine)  # FastEngine | TextworldEngine (the planner reads FastEngine)
        self._tracker = AlfworldStateTracker()
        self._steps = 0
        self._done = True

    def _info(self, obs: str, admissible: list[str], won: bool) -> dict[str, Any]:
        return {
            STATE_DESCRIPTION: self._tracker.describe(obs, admissible),
            "admissible_commands": admissible,
            "won": won,
            "task_score": 1.0 if won else 0.0,
            "task_type": self.task_type,
            "goal": self.goal,
            "task_id": self.task_id,
            "step": self._steps,
        }

    def reset(self) -> tuple[str, dict[str, Any]]:
        obs, admissible, won = self.engine.reset()
        self._steps, self._done = 0, False
        self._tracker.reset()
        return obs, self._info(obs, admissible, won)

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError(f"step() on a finished ALFWorld episode ({self.task_id}); call reset() first")
        obs, admissible, won = self.engine.step(str(action))
        self._tracker.update(str(action), obs)
        self._steps += 1
        self._done = won or self._steps >= self.max_steps
        return obs, SUCCESS_REWARD if won else 0.0, self._done, self._info(obs, admissible, won)
