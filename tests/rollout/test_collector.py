"""The multi-turn collector: groups, history prompts, projection, invalid flags, max steps; malformed model output."""

from __future__ import annotations

import pytest

from scpo.batch import RolloutBatch
from scpo.envs import corridor
from scpo.rollout import collect_rollouts
from scpo.rollout.generation import Generation

from helpers.engines import ScriptedEngine


def _expert_engine():
    """Plays the expert plan of the task implied by the current observation (room index, key visible or not)."""

    def answer(prompt: str) -> str:
        obs = prompt.split("Current observation: ")[1].split("\n")[0]
        if "You see a key here" in obs:
            return "<think>key</think><action>take key</action>"
        if "door is to the east" in obs:
            return "<action>open door</action>"
        return "<action>go east</action>"

    return ScriptedEngine(answer)


def test_expert_policy_wins_every_episode_with_hand_counted_steps():
    tasks = ["corridor-walk-3-0-4", "corridor-key-3-1-1"]
    trajs, timing = collect_rollouts(
        corridor, tasks, 2, _expert_engine(), env_name="corridor", seed=5, max_steps=10, progress=False
    )
    assert [(t.task_id, t.index) for t in trajs] == [(tasks[0], 0), (tasks[0], 1), (tasks[1], 0), (tasks[1], 1)]
    # walk-3: east, east, open door = 3 steps; key-3 with key in room 1: east, take key, east, open door = 4 steps
    assert [len(t) for t in trajs] == [3, 3, 4, 4]
    assert all(t.won and t.episode_return == 10.0 for t in trajs)
    assert [s.action for s in trajs[2].steps] == ["go east", "take key", "go east", "open door"]
    assert all(s.valid for t in trajs for s in t.steps)
    assert trajs[0].group_uid == trajs[1].group_uid != trajs[2].group_uid
    assert trajs[0].steps[-1].done and not trajs[0].steps[0].done
    # history: at step 2 the prompt shows the previous two (observation, action) pairs
    assert "Action: go east] [Observation: You are in room 1 of 3. Action: go east]" in trajs[0].steps[2].prompt
    batch = RolloutBatch.from_trajectories(trajs)
    assert batch.n_groups == 2 and batch.n_rows == 14 and timing.n_generations == 14


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "go east",
        "<action>go east",
        "<action></action>",
        "<action>fly to the moon</action>",
        "\x00\ufffd" * 50,
        "<think>" + "blah " * 20000 + "</think>",
        "<action>" * 1000,
        "<action>go east</action>" * 0 + "<ACTION >x</ACTION>",
    ],
)
def test_malformed_output_is_an_invalid_noop_step_never_a_crash(garbage):
    trajs, _ = collect_rollouts(
        corridor,
        ["corridor-walk-2-0-0"],
        2,
        ScriptedEngine(lambda p: garbage),
        env_name="corridor",
        max_steps=4,
        progress=False,
    )
    for traj in trajs:
        assert len(traj) == 4 and not traj.won
        assert all(not s.valid for s in traj.steps)
        assert all(s.next_observation == "Nothing happens." for s in traj.steps)
        assert traj.steps[-1].done


def test_malformed_output_on_real_alfworld_game(alfworld_games_root):
    import scpo.envs.alfworld as alfworld

    task = alfworld.list_tasks("valid_seen", data_root=alfworld_games_root.parent)[0]
    texts = iter(["no tags at all", "<action>teleport home</action>", "\ufffd" * 5000, "<action>look</action>"])
    trajs, _ = collect_rollouts(
        alfworld,
        [task],
        1,
        ScriptedEngine(lambda p: next(texts)),
        env_name="alfworld",
        data_root=str(alfworld_games_root.parent),
        max_steps=4,
        progress=False,
    )
    assert [s.valid for s in trajs[0].steps] == [False, False, False, True]
    assert not trajs[0].won and len(trajs[0]) == 4


def test_finished_episodes_leave_the_batch():
    engine = _expert_engine()
    collect_rollouts(
        corridor,
        ["corridor-walk-2-0-0", "corridor-walk-4-0-2"],
        1,
        engine,
        env_name="corridor",
        max_steps=10,
        progress=False,
    )
    # walk-2 needs 2 steps, walk-4 needs 4: two turns with both envs, then two with one
    assert engine.calls == [2, 2, 1, 1]


def test_steps_keep_the_token_ids_the_trainer_needs():
    class ChoosingEngine(ScriptedEngine):
        def generate(self, prompts, temperature, top_p=1.0, admissible=None):
            return [
                Generation(
                    text="<action>go east</action>", prompt_ids=[1, 2], response_ids=[4], candidate_ids=[[3], [4]]
                )
                for _ in prompts
            ]

    choice, _ = collect_rollouts(
        corridor, ["corridor-walk-3-0-4"], 1, ChoosingEngine(None), env_name="corridor", max_steps=2, progress=False
    )
    free, _ = collect_rollouts(
        corridor, ["corridor-walk-3-0-4"], 1, _expert_engine(), env_name="corridor", max_steps=2, progress=False
    )
    step = choice[0].steps[0]
    assert (step.prompt_ids, step.response_ids, step.candidate_ids) == ([1, 2], [4], [[3], [4]])
    step = free[0].steps[0]
    assert (step.prompt_ids, step.response_ids, step.candidate_ids) == ([1, 2], [3], None)
    batch = RolloutBatch.from_trajectories(choice)  # the batch carries them, and so do its saved rollouts
    assert batch.prompt_ids[0] == [1, 2] and batch.response_ids[0] == [4] and batch.candidate_ids[0] == [[3], [4]]
    assert batch.prompt[0].startswith("You are an agent in a corridor")
