"""The corridor's tabular model (`scpo.envs.corridor.CorridorModel`, the `scpo.envs.tabular` protocol) against the
environment itself: random episodes, inadmissible commands among them, replayed in both side by side."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.envs import corridor
from scpo.envs.registry import env_spec
from scpo.envs.tabular import TabularModel, check_replay

TASKS = corridor.list_tasks("train") + corridor.list_tasks("train_long")


def _random_commands(model, rng, n: int) -> list[str]:
    state, out = model.initial(), []
    for _ in range(n):
        choices = [*model.admissible(state), "dance", "take key", "open door"]  # some inadmissible
        out.append(choices[rng.integers(len(choices))])
        state, _, done, _ = model.step(state, out[-1])
        if done:
            break
    return out


@pytest.mark.parametrize("max_steps", [3, 12])
def test_random_episodes_replay_identically_in_the_model_and_the_env(max_steps):
    rng = np.random.default_rng(max_steps)
    wins = 0
    for task in TASKS:
        model = env_spec("corridor").tabular_model(task, data_root="data")
        assert isinstance(model, TabularModel)
        for _ in range(20):
            commands = _random_commands(model, rng, 14)
            states = check_replay(model, corridor.make_env(task, max_steps=max_steps), commands)
            wins += states[-1].won
            assert len({hash(s) for s in states}) >= 1  # hashable
    assert wins > 0  # some random episodes reach a win, so the winning step is compared too


def test_the_expert_wins_with_the_key_and_a_locked_door_is_a_state_message():
    task = "corridor-key-3-1-1"
    model = corridor.tabular_model(task)
    states = check_replay(model, corridor.make_env(task), ["go east", "go east", "open door", "look"])
    assert states[3] == corridor.CorridorState(2, False, False, "The door is locked.")
    assert model.observation(states[4]) == "You are in room 2 of 3. A door is to the east."
    states = check_replay(model, corridor.make_env(task), corridor.expert_actions(task))
    assert states[2] == corridor.CorridorState(1, True, False, "You take the key.") and states[-1].won
    assert model.step(states[-2], "open door") == (states[-1], 10.0, True, True)


def test_a_model_that_differs_from_the_env_is_named_at_its_first_difference():
    class NoKeyMessage(corridor.CorridorModel):
        def observation(self, s):
            return (
                super().observation(s._replace(message=""))
                if s.message == "You take the key."
                else super().observation(s)
            )

    task = "corridor-key-3-1-1"
    with pytest.raises(ValueError, match=r"after 2 steps the tabular model's observation is 'You are in room 1"):
        check_replay(NoKeyMessage(task), corridor.make_env(task), corridor.expert_actions(task))
    with pytest.raises(ValueError, match="declares no tabular model"):
        env_spec("webshop").tabular_model("x", data_root="data")
