"""The fast ALFWorld engine on a hand-made game (real ALFRED domain + grammar, a tiny problem): every text
hand-computed."""

from __future__ import annotations

import json
import re

import pytest

from scpo.envs.alfworld.fast_engine import FastEngine, demangle_names
from scpo.envs.alfworld.games import DataError
from scpo.envs.alfworld.pddl import goal_satisfied, parse_problem, parse_sexpr
from scpo.envs.alfworld.render import display_list

TINY_PROBLEM = """
(define (problem tiny)
(:domain alfred)
(:objects
 agent1 - agent
 Apple_bar_1 - object
 Apple_bar_2 - object
 Knife_bar_1 - object
 Fridge_bar_1 - receptacle
 CounterTop_bar_1 - receptacle
 loc_bar_0 - location
 loc_bar_1 - location
 loc_bar_2 - location
 AppleType - otype
 KnifeType - otype
 FridgeType - rtype
 CounterTopType - rtype
)
(:init
 (atLocation agent1 loc_bar_0)
 (receptacleAtLocation Fridge_bar_1 loc_bar_1)
 (receptacleAtLocation CounterTop_bar_1 loc_bar_2)
 (receptacleType Fridge_bar_1 FridgeType)
 (receptacleType CounterTop_bar_1 CounterTopType)
 (objectType Apple_bar_1 AppleType)
 (objectType Apple_bar_2 AppleType)
 (objectType Knife_bar_1 KnifeType)
 (canContain FridgeType AppleType)
 (canContain CounterTopType AppleType)
 (canContain CounterTopType KnifeType)
 (openable Fridge_bar_1)
 (pickupable Apple_bar_1)
 (pickupable Apple_bar_2)
 (pickupable Knife_bar_1)
 (coolable Apple_bar_1)
 (coolable Apple_bar_2)
 (sliceable Apple_bar_1)
 (sliceable Apple_bar_2)
 (inReceptacle Apple_bar_1 CounterTop_bar_1)
 (inReceptacle Knife_bar_1 CounterTop_bar_1)
 (inReceptacle Apple_bar_2 Fridge_bar_1)
 (objectAtLocation Apple_bar_1 loc_bar_2)
 (objectAtLocation Knife_bar_1 loc_bar_2)
 (objectAtLocation Apple_bar_2 loc_bar_1)
)
(:goal (and (exists (?r - receptacle) (exists (?o - object) (and (coolable ?o) (objectType ?o AppleType)
        (receptacleType ?r CounterTopType) (isCool ?o) (inReceptacle ?o ?r))))))
)
"""
GOAL = "put a cool apple in countertop."


@pytest.fixture(scope="module")
def tiny_game(tmp_path_factory, alfworld_games_root):
    real = json.loads(next(alfworld_games_root.glob("json_2.1.1/valid_seen/*/*/game.tw-pddl")).read_text())
    grammar = re.sub(r'"Your task is to: [^"]*"', f'"Your task is to: {GOAL}"', real["grammar"])
    game = {
        "pddl_domain": real["pddl_domain"],
        "grammar": grammar,
        "pddl_problem": TINY_PROBLEM,
        "solvable": True,
        "walkthrough": [
            "go to fridge 1",
            "open fridge 1",
            "take apple 1 from fridge 1",
            "go to countertop 1",
            "move apple 1 to countertop 1",
        ],
    }
    path = tmp_path_factory.mktemp("tiny") / "pick_cool_then_place_in_recep-Apple-None-CounterTop-1" / "trial_1"
    path.mkdir(parents=True)
    (path / "game.tw-pddl").write_text(json.dumps(game))
    return path / "game.tw-pddl"


def test_demangler_numbers_instances_backwards_in_sorted_id_order():
    names = demangle_names({"apple_bar_1", "apple_bar_2", "sink_bar_3_bar_sinkbasin", "sink_bar_4", "agent1"})
    assert names == {
        "apple_bar_1": "apple 2",
        "apple_bar_2": "apple 1",
        "sink_bar_3_bar_sinkbasin": "sinkbasin 1",
        "sink_bar_4": "sink 1",
        "agent1": "agent1 ",
    }


def test_display_list_uses_textworld_separators():
    assert display_list([]) == "nothing"
    assert display_list(["a x"]) == "a x"
    assert display_list(["a x", "a y"]) == "a x, and a y"
    assert display_list(["a x", "a y", "a z"]) == "a x, a y, and a z"


