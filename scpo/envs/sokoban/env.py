"""`SokobanEnv`: one task's episode, a `TextEnv` over the pure rules of `room.py`.

reset() -> (grid, info); step(move) -> (grid, reward, done, info). Every step counts toward `max_steps` (verl-agent's
`env.max_steps`, 15), an invalid one included; `done` on a win or at the limit. A move not among `admissible_commands`
(NO_OP, an invalid answer's text) changes nothing and is rewarded 0.0, as verl-agent's action 0.
"""

from __future__ import annotations

from typing import Any, Literal

from scpo.envs.sokoban.room import ACTIONS, REWARDS, boxes_on_target, render, step
from scpo.envs.sokoban.tasks import initial_state, task_type

__all__ = ["SokobanEnv", "DEFAULT_MAX_STEPS", "GOAL"]

DEFAULT_MAX_STEPS = 15  # verl-agent's examples/*/run_sokoban.sh: env.max_steps=15
GOAL = "push all the boxes onto the target spots"


class SokobanEnv:
    def __init__(
        self, task_id: str, max_steps: int | None = None, reward: Literal["success", "verl_agent"] = "success"
    ):
        if reward not in REWARDS:
            raise ValueError(f"unknown Sokoban reward {reward!r}; allowed: {', '.join(REWARDS)}")
        self.task_id = task_id
        self.start = initial_state(task_id)
        self.task_type = task_type(task_id)
        self.max_steps = max_steps or DEFAULT_MAX_STEPS
        self.reward = reward

    def _info(self) -> dict[str, Any]:
        return {
            "admissible_commands": list(ACTIONS),
            "won": self.won,
            "task_score": float(self.won),
            "task_type": self.task_type,
            "goal": GOAL,
            "boxes_on_target": boxes_on_target(self.state),
        }

    def reset(self) -> tuple[str, dict[str, Any]]:
        self.state, self.won, self.t = self.start, False, 0
        return render(self.state), self._info()

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        self.t += 1
        self.state, reward, _, self.won = step(self.state, action, self.reward)
        return render(self.state), reward, self.won or self.t >= self.max_steps, self._info()
