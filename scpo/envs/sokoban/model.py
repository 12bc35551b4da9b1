"""Sokoban's tabular model (`scpo.envs.tabular.TabularModel`, declared as `SPEC.tabular`): one task's room as a
deterministic finite model over the package's pure state functions, so that the exact on-policy values
(`scpo.rollout.exact_values`) and gradient fidelity can enumerate every state a policy reaches.

    model = tabular_model("sokoban-6x6-1box-00042")
    s = model.initial()                    # State(room, player, boxes) after reset
    model.admissible(s)                    # ["up", "down", "left", "right"] in every state (the env's listing)
    model.step(s, "left")                  # (s', reward, done, won) = room.step: done on the win only
    model.observation(s)                   # the grid (render), the raw text of the prompt

The state is the whole of what the next observation depends on (walls and targets are the room's, the player and the
boxes the state's): there is no message or counter. A move that names none of the four moves (NO_OP, an invalid
answer) changes nothing and is rewarded 0, as in the environment. The step limit (`max_steps`) is the episode's: the
dynamic programme counts the steps itself. `check_replay` tests the model against `SokobanEnv` on random episodes of
every split (tests/envs/test_sokoban_tabular.py).

**The prompt and the nodes of the programme** (`scpo.rollout.exact_dp`): with `env.history_length: 0` the prompt is
`SOKOBAN_TEMPLATE_NO_HIS` of the grid alone (it shows no step number), so the policy is a function of the state and
the programme's nodes are (t, state), at most `max_steps` x the reachable states, and its distinct prompts are the
states. With history H > 0 the prompt from the second step on (`SOKOBAN_TEMPLATE`) shows the step number and the
last H (grid, move) pairs, so a node is (t, state, window) and nearly every node is a prompt of its own. Measured on
the gradient-fidelity panel (16 `train` rooms with V* >= 4, 15 steps; experiments/gradient_fidelity): 12,105 nodes
and 1,498 distinct prompts at H = 0; 42,278 nodes (as many prompts) at H = 1; 145,578 at H = 2 (verl-agent's
default), 97 times the prompts the policy is scored on at H = 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scpo.envs.sokoban.env import GOAL
from scpo.envs.sokoban.room import ACTIONS, REWARDS, State, render, step
from scpo.envs.sokoban.tasks import initial_state

__all__ = ["SokobanModel", "tabular_model"]


@dataclass(frozen=True)
class SokobanModel:
    """The room of one task as a `TabularModel` (module docstring); `reward` as the environment's option."""

    task_id: str
    reward: Literal["success", "verl_agent"] = "success"
    goal: str = GOAL

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"unknown Sokoban reward {self.reward!r}; allowed: {', '.join(REWARDS)}")
        initial_state(self.task_id)  # a malformed task id is named here, not at the first use

    def initial(self) -> State:
        return initial_state(self.task_id)

    def admissible(self, state: State) -> list[str]:
        return list(ACTIONS)

    def step(self, state: State, action: str) -> tuple[State, float, bool, bool]:
        return step(state, action, self.reward)

    def observation(self, state: State) -> str:
        return render(state)


def tabular_model(
    task_id: str,
    data_root: str | Path = "data",
    max_steps: int | None = None,
    reward: Literal["success", "verl_agent"] = "success",
    **options,
) -> SokobanModel:
    """The tabular model of `task_id` (`EnvSpec.tabular`), with the options of `make_env` (`max_steps` is the
    episode's budget, which the dynamic programme counts itself)."""
    if options:
        raise TypeError(f"unknown Sokoban env options {sorted(options)}; known: max_steps, data_root, reward")
    return SokobanModel(task_id, reward)
