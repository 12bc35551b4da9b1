"""The fast engine: our own pure-Python interpreter of ALFWorld game files, text-identical to the textworld reference.

What the reference does, and we do the same way (checked step by step by `scpo.envs.alfworld.parity`):
- State: the PDDL problem's initial facts; each action applies the ALFRED domain's effects (`pddl_domain` of the game
  file, the same in all 4,027 games). textworld also keeps a `not_<pred>` fact for every deleted atom; the grammar reads
  one of them (`not_inreceptacle`, in "Next to it, you see ..."), so we keep them too.
- Admissible commands: the domain's applicable grounded actions, rendered by the grammar's command templates,
  de-duplicated and sorted, as Fast Downward grounds them: operators without effects are dropped (so "go to" the agent's
  own location is never offered), and `examineObject` reduces to `holds(?a, ?o)` (the domain writes its other disjunct's
  quantifier as `(?l - location, ?r - receptacle)`; the stray comma gives a type `location,` with no objects), so only
  held objects can be examined.
- Text: the game grammar's feedback rules, rendered by `scpo.envs.alfworld.render`; lists follow textworld's order
  (facts sorted by argument ids), names follow ALFWorld's demangler ("apple 1").
- Win: the goal formula of the problem, checked after every step.
Unknown or inapplicable commands leave the state unchanged and answer "Nothing happens.".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from scpo.envs.alfworld import render
from scpo.envs.alfworld.games import DataError, cache_key, clear_game_cache, goal_of, load_game
from scpo.envs.alfworld.pddl import Facts, PddlError, goal_satisfied, parse_problem

__all__ = ["FastEngine", "CompiledGame", "compile_game", "clear_caches", "demangle_names", "NOTHING_HAPPENS"]

NOTHING_HAPPENS = "Nothing happens."
# md5 of the ALFRED domain and of the grammar (task line blanked) shared by all json_2.1.1 games: the text and rules
# coded here are those; another domain or grammar must be played with engine="textworld".
DOMAIN_MD5 = "574a98ddcfd0745755a35fbd9d73a583"
GRAMMAR_MD5 = "67bf9750d2ab8c68e0f2faccabfd59e0"
DYNAMIC = (
    "atlocation",
    "inreceptacle",
    "objectatlocation",
    "holds",
    "holdsany",
    "opened",
    "isclean",
    "ishot",
    "iscool",
    "ison",
    "istoggled",
    "issliced",
    "checked",
)
SINK_TYPES = ("sinktype", "sinkbasintype")
KNIFE_TYPES = ("knifetype", "butterknifetype")


def demangle_names(entity_ids: set[str]) -> dict[str, str]:
    """id -> display name, exactly as alfworld's `Demangler` (alfworld/agents/utils/misc.py) numbers them.

    "apple_bar__minus_00_dot_14_bar_..." -> "apple N": instances of a name are numbered count..1 in sorted-id order;
    ids with "basin" get the suffix ("sink_bar_..._bar_sinkbasin" -> "sinkbasin N"); ids without "_bar_" keep their text
    followed by a space.
    """
    ids = sorted(entity_ids)
    counts: dict[str, int] = {}
    for id_ in ids:
        parts = id_.split("_bar_", 1)
        if len(parts) > 1:
            name = parts[0] + ("basin" if "basin" in id_ else "")
            counts[name] = counts.get(name, 0) + 1
    next_number = dict(counts)
    names = {}
    for id_ in ids:
        text = (
            id_.replace("_bar_", "|")
            .replace("_minus_", "-")
            .replace("_plus_", "+")
            .replace("_dot_", ".")
            .replace("_comma_", ",")
        )
        parts = text.split("|", 1)
        if len(parts) == 1:
            names[id_] = f"{text} "
        else:
            name = parts[0] + ("basin" if "basin" in id_ else "")
            names[id_] = f"{name} {next_number[name]}"
            next_number[name] -= 1
    return names


@dataclass
class CompiledGame:
    """Everything about a game that never changes during play (shared by all resets)."""

    goal_text: str
    goal: object
    agent: str
    start: str
    names: dict[str, str]
    objects_by_type: dict[str, list[str]]
    static: Facts  # facts of predicates no action changes
    init_dynamic: Facts  # initial facts of the predicates actions change
    recep_loc: dict[str, str]
    loc_receps: dict[str, tuple[str, ...]]  # location -> receptacles there, sorted by id
    all_receps: tuple[str, ...]  # sorted by (receptacle, location) = textworld's list order
    otype: dict[str, str]
    rtype: dict[str, str]
    can_contain: set[tuple[str, str]]
    props: dict[str, frozenset[str]] = field(default_factory=dict)  # openable, pickupable, cleanable, ...


def _check_logic(game: dict, path: Path) -> None:
    grammar = game["grammar"]
    start = grammar.find('"Your task is to: ')
    blanked = grammar if start < 0 else grammar[:start] + "TASK" + grammar[grammar.index('"', start + 1) + 1 :]
    for what, text, want in (("domain", game["pddl_domain"], DOMAIN_MD5), ("grammar", blanked, GRAMMAR_MD5)):
        if hashlib.md5(text.encode()).hexdigest() != want:
            raise DataError(
                f"{path}: its PDDL {what} differs from ALFWorld's json_2.1.1 one that engine='fast' implements;"
                " play it with engine='textworld'"
            )


@lru_cache(maxsize=4096)
def _compile_cached(path: str, mtime_ns: int) -> CompiledGame:
    game = load_game(path)
    _check_logic(game, Path(path))
    try:
        problem = parse_problem(game["pddl_problem"])
    except PddlError as err:
        raise DataError(f"corrupt PDDL problem in {path}: {err}") from None
    facts: Facts = {}
    entities: set[str] = set()
    for pred, *args in problem.init:
        facts.setdefault(pred, set()).add(tuple(args))
        entities.update(args)
    objects_by_type: dict[str, list[str]] = {}
    for obj, typ in problem.objects.items():
        objects_by_type.setdefault(typ, []).append(obj)
    ((agent, start),) = facts["atlocation"]
    recep_loc = dict(facts.get("receptacleatlocation", ()))
    loc_receps: dict[str, list[str]] = {}
    for r, loc in sorted(facts.get("receptacleatlocation", ())):
        loc_receps.setdefault(loc, []).append(r)
    props = {
        p: frozenset(a[0] for a in facts.get(p, ()))
        for p in (
            "openable",
            "pickupable",
            "cleanable",
            "heatable",
            "coolable",
            "toggleable",
            "sliceable",
            "isreceptacleobject",
        )
    }
    return CompiledGame(
        goal_text=goal_of(game),
        goal=problem.goal,
        agent=agent,
        start=start,
        names=demangle_names(entities),
        objects_by_type=objects_by_type,
        static={p: rows for p, rows in facts.items() if p not in DYNAMIC},
        init_dynamic={p: set(facts.get(p, ())) for p in DYNAMIC},
        recep_loc=recep_loc,
        loc_receps={loc: tuple(rs) for loc, rs in loc_receps.items()},
        all_receps=tuple(r for r, _ in sorted(facts.get("receptacleatlocation", ()))),
        otype=dict(facts.get("objecttype", ())),
        rtype=dict(facts.get("receptacletype", ())),
        can_contain=set(facts.get("cancontain", ())),
        props=props,
    )


def compile_game(path: str | Path) -> CompiledGame:
    """The static part of a game (cached by path and modification time)."""
    return _compile_cached(*cache_key(path))


def clear_caches() -> None:
    """Forget every compiled and every parsed game file, so the next load reads and compiles from disk (benchmarks)."""
    _compile_cached.cache_clear()
    clear_game_cache()


class FastEngine:
    """reset() / step(command) -> (observation, admissible_commands, won), in pure Python."""

    def __init__(self, game_path: str | Path):
        self.game_path = Path(game_path)
        self.game = compile_game(self.game_path)
        self.reset()

    # ------------------------------------------------------------------------------------------------------------ state
    def reset(self) -> tuple[str, list[str], bool]:
        g = self.game
        self.facts: Facts = {**g.static, **{p: set(rows) for p, rows in g.init_dynamic.items()}}
        self.negated: set[tuple[str, tuple[str, ...]]] = set()  # textworld's `not_<pred>(args)` facts
        self.loc = g.start
        self.contents: dict[str, set[str]] = {}  # receptacle -> objects in it
        for o, r in self.facts["inreceptacle"]:
            self.contents.setdefault(r, set()).add(o)
        obs = render.intro(self)
        return obs, self.admissible_actions(), self.won()

    def _add(self, pred: str, *args: str) -> None:
        self.facts[pred].add(args)
        self.negated.discard((pred, args))

    def _delete(self, pred: str, *args: str) -> None:
        self.facts[pred].discard(args)
        self.negated.add((pred, args))

    def holds_any(self) -> bool:
        return bool(self.facts["holdsany"])

    def held(self) -> list[str]:
        return sorted(o for _, o in self.facts["holds"])

    def is_open_or_not_openable(self, r: str) -> bool:
        return r not in self.game.props["openable"] or (r,) in self.facts["opened"]

    def won(self) -> bool:
        """Whether the PDDL goal formula holds in the current state."""
        return goal_satisfied(self.game.goal, self.facts, self.game.objects_by_type)

    # ---------------------------------------------------------------------------------------------- admissible commands
    def admissible_actions(self) -> list[str]:
        """The applicable grounded actions of the current state, kept as `commands` ({command: (action, args)});
        returns the sorted command list."""
        g, names, here = self.game, self.game.names, self.loc
        cmds: dict[str, tuple] = {}

        def offer(text: str, action: tuple) -> None:
            cmds.setdefault(text, action)

        receps = g.loc_receps.get(here, ())
        held = self.held()
        hands_free = not self.holds_any()
        for r in g.all_receps:
            if g.recep_loc[r] != here:
                offer("go to " + names[r], ("goto", r))
        offer("look", ("look",))
        offer("inventory", ("inventory",))
        offer("help", ("help",))
        for o in held:
            offer("examine " + names[o], ("examine_object", o))
        for r in receps:
            offer("examine " + names[r], ("examine_receptacle", r))
            if r in g.props["openable"]:
                if (r,) in self.facts["opened"]:
                    offer("close " + names[r], ("close", r))
                else:
                    offer("open " + names[r], ("open", r))
            visible = self.is_open_or_not_openable(r)
            for o in self.contents.get(r, ()):
                if visible and hands_free and o in g.props["pickupable"]:
                    offer(f"take {names[o]} from {names[r]}", ("take", o, r))
                if o in g.props["toggleable"]:
                    offer("use " + names[o], ("toggle", o))
            rt = g.rtype.get(r)
            for o in held:
                if visible and (rt, g.otype.get(o)) in g.can_contain:
                    offer(f"move {names[o]} to {names[r]}", ("put", o, r))
                if rt in SINK_TYPES and o in g.props["cleanable"]:
                    offer(f"clean {names[o]} with {names[r]}", ("clean", o, r))
                if rt == "microwavetype" and o in g.props["heatable"]:
                    offer(f"heat {names[o]} with {names[r]}", ("heat", o, r))
                if rt == "fridgetype" and o in g.props["coolable"]:
                    offer(f"cool {names[o]} with {names[r]}", ("cool", o, r))
        knives = [o for o in held if g.otype.get(o) in KNIFE_TYPES]
        if knives:
            for co, loc in self.facts["objectatlocation"]:
                if loc == here and co in g.props["sliceable"]:
                    for ko in knives:
                        offer(f"slice {names[co]} with {names[ko]}", ("slice", co, ko))
        self.commands = cmds
        return sorted(cmds)

    # ------------------------------------------------------------------------------------------------------------- step
    def step(self, command: str) -> tuple[str, list[str], bool]:
        action = self.commands.get(str(command).strip())
        if action is None:
            return NOTHING_HAPPENS, sorted(self.commands), self.won()
        obs = self.apply(action)
        return obs, self.admissible_actions(), self.won()

    def apply(self, action: tuple) -> str:
        """Apply one grounded action (a value of `commands`) to the state; returns its observation text."""
        kind, args = action[0], action[1:]
        a = self.game.agent
        if kind == "goto":
            (r,) = args
            new = self.game.recep_loc[r]
            self._delete("atlocation", a, self.loc)
            self._add("atlocation", a, new)
            self.loc = new
            return render.arrive(self, r)
        if kind == "take":
            o, r = args
            self._delete("inreceptacle", o, r)
            self.contents[r].discard(o)
            self._add("holds", a, o)
            self._add("holdsany", a)
            self._delete("objectatlocation", o, self.loc)
            return render.picked(self, o, r)
        if kind == "put":
            o, r = args
            self._add("inreceptacle", o, r)
            self.contents.setdefault(r, set()).add(o)
            self._add("objectatlocation", o, self.loc)
            self._delete("holds", a, o)
            self._delete("holdsany", a)
            return render.moved(self, o, r)
        if kind == "open":
            self._add("opened", args[0])
            self._add("checked", args[0])
            return render.opened(self, args[0])
        if kind == "close":
            self._delete("opened", args[0])
            return render.closed(self, args[0])
        if kind == "heat":
            self._add("ishot", args[0])
            self._delete("iscool", args[0])
        elif kind == "cool":
            self._add("iscool", args[0])
            self._delete("ishot", args[0])
        elif kind == "clean":
            self._add("isclean", args[0])
        elif kind == "slice":
            self._add("issliced", args[0])
        elif kind == "toggle":
            (o,) = args
            if (o,) in self.facts["ison"]:
                self._delete("ison", o)
            else:
                self._add("ison", o)
            self._add("istoggled", o)
        elif kind == "look":
            self._add("checked", self.loc)
        elif kind in ("inventory", "help"):
            self._add("checked", a)
        elif kind in ("examine_object", "examine_receptacle"):
            self._add("checked", args[0])
        return render.feedback(self, kind, args)
