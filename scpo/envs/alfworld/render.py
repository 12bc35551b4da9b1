"""Observation text of the fast engine: ALFWorld's game grammar (the `grammar` of every json_2.1.1 game file), coded.

Each function names the grammar rule it renders. Lists follow textworld's `display_list` ("a", "a, and b", "a, b, and
c", empty -> "nothing") and textworld's order: the facts of a query sorted by their argument ids. All entities have the
indefinite article "a" (textworld's PddlEnv sets it for every entity).
"""

from __future__ import annotations

__all__ = [
    "HELP_TEXT",
    "INTRO_HEADER",
    "display_list",
    "intro",
    "look",
    "arrive",
    "opened",
    "closed",
    "picked",
    "moved",
    "examine_receptacle",
    "examine_object",
    "inventory",
    "feedback",
]

INTRO_HEADER = "-= Welcome to TextWorld, ALFRED! =-"
HELP_TEXT = (
    "Available commands:\n"
    "  look:                             look around your current location\n"
    "  inventory:                        check your current inventory\n"
    "  go to (receptacle):               move to a receptacle\n"
    "  open (receptacle):                open a receptacle\n"
    "  close (receptacle):               close a receptacle\n"
    "  take (object) from (receptacle):  take an object from a receptacle\n"
    "  move (object) to (receptacle):  place an object in or on a receptacle\n"
    "  examine (something):              examine a receptacle or an object\n"
    "  use (object):                     use an object\n"
    "  heat (object) with (receptacle):  heat an object using a receptacle\n"
    "  clean (object) with (receptacle): clean an object using a receptacle\n"
    "  cool (object) with (receptacle):  cool an object using a receptacle\n"
    "  slice (object) with (object):     slice an object using a sharp object\n"
)


def display_list(items: list[str]) -> str:
    """textworld.envs.pddl.textgen.display_list with ALFRED's separators (", " and ", and ")."""
    if not items:
        return "nothing"
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


def _a(engine, ids) -> list[str]:
    names = engine.game.names
    return ["a " + names[i] for i in ids]


def intro(engine) -> str:
    """Rule `intro`: header, `look.feedback`, `task`."""
    return f"{INTRO_HEADER}\n\n{look(engine, from_intro=True)}\n\nYour task is to: {engine.game.goal_text}"


def look(engine, from_intro: bool = False) -> str:
    """Rule `look.feedback`: facing the receptacles of the agent's location and listing objects 'on the floor' (at the
    location, with a `not_inreceptacle` fact for a receptacle there), else the middle-of-the-room overview.

    The overview lists `receptacleatlocation(r, l)`: in the intro `l` is free (every receptacle); after a `look` command
    `l` is bound to the agent's location, where there is no receptacle, so it lists "nothing" (as the reference does).
    """
    g = engine.game
    here = g.loc_receps.get(engine.loc, ())
    if not here:
        return (
            "You are in the middle of a room. Looking quickly around you, you see "
            + display_list(_a(engine, g.all_receps) if from_intro else [])
            + "."
        )
    floor = []
    if engine.negated:
        for o, loc in sorted(engine.facts["objectatlocation"]):
            if loc == engine.loc:
                floor += [o for r in here if ("inreceptacle", (o, r)) in engine.negated]
    return (
        "You are facing the "
        + display_list([g.names[r] for r in here])
        + ". Next to it, you see "
        + display_list(_a(engine, floor))
        + "."
    )


def examine_receptacle(engine, r: str) -> str:
    """Rule `examineReceptacle.feedback`."""
    g = engine.game
    name = g.names[r]
    inside = display_list(_a(engine, sorted(engine.contents.get(r, ()))))
    if r in g.props["openable"]:
        if (r,) in engine.facts["opened"]:
            return f"The {name} is open. In it, you see {inside}."
        return f"The {name} is closed."
    return f"On the {name}, you see {inside}."


def arrive(engine, r: str) -> str:
    """Rule `GotoLocation.feedback`."""
    return f"You arrive at {engine.game.names[r]}. {examine_receptacle(engine, r)}"


def opened(engine, r: str) -> str:
    """Rule `OpenObject.feedback`."""
    return f"You open the {engine.game.names[r]}. {examine_receptacle(engine, r)}"


def closed(engine, r: str) -> str:
    """Rule `CloseObject.feedback`."""
    return f"You close the {engine.game.names[r]}."


def picked(engine, o: str, r: str) -> str:
    """Rule `PickupObject.feedback`."""
    return f"You pick up the {engine.game.names[o]} from the {engine.game.names[r]}."


def moved(engine, o: str, r: str) -> str:
    """Rule `PutObject.feedback`."""
    return f"You move the {engine.game.names[o]} to the {engine.game.names[r]}."


def inventory(engine) -> str:
    """Rule `inventory.feedback`."""
    if not engine.holds_any():
        return "You are not carrying anything."
    return "You are carrying: " + display_list(_a(engine, engine.held())) + "."


def examine_object(engine, o: str) -> str:
    """Rule `examineObject.feedback`: the first rule whose condition holds."""
    g, f = engine.game, engine.facts
    name = g.names[o]
    if o in g.props["isreceptacleobject"]:
        inner = sorted(i for i, outer in f.get("inreceptacleobject", ()) if outer == o and i != o)
        return f"This is a normal {name}. In it, you see {display_list(_a(engine, inner))}."
    clean, hot, cool, sliced = ((o,) in f["isclean"], (o,) in f["ishot"], (o,) in f["iscool"], (o,) in f["issliced"])
    if clean and hot and sliced:
        return f"This is a hot and clean sliced {name}."
    if clean and cool and sliced:
        return f"This is a cool and clean sliced {name}."
    if clean and sliced:
        return f"This is a clean sliced {name}."
    if hot and sliced:
        return f"This is a hot sliced {name}."
    if cool and sliced:
        return f"This is a cool sliced {name}."
    if clean and hot:
        return f"This is a hot and clean {name}."
    if clean and cool:
        return f"This is a cool and clean {name}."
    if hot:
        return f"This is a hot {name}."
    if clean:
        return f"This is a clean {name}."
    if cool:
        return f"This is a cold {name}."
    if o in g.props["toggleable"]:
        if (o,) in f["istoggled"]:
            return f"This {name} is on."
        if ("istoggled", (o,)) in engine.negated:
            return f"This {name} is off."
    if o in g.props["sliceable"] and sliced:
        return f"This is a sliced {name}."
    return f"There's nothing special about {name}."


def feedback(engine, kind: str, args: tuple) -> str:
    """Feedback of the actions whose text does not depend on where they happen."""
    names = engine.game.names
    if kind == "look":
        return look(engine)
    if kind == "inventory":
        return inventory(engine)
    if kind == "help":
        return HELP_TEXT
    if kind == "examine_receptacle":
        return examine_receptacle(engine, args[0])
    if kind == "examine_object":
        return examine_object(engine, args[0])
    if kind == "toggle":
        o = args[0]
        if o in engine.game.props["toggleable"]:
            return f"You turn {'on' if (o,) in engine.facts['istoggled'] else 'off'} the {names[o]}."
        return f"You don't see any switch on the {names[o]}."
    verb = {"heat": "heat", "cool": "cool", "clean": "clean"}.get(kind)
    if verb:
        return f"You {verb} the {names[args[0]]} using the {names[args[1]]}."
    if kind == "slice":
        return f"You sliced the {names[args[0]]} with the {names[args[1]]}."
    raise ValueError(f"no feedback rule for action {kind!r}")
