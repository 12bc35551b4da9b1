"""The corridor's exact planner (`optimal_cost`, `label_progress`): V* and q_t hand-counted on scripted episodes, and
the oracle estimator trained through the registry on it."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.envs import corridor
from scpo.envs.registry import env_spec
from scpo.rollout import collect_rollouts

from helpers.engines import ScriptedEngine


def _step(prompt: str) -> int:
    return int(prompt.split("Step ")[1].split(".")[0])


def _play(task: str, actions: list[str], max_steps: int = 10) -> RolloutBatch:
    trajs, _ = collect_rollouts(
        corridor,
        [task],
        1,
        ScriptedEngine(lambda p: f"<action>{actions[_step(p)]}</action>"),
        env_name="corridor",
        max_steps=max_steps,
        progress=False,
    )
    return RolloutBatch.from_trajectories(trajs)


@pytest.mark.parametrize(
    ("task", "moves", "costs"),
    [
        # walk, 3 rooms: 2 east + open
        ("corridor-walk-3-0-0", [], 3),
        ("corridor-walk-3-0-0", ["go east"], 2),
        ("corridor-walk-3-0-0", ["go east", "go east"], 1),
        ("corridor-walk-3-0-0", ["go east", "go east", "open door"], 0),
        # key in room 1 of 4: east, take, east, east, open = 5; once taken, 2 east + open = 3
        ("corridor-key-4-1-0", [], 5),
        ("corridor-key-4-1-0", ["go east", "go east"], 1 + 1 + 2 + 1),
        ("corridor-key-4-1-0", ["go east", "take key"], 3),
        ("corridor-key-4-1-0", ["go east", "take key", "go west"], 4),
    ],
)
def test_optimal_cost_counts_the_commands_left(task, moves, costs):
    env = corridor.make_env(task)
    env.reset()
    for a in moves:
        env.step(a)
    assert corridor.optimal_cost(env) == costs


def test_progress_is_plus_one_on_the_path_minus_one_away_and_zero_on_no_change():
    actions = ["look", "go east", "go east", "go west", "take key", "go east", "go east", "open door"]
    batch = _play("corridor-key-4-1-0", actions)
    assert batch.action.tolist() == actions and batch.won.all()
    labelled = env_spec("corridor").label_progress(batch, data_root="data")
    # V*: 5, 5 (look), 4 (room 1), 5 (room 2, key behind), 4 (back), 3 (taken), 2, 1, 0 (won)
    assert labelled.oracle_progress.tolist() == [0, 1, -1, 1, 1, 1, 1, 1]
    # the optimal path's q sums to V*(s_0) and every step of it is 1
    walk = _play("corridor-walk-2-0-0", ["go east", "open door"])
    assert corridor.label_progress(walk).oracle_progress.tolist() == [1, 1]


def test_a_locked_door_and_an_inadmissible_command_change_nothing():
    batch = _play("corridor-key-2-1-0", ["go east", "open door", "jump", "take key", "open door"])
    assert batch.won.all()
    assert corridor.label_progress(batch).oracle_progress.tolist() == [1, 0, 0, 1, 1]


def test_a_rollout_that_does_not_replay_is_refused():
    batch = _play("corridor-walk-3-0-0", ["go east", "go east", "open door"])
    cols = batch.columns()
    cols["next_observation"] = np.array(["You are in room 2 of 3."] * batch.n_rows, dtype=object)
    with pytest.raises(ValueError, match="replay of corridor-walk-3-0-0"):
        corridor.label_progress(RolloutBatch(**cols))


def test_the_oracle_estimator_reads_the_corridors_planner_through_the_registry():
    from scpo.credit import estimate
    from scpo.envs.registry import with_oracle_progress

    batch = _play("corridor-key-3-1-0", ["go east", "go west", "go east", "take key", "go east", "open door"])
    labelled = with_oracle_progress(batch, "data")
    assert labelled.oracle_progress.tolist() == [1, -1, 1, 1, 1, 1]
    # the oracle's default step credit is q itself (omega 1, no episode term, no penalty on valid steps)
    assert estimate(labelled, ["oracle"])["oracle"].advantages.tolist() == [1, -1, 1, 1, 1, 1]
