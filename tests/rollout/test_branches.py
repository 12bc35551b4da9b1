"""Monte-Carlo branches (`scpo.rollout.branches`): states named by their commands, replayed from reset, continued by the
policy with the budget left and at their own turn; values hand-counted on the corridor env with scripted policies."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.envs import corridor
from scpo.rollout import collect_rollouts
from scpo.rollout.branches import policy_values, state_keys
from scpo.rollout.generation import Generation


class StepScriptedEngine:
    """A stand-in policy that answers by the prompt's step number and observation: an invalid answer before step
    `idle_until`, the corridor's expert action from then on."""

    def __init__(self, idle_until: int):
        self.idle_until = idle_until
        self.prompts = 0

    def generate(self, prompts, temperature, top_p=1.0, admissible=None):
        self.prompts += len(prompts)
        return [Generation(text=self._answer(p), prompt_ids=[1], response_ids=[2]) for p in prompts]

    def _answer(self, prompt: str) -> str:
        step = int(prompt.split("Step ")[1].split(".")[0])
        obs = prompt.split("Current observation: ")[1].split("\n")[0]
        if step < self.idle_until:
            return "<action>wait</action>"
        if "You see a key here" in obs:
            return "<action>take key</action>"
        return "<action>open door</action>" if "door is to the east" in obs else "<action>go east</action>"


def _batch(engine, tasks=("corridor-walk-3-0-0",), group_size=1, max_steps=5) -> RolloutBatch:
    trajs, _ = collect_rollouts(
        corridor, list(tasks), group_size, engine, env_name="corridor", max_steps=max_steps, progress=False
    )
    return RolloutBatch.from_trajectories(trajs)


def test_values_count_the_budget_left_and_the_turn_of_each_state():
    # played: wait, wait, east, east, open (won at the 5-step limit); the branches idle until step 3, so from the
    # states at steps 0-2 they run out of steps (V = 0) and from steps 3-4 (room 1, room 2) they win (V = 10)
    batch = _batch(StepScriptedEngine(idle_until=2))
    assert batch.action.tolist() == ["wait", "wait", "go east", "go east", "open door"] and batch.won.all()
    values, timing = policy_values(
        batch, corridor, StepScriptedEngine(idle_until=3), rollouts=2, max_steps=5, progress=False
    )
    assert values.tolist() == [0.0, 0.0, 0.0, 10.0, 10.0]
    assert timing.extra["branches"] == 10
    # branch steps: from t=0..2 to the limit (5, 4, 3), from t=3 two steps, from t=4 one; twice each
    assert timing.n_generations == 2 * (5 + 4 + 3 + 2 + 1)


def test_the_same_policy_values_its_own_winning_path_at_the_reward():
    batch = _batch(StepScriptedEngine(idle_until=1), tasks=("corridor-key-3-1-0",), max_steps=8)
    values, _ = policy_values(
        batch, corridor, StepScriptedEngine(idle_until=1), rollouts=1, max_steps=8, progress=False
    )
    assert batch.won.all() and np.all(values == 10.0)


def test_siblings_share_the_states_they_reached_by_the_same_commands():
    batch = _batch(StepScriptedEngine(idle_until=0), tasks=("corridor-walk-3-0-0", "corridor-walk-2-0-0"), group_size=3)
    code, states = state_keys(batch)
    # 3 identical siblings of walk-3 (3 steps) share 3 states; walk-2's share 2
    assert len(states) == 5 and len(np.unique(code)) == 5
    assert states[0] == ("corridor-walk-3-0-0", 0, ()) and states[1] == ("corridor-walk-3-0-0", 0, ("go east",))
    engine = StepScriptedEngine(idle_until=0)
    _, timing = policy_values(batch, corridor, engine, rollouts=4, max_steps=5, progress=False)
    assert timing.extra["branches"] == 4 * 5


def test_a_replay_that_does_not_reach_the_saved_state_is_refused():
    batch = _batch(StepScriptedEngine(idle_until=0))
    cols = batch.columns()
    cols["observation"] = cols["observation"].copy()
    cols["observation"][2] = "You are in room 7 of 3."
    with pytest.raises(ValueError, match="after 2 commands gave .* the environment is not deterministic"):
        policy_values(RolloutBatch(**cols), corridor, StepScriptedEngine(0), rollouts=1, max_steps=5, progress=False)


def test_zero_rollouts_is_refused():
    with pytest.raises(ValueError, match="rollouts must be >= 1, got 0"):
        policy_values(_batch(StepScriptedEngine(0)), corridor, StepScriptedEngine(0), rollouts=0, progress=False)
