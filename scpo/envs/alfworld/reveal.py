"""Where the goal's objects start, as one sentence for the task line (`env.alfworld.reveal_goal_objects`).

ALFWorld is partially observed: the agent must open and look before it knows where an object is, while the planner's
V* (`scpo.envs.alfworld.planner`) is the value of the fully observed game. With this option the task line also names
the receptacle of every object the planner tracks (the candidates for the goal's object variables and, for look-at
tasks, the lamps) in the game's initial state, so that the planner's credit is ground truth for the agent's own
problem (experiments/learning_benchmark, "the fully observed variant"):

    "put a clean apple in fridge." -> "put a clean apple in fridge. Where they start: apple 1 in countertop 2, ..."
"""

from __future__ import annotations

from pathlib import Path

from scpo.envs.alfworld.fast_engine import FastEngine
from scpo.envs.alfworld.planner import goal_spec

__all__ = ["REVEAL_PREFIX", "starting_places"]

REVEAL_PREFIX = "Where they start:"


def starting_places(game_path: str | Path) -> str:
    """`REVEAL_PREFIX` and "<object> in <receptacle>" for each tracked object of the game at reset, in the order of
    their display names ("apple 1 in countertop 2, apple 2 in fridge 1, desklamp 1 in sidetable 1.")."""
    engine = FastEngine(game_path)
    spec = goal_spec(engine.game)
    names = engine.game.names
    tracked = set(spec.candidates) | set(spec.lamps)
    places: dict[str, list[str]] = {o: [] for o in tracked}
    for obj, recep in engine.facts["inreceptacle"]:
        if obj in places:
            places[obj].append(names[recep])
    parts = sorted(
        f"{names[o]} in {' and '.join(sorted(rs))}" if rs else f"{names[o]} in no receptacle"
        for o, rs in places.items()
    )
    return f"{REVEAL_PREFIX} {', '.join(parts)}."
