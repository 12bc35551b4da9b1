"""`env.alfworld.reveal_goal_objects`: the task line names where every goal-relevant object starts, checked by walking
to each receptacle of the game; the game itself is unchanged; SFT's demonstrations see the same task line."""

from __future__ import annotations

import re

import pytest

from scpo.envs import alfworld
from scpo.envs.alfworld.reveal import REVEAL_PREFIX
from scpo.envs.demos import expert_demonstrations


@pytest.fixture(scope="module")
def data_root(alfworld_games_root):
    return alfworld_games_root


def _named_places(goal: str) -> dict[str, str]:
    """{"apple 1": "microwave 1", ...} from the revealed sentence."""
    sentence = goal.split(REVEAL_PREFIX, 1)[1].strip().rstrip(".")
    return dict(part.split(" in ", 1) for part in sentence.split(", "))


def _goal_types(task_id: str) -> set[str]:
    """The object types the task folder names: `pick_...-Apple-None-CounterTop-14` -> {apple};
    `look_at_obj_in_light-Bowl-None-DeskLamp-301` -> {bowl, desklamp}."""
    parts = task_id.split("/")[1].split("-")
    return {parts[1].lower(), parts[3].lower()} if parts[0] == "look_at_obj_in_light" else {parts[1].lower()}


def _where_everything_is(env, types: set[str]) -> dict[str, str]:
    """Walk to every receptacle (opening the closed ones) and record where each object of `types` was seen."""
    _, info = env.reset()
    receptacles = [c.removeprefix("go to ") for c in info["admissible_commands"] if c.startswith("go to ")]
    seen: dict[str, str] = {}
    pattern = re.compile(rf"\b({'|'.join(sorted(types))}) (\d+)\b")
    for r in receptacles:
        obs, _, _, info = env.step(f"go to {r}")
        if f"open {r}" in info["admissible_commands"]:
            obs, _, _, info = env.step(f"open {r}")
        for name, number in pattern.findall(obs):
            seen.setdefault(f"{name} {number}", r)
    return seen


def test_reveal_names_every_goal_object_where_it_is(data_root):
    tasks = alfworld.list_tasks("valid_seen", data_root)
    assert {alfworld.task_type(t) for t in tasks} == set(alfworld.TASK_TYPES)  # every goal shape
    for task in tasks:
        env = alfworld.make_env(task, data_root, max_steps=500, reveal_goal_objects=True)
        _, info = env.reset()
        plain_goal = alfworld.make_env(task, data_root).reset()[1]["goal"]
        assert info["goal"].startswith(plain_goal + " " + REVEAL_PREFIX + " ")
        assert _named_places(info["goal"]) == _where_everything_is(env, _goal_types(task)), task


def test_reveal_hand_checked_cases(data_root):
    tasks = {alfworld.task_type(t): t for t in alfworld.list_tasks("valid_seen", data_root)}
    cool = alfworld.make_env(tasks["pick_cool_then_place_in_recep"], data_root, reveal_goal_objects=True)
    assert (
        cool.reset()[1]["goal"] == "cool some apple and put it in countertop. Where they start: apple 1 in microwave 1."
    )
    look = next(t for t in alfworld.list_tasks("valid_seen", data_root) if "-Bowl-" in t)
    assert alfworld.make_env(look, data_root, reveal_goal_objects=True).reset()[1]["goal"] == (
        "examine the bowl with the desklamp. Where they start: bowl 1 in desk 1, desklamp 1 in dresser 1."
    )


def test_reveal_leaves_the_game_unchanged(data_root):
    task = alfworld.list_tasks("valid_seen", data_root)[2]

    def play(**options):
        env = alfworld.make_env(task, data_root, **options)
        obs, info = env.reset()
        trace = [(obs, info["admissible_commands"])]
        for action in alfworld.expert_actions(task, data_root):
            obs, reward, done, info = env.step(action)
            trace.append((obs, info["admissible_commands"], reward, done, info["won"]))
        return trace

    plain, revealed = play(), play(reveal_goal_objects=True)
    assert plain == revealed and revealed[-1][-1] is True


def test_expert_demonstrations_build_the_env_with_its_options(data_root):
    tasks = alfworld.list_tasks("valid_seen", data_root)[:2]
    plain, _ = expert_demonstrations(alfworld, tasks, data_root=str(data_root), progress=False)
    revealed, stats = expert_demonstrations(
        alfworld, tasks, data_root=str(data_root), env_options={"reveal_goal_objects": True}, progress=False
    )
    assert stats["n_won"] == 2 and len(plain) == len(revealed) > 2
    assert all(REVEAL_PREFIX not in d.prompt for d in plain) and all(REVEAL_PREFIX in d.prompt for d in revealed)
    assert [d.response for d in plain] == [d.response for d in revealed]


def test_unknown_option_names_the_known_ones(data_root):
    task = alfworld.list_tasks("valid_seen", data_root)[0]
    with pytest.raises(TypeError, match="reveal_goal_objects"):
        alfworld.make_env(task, data_root, reveal_goal_object=True)
