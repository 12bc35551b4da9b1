"""ALFWorld env contract: task ids, splits, task types, expert demos, episode rules, registry, bad game files."""

from __future__ import annotations

import json

import pytest

import scpo.envs
from scpo.envs import alfworld
from scpo.envs.alfworld import DataError


@pytest.fixture(scope="module")
def data_root(alfworld_games_root):
    return alfworld_games_root  # the committed games; the same first games per split and task type as the full data


def test_list_tasks_counts_on_the_full_data(alfworld_data_root):
    seen = alfworld.list_tasks("valid_seen", alfworld_data_root.parent)  # the project's data/ folder
    assert (
        len(seen) == 140
        and seen == sorted(seen)
        and len(alfworld.list_tasks("valid_unseen", alfworld_data_root)) == 134
    )
    assert seen[0].startswith("valid_seen/look_at_obj_in_light-AlarmClock-None-DeskLamp-323/trial_")


def test_list_tasks_sorted_and_errors(data_root):
    seen = alfworld.list_tasks("valid_seen", data_root)
    assert len(seen) == 7 and seen == sorted(seen) and len(alfworld.list_tasks("valid_unseen", data_root)) == 1
    assert alfworld.list_tasks("valid_seen", data_root, limit=3) == seen[:3]
    assert seen[0].startswith("valid_seen/look_at_obj_in_light-AlarmClock-None-DeskLamp-323/trial_")
    with pytest.raises(ValueError, match="'test'.*valid_seen"):
        alfworld.list_tasks("test", data_root)


def test_task_types_from_folder_names(data_root):
    seen = alfworld.list_tasks("valid_seen", data_root)
    assert {alfworld.task_type(t) for t in seen} == set(alfworld.TASK_TYPES)
    assert alfworld.task_type("train/pick_two_obj_and_place-Cup-None-Shelf-7/trial_1") == "pick_two_obj_and_place"
    with pytest.raises(ValueError, match="sweep_the_floor-Broom"):
        alfworld.task_type("train/sweep_the_floor-Broom/trial_1")


def test_walkthrough_wins_with_reward_ten(data_root):
    task = alfworld.list_tasks("valid_seen", data_root)[0]
    env = alfworld.make_env(task, data_root)
    obs, info = env.reset()
    assert info["goal"] == "look at alarmclock under the desklamp."
    assert info["task_type"] == "look_at_obj_in_light" and info["won"] is False and info["task_score"] == 0.0
    assert "go to desk 1" in info["admissible_commands"] and obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
    actions = alfworld.expert_actions(task, data_root)
    assert actions == ["go to desk 1", "use desklamp 1", "take alarmclock 2 from desk 1"]
    rewards = [env.step(a)[1:3] for a in actions]
    assert rewards == [(0.0, False), (0.0, False), (10.0, True)]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")


def test_max_steps_ends_the_episode(data_root):
    env = scpo.envs.make(
        "alfworld", task_id=alfworld.list_tasks("valid_unseen", data_root)[0], data_root=data_root, max_steps=3
    )
    env.reset()
    out = [env.step("look") for _ in range(3)]
    assert [o[2] for o in out] == [False, False, True] and all(o[1] == 0.0 for o in out)
    assert out[-1][3]["step"] == 3 and env.max_steps == 3


def test_unknown_command_is_a_no_op(data_root):
    env = alfworld.make_env(alfworld.list_tasks("valid_seen", data_root)[0], data_root)
    _, info = env.reset()
    obs, reward, done, info2 = env.step("fly to the moon")
    assert obs == "Nothing happens." and reward == 0.0 and not done
    assert info2["admissible_commands"] == info["admissible_commands"]


def test_missing_and_corrupt_game_files_raise_clear_errors(tmp_path):
    with pytest.raises(DataError, match="not found.*nowhere"):
        scpo.envs.make("alfworld", task_id=tmp_path / "nowhere" / "game.tw-pddl")
    bad = tmp_path / "pick_and_place_simple-X-None-Y-1" / "trial_1" / "game.tw-pddl"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    for engine in alfworld.ENGINES:
        with pytest.raises(DataError, match="corrupt"):
            scpo.envs.make("alfworld", task_id=bad, engine=engine)
    bad.write_text(json.dumps({"pddl_domain": "", "grammar": ""}))
    with pytest.raises(DataError, match="lacks keys"):
        scpo.envs.make("alfworld", task_id=bad)


def test_bad_options_are_rejected(data_root):
    task = alfworld.list_tasks("valid_seen", data_root)[0]
    with pytest.raises(ValueError, match="'warp'"):
        alfworld.make_env(task, data_root, engine="warp")
    with pytest.raises(TypeError, match="task_id"):
        scpo.envs.make("alfworld")
    with pytest.raises(ValueError, match="max_steps"):
        alfworld.make_env(task, data_root, max_steps=0)


def test_expert_demo_records_what_the_expert_saw(data_root):
    task = alfworld.list_tasks("valid_seen", data_root)[0]
    demo = alfworld.expert_demo(task, data_root)
    assert [s["action"] for s in demo] == ["go to desk 1", "use desklamp 1", "take alarmclock 2 from desk 1"]
    assert demo[0]["observation"].startswith("-= Welcome") and "go to desk 1" in demo[0]["admissible"]
    assert demo[1]["observation"].startswith("You arrive at desk 1.") and "use desklamp 1" in demo[1]["admissible"]
    assert [s["reward"] for s in demo] == [0.0, 0.0, 10.0] and demo[-1]["done"]
