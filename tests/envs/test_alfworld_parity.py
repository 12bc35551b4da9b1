"""CI parity: the fast engine against the textworld reference on one game per task type (walkthrough + a random
walk)."""

from __future__ import annotations

import json

import pytest
import textworld.envs.pddl.textgen as textgen

from scpo.envs.alfworld import TASK_TYPES, expert_actions, game_file, list_tasks, render
from scpo.envs.alfworld.parity import compare_game, format_report, main, run_parity, walk_seed
from scpo.envs.alfworld.textworld_engine import TextworldEngine, memoized_parsers


@pytest.fixture(scope="module")
def one_per_type(alfworld_games_root):
    tasks = list_tasks("valid_seen", alfworld_games_root)
    return [next(t for t in tasks if t.split("/")[1].startswith(tt + "-")) for tt in TASK_TYPES]


def test_parity_one_game_per_task_type(one_per_type, alfworld_games_root):
    summary, results = run_parity(
        one_per_type, alfworld_games_root, random_walks=1, walk_steps=8, progress=False, memoize_reference=False
    )  # the plain reference
    assert summary["games"] == 6 and summary["games_with_errors"] == 0, format_report(summary, results)
    assert summary["walkthrough_won_both"] == 6
    assert summary["games_identical"] == 6, format_report(summary, results)
    assert summary["random_walk_steps"] >= 6 * 4
    assert summary["all_obs_identical"] == summary["all_admissible_identical"] == summary["all_won_agree"] == 1.0


def test_harness_reports_the_first_divergence(one_per_type, alfworld_games_root, monkeypatch):
    monkeypatch.setattr(render, "arrive", lambda engine, r: "You teleport.")
    task = one_per_type[1]  # look_at_obj_in_light-AlarmClock-None-DeskLamp-323: go to desk 1, use desklamp 1, take ...
    result = compare_game(task, alfworld_games_root, random_walks=0)
    d = result.first_divergence
    assert d["sequence"] == "walkthrough" and d["step"] == 1 and d["command"] == "go to desk 1"
    assert d["fast_observation"] == "You teleport." and d["textworld_observation"].startswith("You arrive at desk 1.")
    assert result.all_obs_identical == result.all_steps - 1  # later steps do not arrive anywhere
    assert "DIVERGES" in format_report(
        {
            "games": 1,
            "games_identical": 0,
            "games_with_errors": 0,
            "walkthrough_won_both": 1,
            "walkthrough_won_fast": 1,
            "walkthrough_won_textworld": 1,
            "reset_obs_identical": 1.0,
            "random_walk_steps": 0,
            "random_walk_obs_identical": 1.0,
            "random_walk_admissible_identical": 1.0,
            "random_walk_won_agree": 1.0,
            "all_steps": 3,
            "all_obs_identical": 2 / 3,
            "all_admissible_identical": 1.0,
            "all_won_agree": 1.0,
        },
        [result],
    )


def test_cli_entry_prints_and_writes_json(alfworld_games_root, tmp_path, capsys):
    out = tmp_path / "parity.json"
    summary = main(split="valid_unseen", games=1, random_walks=0, walk_steps=0, data_root=alfworld_games_root, out=out)
    assert "ALFWorld parity" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["summary"] == summary and report["games"][0]["task_id"].startswith("valid_unseen/")
    assert summary["walkthrough_won_both"] == 1


def test_walk_seed_is_stable():
    assert walk_seed("a", 0) == walk_seed("a", 0) != walk_seed("a", 1)
    assert (
        walk_seed("valid_seen/x/trial_1", 0) == 162674084222274
    )  # first 12 hex digits of sha1("valid_seen/x/trial_1|walk0")


def test_memoized_reference_plays_the_same_text(one_per_type, alfworld_games_root):
    task = one_per_type[4]  # pick_cool_then_place_in_recep: open/close, cool, move
    commands = expert_actions(task, alfworld_games_root) + ["inventory", "look", "help"]
    plain = TextworldEngine(game_file(task, alfworld_games_root))
    expected = [plain.reset()] + [plain.step(c) for c in commands]
    original = textgen._parse_and_convert
    with memoized_parsers():
        assert textgen._parse_and_convert is not original
        fast_ref = TextworldEngine(game_file(task, alfworld_games_root))
        got = [fast_ref.reset()] + [fast_ref.step(c) for c in commands]
    assert textgen._parse_and_convert is original
    assert got == expected and got[-4][2] is True  # the walkthrough's last step wins