def test_goal_checker_handles_exists_and_inequality():
    goal = parse_sexpr("(exists (?a - object ?b - object) (and (in ?a r) (in ?b r) (not (= ?a ?b))))")[0]
    objects = {"object": ["x", "y"]}
    assert not goal_satisfied(goal, {"in": {("x", "r")}}, objects)
    assert goal_satisfied(goal, {"in": {("x", "r"), ("y", "r")}}, objects)
    assert not goal_satisfied(goal, {"in": {("x", "r"), ("y", "s")}}, objects)


def test_problem_parser_lowercases_and_types():
    p = parse_problem(TINY_PROBLEM)
    assert p.objects["apple_bar_1"] == "object" and p.objects["loc_bar_2"] == "location"
    assert ("inreceptacle", "apple_bar_2", "fridge_bar_1") in p.init


def test_tiny_game_texts_and_commands(tiny_game):
    eng = FastEngine(tiny_game)
    obs, adm, won = eng.reset()
    assert obs == (
        "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, "
        f"you see a countertop 1, and a fridge 1.\n\nYour task is to: {GOAL}"
    )
    assert adm == ["go to countertop 1", "go to fridge 1", "help", "inventory", "look"] and not won
    assert eng.step("look")[0] == "You are in the middle of a room. Looking quickly around you, you see nothing."
    assert eng.step("go to the moon")[0] == "Nothing happens."
    obs, adm, _ = eng.step("go to fridge 1")
    assert obs == "You arrive at fridge 1. The fridge 1 is closed."
    assert adm == ["examine fridge 1", "go to countertop 1", "help", "inventory", "look", "open fridge 1"]
    obs, adm, _ = eng.step("open fridge 1")
    assert obs == "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1."
    assert "take apple 1 from fridge 1" in adm and "close fridge 1" in adm
    assert eng.step("take apple 1 from fridge 1")[0] == "You pick up the apple 1 from the fridge 1."
    assert eng.step("inventory")[0] == "You are carrying: a apple 1."
    assert eng.step("examine apple 1")[0] == "There's nothing special about apple 1."
    obs, adm, _ = eng.step("cool apple 1 with fridge 1")
    assert obs == "You cool the apple 1 using the fridge 1." and "move apple 1 to fridge 1" in adm
    assert eng.step("examine apple 1")[0] == "This is a cold apple 1."
    obs, adm, won = eng.step("go to countertop 1")
    assert obs == "You arrive at countertop 1. On the countertop 1, you see a apple 2, and a knife 1."
    assert "take apple 2 from countertop 1" not in adm and "go to countertop 1" not in adm and not won
    obs, adm, won = eng.step("move apple 1 to countertop 1")
    assert obs == "You move the apple 1 to the countertop 1." and won
    assert eng.step("look")[0] == "You are facing the countertop 1. Next to it, you see nothing."
    eng.step("take knife 1 from countertop 1")
    assert eng.step("slice apple 2 with knife 1")[0] == "You sliced the apple 2 with the knife 1."
    eng.step("move knife 1 to countertop 1")
    assert eng.step("take apple 2 from countertop 1")[0] == "You pick up the apple 2 from the countertop 1."
    assert eng.step("examine apple 2")[0] == "This is a sliced apple 2."
    # a reset restores the initial state
    assert (
        eng.reset()[0].startswith("-= Welcome") and eng.step("take apple 2 from countertop 1")[0] == "Nothing happens."
    )


def test_foreign_domain_is_refused(tiny_game, tmp_path):
    game = json.loads(tiny_game.read_text())
    game["pddl_domain"] = game["pddl_domain"].replace("(:action look", "(:action peek")
    path = tmp_path / "game.tw-pddl"
    path.write_text(json.dumps(game))
    with pytest.raises(DataError, match="engine='textworld'"):
        FastEngine(path)


def test_tiny_game_matches_textworld_reference(tiny_game):
    from scpo.envs.alfworld.textworld_engine import TextworldEngine

    fast, ref = FastEngine(tiny_game), TextworldEngine(tiny_game)
    assert fast.reset() == ref.reset()
    for cmd in [
        "look",
        "go to fridge 1",
        "open fridge 1",
        "take apple 1 from fridge 1",
        "inventory",
        "examine apple 1",
        "cool apple 1 with fridge 1",
        "examine apple 1",
        "close fridge 1",
        "go to countertop 1",
        "move apple 1 to countertop 1",
        "look",
        "take knife 1 from countertop 1",
        "slice apple 2 with knife 1",
        "help",
        "bogus",
    ]:
        assert fast.step(cmd) == ref.step(cmd), cmd
