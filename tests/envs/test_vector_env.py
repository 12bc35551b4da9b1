"""VectorEnv: reset together, step with None for finished envs, clear errors on misuse."""

from __future__ import annotations

import pytest

from scpo.envs import alfworld
from scpo.envs.vector import VectorEnv


class CountdownEnv:
    """A toy env that ends after `n` steps; reward 1 per step."""

    def __init__(self, n: int):
        self.n, self.max_steps = n, n

    def reset(self):
        self.t = 0
        return "start", {"admissible_commands": ["tick"]}

    def step(self, action):
        self.t += 1
        return f"{action} {self.t}", 1.0, self.t >= self.n, {"admissible_commands": ["tick"]}


def test_finished_envs_take_none_and_return_none():
    vec = VectorEnv([CountdownEnv(1), CountdownEnv(2)])
    assert [o for o, _ in vec.reset_all()] == ["start", "start"]
    first = vec.step(["tick", "tick"])
    assert [r[:3] for r in first] == [("tick 1", 1.0, True), ("tick 1", 1.0, False)] and vec.dones == [True, False]
    second = vec.step([None, "tock"])
    assert second[0] is None and second[1][:3] == ("tock 2", 1.0, True) and vec.all_done


def test_misuse_is_rejected():
    vec = VectorEnv([CountdownEnv(1), CountdownEnv(3)])
    with pytest.raises(ValueError, match="not reset"):
        vec.step(["tick", "tick"])
    vec.reset_all()
    with pytest.raises(ValueError, match="2 envs"):
        vec.step(["tick"])
    with pytest.raises(ValueError, match="env 1 is still running"):
        vec.step(["tick", None])
    vec.step(["tick", "tick"])
    with pytest.raises(ValueError, match="env 0 is done"):
        vec.step(["tick", "tick"])
    with pytest.raises(ValueError, match="at least one"):
        VectorEnv([])


def test_alfworld_groups_are_task_major_and_identical(alfworld_games_root):
    tasks = alfworld.list_tasks("valid_seen", alfworld_games_root, limit=2)
    vec = VectorEnv.from_tasks(alfworld.make_env, tasks, repeats=3, data_root=alfworld_games_root, max_steps=5)
    assert len(vec) == 6 and [e.task_id for e in vec.envs] == [tasks[0]] * 3 + [tasks[1]] * 3
    starts = vec.reset_all()
    assert starts[0] == starts[1] == starts[2] and starts[0][0] != starts[3][0]
    out = vec.step(["go to desk 1", "look", "go to desk 1"] + ["look"] * 3)
    assert out[0] == out[2] and out[0][0] != out[1][0]
