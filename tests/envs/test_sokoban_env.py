"""Sokoban as an environment of the suite: its task ids and splits, rooms deterministic per task id, the env's steps
and step limit, its options through the config, prompts that are a function of the grid without history, and
malformed answers projected without raising."""

from __future__ import annotations

import pytest

import scpo.envs
from scpo.config import load_config
from scpo.envs import sokoban
from scpo.envs.registry import env_package, env_settings, env_spec
from scpo.envs.sokoban.generation import generate


def test_splits_are_fixed_seed_ranges_with_one_box_by_default_and_two_in_the_hard_ones():
    train = sokoban.list_tasks("train")
    assert len(train) == 300 and train[:2] == ["sokoban-6x6-1box-00000", "sokoban-6x6-1box-00001"]
    assert sokoban.list_tasks("valid_seen") == train[:50]
    unseen = sokoban.list_tasks("valid_unseen")
    assert len(unseen) == 50 and unseen[0] == "sokoban-6x6-1box-65536" and not set(unseen) & set(train)
    assert {sokoban.task_type(t) for t in sokoban.list_tasks("train_hard") + sokoban.list_tasks("valid_hard")} == {
        "2box"
    }
    assert sokoban.list_tasks("valid_hard", limit=3) == [f"sokoban-6x6-2box-{s}" for s in (65536, 65537, 65538)]
    with pytest.raises(ValueError, match="unknown Sokoban split 'test'; allowed: train, valid_seen"):
        sokoban.list_tasks("test")


@pytest.mark.parametrize(
    "bad",
    [
        "sokoban-6x6-1box",
        "sokoban-6x6-0box-3",
        "sokoban-2x6-1box-3",
        "corridor-walk-2-0-0",
        "sokoban-6x6-1box-4294967296",
    ],
)
def test_a_malformed_task_id_is_named(bad):
    with pytest.raises(ValueError, match=f"not a Sokoban task id: '{bad}'"):
        sokoban.make_env(bad)


def test_rooms_are_deterministic_per_task_id_and_differ_between_seeds():
    tasks = sokoban.list_tasks("train", limit=20)
    first = [sokoban.observation(generate(seed, 6, 6, 1)) for seed in range(20)]
    again = [sokoban.observation(generate(seed, 6, 6, 1)) for seed in range(20)]
    assert first == again == [sokoban.observation(sokoban.initial_state(t)) for t in tasks]
    assert len(set(first)) == 20
    # a room of another size and box count, also outside the splits, is made the same way
    state = sokoban.initial_state("sokoban-7x8-3box-123")
    assert (state.room.height, state.room.width, len(state.boxes), len(state.room.targets)) == (7, 8, 3, 3)
    assert sokoban.optimal_cost(state) < float("inf")


def test_the_env_counts_every_step_toward_its_limit_and_ends_on_a_win():
    task = "sokoban-6x6-1box-00000"
    env = sokoban.make_env(task, max_steps=3)
    obs, info = env.reset()
    assert info["admissible_commands"] == ["up", "down", "left", "right"] and info["task_type"] == "1box"
    assert (info["won"], info["task_score"], info["goal"]) == (False, 0.0, sokoban.GOAL)
    assert sokoban.room_from_text(obs) == sokoban.initial_state(task)
    assert env.step("right")[1:3] == (0.0, False)  # into the wall
    assert env.step("garbage")[0] == obs  # nothing moves
    assert env.step("up")[2] is True  # the third step: the limit
    env = sokoban.make_env(task)
    env.reset()
    assert env.max_steps == 15
    *_, (obs, reward, done, info) = [env.step(a) for a in sokoban.expert_actions(task)]
    assert (reward, done, info["won"], info["task_score"], info["boxes_on_target"]) == (10.0, True, True, 1.0, 1)
    assert env.reset()[0] != obs and not env.won  # reset starts the room over


