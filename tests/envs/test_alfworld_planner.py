"""The V* planner: values worked by hand on a tiny game, against exhaustive full-state search and uniform-cost search on
real games, ALFWorld's objects-in-two-receptacles facts, and its plans replayed in textworld."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from scpo.envs.alfworld import expert_actions, game_file
from scpo.envs.alfworld.fast_engine import FastEngine
from scpo.envs.alfworld.planner import (
    Planner,
    PlannerError,
    exhaustive_optimum,
    goal_spec,
    oracle_progress,
)

# one real game per task type (valid_unseen)
GAMES = {
    "look": "valid_unseen/look_at_obj_in_light-AlarmClock-None-DeskLamp-308/trial_T20190908_222917_366542",
    "place": "valid_unseen/pick_and_place_simple-Mug-None-Desk-308/trial_T20190908_125200_737896",
    "clean": "valid_unseen/pick_clean_then_place_in_recep-Bowl-None-Cabinet-10/trial_T20190909_061130_844814",
    "cool": "valid_unseen/pick_cool_then_place_in_recep-Bread-None-CounterTop-10/trial_T20190908_091747_866951",
    "heat": "valid_unseen/pick_heat_then_place_in_recep-Apple-None-Fridge-10/trial_T20190906_182259_116320",
    "two": "valid_unseen/pick_two_obj_and_place-CD-None-Safe-308/trial_T20190907_050942_897916",
}
# the apple of the tiny game of test_alfworld_fast_engine: apple 1 on the countertop, apple 2 in the closed fridge
TINY_PROBLEM = """
(define (problem tiny) (:domain alfred)
(:objects agent1 - agent Apple_bar_1 - object Apple_bar_2 - object Knife_bar_1 - object Fridge_bar_1 - receptacle
 CounterTop_bar_1 - receptacle loc_bar_0 - location loc_bar_1 - location loc_bar_2 - location AppleType - otype
 KnifeType - otype FridgeType - rtype CounterTopType - rtype)
(:init (atLocation agent1 loc_bar_0) (receptacleAtLocation Fridge_bar_1 loc_bar_1)
 (receptacleAtLocation CounterTop_bar_1 loc_bar_2) (receptacleType Fridge_bar_1 FridgeType)
 (receptacleType CounterTop_bar_1 CounterTopType) (objectType Apple_bar_1 AppleType) (objectType Apple_bar_2 AppleType)
 (objectType Knife_bar_1 KnifeType) (canContain FridgeType AppleType) (canContain CounterTopType AppleType)
 (canContain CounterTopType KnifeType) (openable Fridge_bar_1) (pickupable Apple_bar_1) (pickupable Apple_bar_2)
 (pickupable Knife_bar_1) (coolable Apple_bar_1) (coolable Apple_bar_2) (inReceptacle Apple_bar_1 CounterTop_bar_1)
 (inReceptacle Knife_bar_1 CounterTop_bar_1) (inReceptacle Apple_bar_2 Fridge_bar_1)
 (objectAtLocation Apple_bar_1 loc_bar_2) (objectAtLocation Knife_bar_1 loc_bar_2)
 (objectAtLocation Apple_bar_2 loc_bar_1))
(:goal (and (exists (?r - receptacle) (exists (?o - object) (and (coolable ?o) (objectType ?o AppleType)
        (receptacleType ?r CounterTopType) (isCool ?o) (inReceptacle ?o ?r))))))
)
"""


@pytest.fixture(scope="module")
def tiny_game(tmp_path_factory, alfworld_data_root):
    real = json.loads(next(alfworld_data_root.glob("json_2.1.1/valid_seen/*/*/game.tw-pddl")).read_text())
    grammar = re.sub(r'"Your task is to: [^"]*"', '"Your task is to: put a cool apple in countertop."', real["grammar"])
    game = {
        "pddl_domain": real["pddl_domain"],
        "grammar": grammar,
        "pddl_problem": TINY_PROBLEM,
        "solvable": True,
        "walkthrough": [],
    }
    path = tmp_path_factory.mktemp("tiny") / "pick_cool_then_place_in_recep-Apple-None-CounterTop-1" / "trial_1"
    path.mkdir(parents=True)
    (path / "game.tw-pddl").write_text(json.dumps(game))
    return path / "game.tw-pddl"


def _path(key, root):
    return game_file(GAMES[key], root.parent)


def test_goal_spec_reads_the_six_shapes(alfworld_data_root):
    specs = {k: goal_spec(FastEngine(_path(k, alfworld_data_root)).game) for k in GAMES}
    assert [(specs[k].kind, specs[k].n_objects, specs[k].attr) for k in GAMES] == [
        ("look", 1, None),
        ("place", 1, None),
        ("place", 1, "isclean"),
        ("place", 1, "iscool"),
        ("place", 1, "ishot"),
        ("place", 2, None),
    ]
    assert all(specs[k].candidates for k in GAMES) and specs["look"].lamps and not specs["look"].targets
    assert all(s.startswith("cd_bar_") for s in specs["two"].candidates) and len(specs["two"].candidates) >= 2
    assert all(t.startswith("sinkbasin_bar_") or "sinkbasin" in t for t in specs["clean"].tools)


def test_tiny_game_values_by_hand(tiny_game):
    """Reset: go to countertop, take apple 1, go to fridge, cool, go to countertop, put = 6 (apple 2 in the closed
    fridge also takes 6). Holding the knife costs a put first: taking it is q = -1; look changes nothing: q = 0."""
    planner, e = Planner(tiny_game), FastEngine(tiny_game)
    assert planner.value(e) == 6
    assert planner.plan(e)[0] in ("go to countertop 1", "go to fridge 1")
    e.step("look")
    assert planner.value(e) == 6
    e.step("go to countertop 1")
    assert planner.value(e) == 5
    e.step("take knife 1 from countertop 1")
    assert planner.value(e) == 6
    assert exhaustive_optimum(e) == 6
    e.step("go to fridge 1")  # holding the knife at the fridge, which does not accept knives
    assert planner.value(e) == exhaustive_optimum(e) == 7
    assert oracle_progress(6, 7) == -1 and oracle_progress(float("inf"), float("inf")) == 0


def test_plan_wins_in_exactly_v_star_steps_and_within_the_walkthrough(alfworld_data_root):
    for key in GAMES:
        path = _path(key, alfworld_data_root)
        planner, e = Planner(path), FastEngine(path)
        v, plan = planner.value(e), planner.plan(e)
        assert len(plan) == v <= len(expert_actions(GAMES[key], alfworld_data_root.parent))
        wins = [e.step(c)[2] for c in plan]
        assert wins[-1] and not any(wins[:-1]), key


def test_objects_in_two_receptacles_are_handled(alfworld_data_root):
    """ALFWorld's facts put some objects in two receptacles; a take removes one. The pan is on a stove burner *and* on
    the countertop, so cooling it in hand already satisfies "cool pan in countertop" (the walkthrough: 4 steps); the
    lamp on the desk and the shelf is switched from the desk (3 steps)."""
    root = alfworld_data_root.parent
    for task, want in (
        ("valid_unseen/pick_cool_then_place_in_recep-Pan-None-CounterTop-10/trial_T20190908_114622_738670", 4),
        ("valid_unseen/look_at_obj_in_light-AlarmClock-None-DeskLamp-308/trial_T20190908_222951_616606", 3),
    ):
        path = game_file(task, root)
        assert Planner(path).value(FastEngine(path)) == want == len(expert_actions(task, root))


def test_equals_exhaustive_full_state_search_on_a_small_game(alfworld_data_root):
    path = game_file(
        "valid_unseen/pick_and_place_simple-Mug-None-Desk-308/trial_T20190908_125200_737896", alfworld_data_root.parent
    )
    planner, e = Planner(path), FastEngine(path)
    assert planner.value(e) == exhaustive_optimum(e, 50_000) == 4
    e.step("go to shelf 1")
    e.step("look")
    assert planner.value(e) == exhaustive_optimum(e, 50_000)


@pytest.mark.parametrize("key", list(GAMES))
def test_astar_equals_uniform_cost_search_from_random_states(key, alfworld_data_root):
    """From the states of a seeded uniform random walk (holding stray objects, cabinets opened, ...): the heuristic
    never
    exceeds V*, and A* with it returns what uniform-cost search on the same actions returns."""
    path = _path(key, alfworld_data_root)
    planner, blind = Planner(path), Planner(path, use_heuristic=False)
    rng = np.random.default_rng(3)
    e = FastEngine(path)
    _, admissible, won = e.reset()
    for _ in range(8):
        v = planner.value(e)
        assert planner.heuristic(planner.key_of(e)) <= v == blind.value(e)
        _, admissible, won = e.step(admissible[int(rng.integers(len(admissible)))])
        if won:
            break


def test_plan_wins_in_textworld(alfworld_data_root):
    from scpo.envs.alfworld.textworld_engine import TextworldEngine

    path = _path("heat", alfworld_data_root)
    plan = Planner(path).plan(FastEngine(path))
    tw = TextworldEngine(path)
    tw.reset()
    wins = [tw.step(c)[2] for c in plan]
    assert wins[-1] and not any(wins[:-1])


def test_unknown_goal_shape_is_an_error(tiny_game):
    game = FastEngine(tiny_game).game
    odd = type(game)(**{**game.__dict__, "goal": ["and", ["opened", "fridge_bar_1"]]})
    with pytest.raises(PlannerError, match="six shapes"):
        goal_spec(odd)


def test_a_dead_end_has_infinite_value_and_every_state_after_it_too(alfworld_data_root):
    """The paper towel roll fits no receptacle of this kitchen: once it is held, the hands never free and the goal
    (a cool mug in a cabinet) cannot be reached. The search that proves it caches every state it saw as a dead end."""
    path = game_file(
        "valid_unseen/pick_cool_then_place_in_recep-Mug-None-Cabinet-10/trial_T20190909_121710_650938",
        alfworld_data_root.parent,
    )
    planner, e = Planner(path), FastEngine(path)
    e.step("go to coffeemachine 1")
    assert planner.value(e) < float("inf")
    e.step("take papertowelroll 1 from countertop 1")
    assert planner.value(e) == float("inf") and planner.best_action(e) is None
    searches = planner.stats.searches
    e.step("go to fridge 1")
    assert planner.value(e) == float("inf") and planner.stats.searches == searches  # a cache hit
    with pytest.raises(PlannerError, match="cannot be reached"):
        planner.plan(e)