def test_the_gym_sokoban_reward_adds_its_terms_in_order():
    """verl_agent reward: -0.1 a step, -1 for a box pushed off a target, +1 onto one, +10 for all on."""
    state = sokoban.room_from_text("######\n#_P√_#\n#_X_O#\n#____#\n######")
    off, r_off, _, _ = sokoban.step(state, "right", reward="verl_agent")
    assert r_off == pytest.approx(-1.1) and sokoban.step(state, "left", reward="verl_agent")[1] == pytest.approx(-0.1)
    one = sokoban.room_from_text("#####\n#PXO#\n#####")
    assert sokoban.step(one, "right", reward="verl_agent")[1:] == (-0.1 + 1.0 + 10.0, True, True)
    assert sokoban.step(one, sokoban.NO_OP, reward="verl_agent")[1] == 0.0  # verl-agent's action 0
    with pytest.raises(ValueError, match="unknown Sokoban reward 'shaped'"):
        sokoban.step(one, "right", reward="shaped")


def test_registered_and_configured_like_any_environment(repo_root):
    spec = env_spec("sokoban")
    assert spec.trainable and spec.oracle_progress == "scpo.envs.sokoban.solver:label_progress"
    assert env_package("sokoban") is sokoban and spec.tokenizer_phrases == sokoban.PROMPT_PHRASES
    cfg = load_config(repo_root / "params.yaml", overrides={"env.name": "sokoban", "env.sokoban.reward": "verl_agent"})
    env = env_settings(cfg)
    assert (env.max_steps, env.train_split, env.eval_splits, env.options) == (
        15,
        "train",
        ("valid_seen", "valid_unseen"),
        {"reward": "verl_agent"},
    )
    made = scpo.envs.make("sokoban", task_id="sokoban-6x6-1box-00002", **env.options)
    made.reset()
    assert made.reward == "verl_agent" and made.step("up")[1] in (-0.1, -0.1 + 1.0 + 10.0)
    with pytest.raises(TypeError, match="unknown Sokoban env options"):
        sokoban.make_env("sokoban-6x6-1box-00002", engine="fast")


def test_without_history_the_prompt_is_a_function_of_the_grid():
    """env.history_length 0: two visits of one state, reached by different paths at different steps, get one prompt;
    with history they differ."""
    task = "sokoban-6x6-1box-00000"
    env = sokoban.make_env(task, max_steps=100)
    obs0, info = env.reset()
    history = []
    prompts0, prompts2 = [], []
    for t, move in enumerate(["left", "right", "up", "down"]):  # back at the start after 2 and after 4 steps
        prompts0.append(sokoban.build_prompt(info["goal"], obs0, info["admissible_commands"], history, t, 0))
        prompts2.append(sokoban.build_prompt(info["goal"], obs0, info["admissible_commands"], history, t, 2))
        history.append((obs0, move))
        obs0, _, _, info = env.step(move)
    final0 = sokoban.build_prompt(info["goal"], obs0, info["admissible_commands"], history, 4, 0)
    assert prompts0[0] == prompts0[2] == final0 and prompts0[0] != prompts0[1]
    assert prompts2[0] != prompts2[2]
    assert "step(s)" not in final0 and obs0 in final0 and '["up", "down", "left", "right"]' in final0
    with pytest.raises(ValueError, match="history_length"):
        sokoban.build_prompt("", obs0, [], [], 0, -1)


@pytest.mark.parametrize(
    "text",
    [
        None,
        123,
        b"<action>up</action>",
        "",
        "<action>",
        "</action><action>",
        "<action></action>",
        "<action>jump</action>",
        "<action>" + "x" * 100_000 + "up</action>",
        "<think>" * 50,
        "<action>\x00up\x00</action>",
        ["<action>up</action>"],
        "<action>up</action>" * 3,
        "<action>Right!</action>",
    ],
)
def test_malformed_answers_project_to_a_move_or_the_no_op_without_raising(text):
    move, valid = sokoban.project_action(text, list(sokoban.ACTIONS))
    assert move in (*sokoban.ACTIONS, sokoban.NO_OP)
    assert valid == (move != sokoban.NO_OP)
    env = sokoban.make_env("sokoban-6x6-1box-00000")
    obs, _ = env.reset()
    after = env.step(move)[0]
    assert (after == obs) or valid


def test_a_move_not_admissible_is_invalid_and_plays_the_no_op():
    assert sokoban.project_action("<action>up</action>", ["down"]) == (sokoban.NO_OP, False)
    assert sokoban.project_action("<action>up</action>", []) == (sokoban.NO_OP, False)
    assert sokoban.project_action("<action>down</action>", ["down"]) == ("down", True)
