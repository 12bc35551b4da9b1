"""V*(s): the fewest steps from an ALFWorld state to the goal with full knowledge, by A* over the fast engine's own
rules.

The search never re-states the game rules: a node's successors are the fast engine's applicable grounded actions
(`FastEngine.admissible_actions`) and their effects (`FastEngine.apply`) on a scratch engine loaded with the node's
state; the goal test is the engine's own (`FastEngine.won`, the PDDL goal formula). What the planner adds is *which*
actions it tries and a lower bound on the steps left:

**State key** (what V* depends on): the agent's location, the held object, the receptacle of every goal-relevant object
(the objects that can fill the goal's object variables, and the lamps of look-at tasks), the set of opened receptacles,
the goal attribute (clean / hot / cool) of each candidate and whether each lamp was switched. Other objects never move
again in an optimal plan (below), and no precondition or goal reads where they are, so states that differ only there
share V*: that is the cache key.

**Pruned actions** (each removal keeps at least one optimal plan; `ALFWorld` goals never read `checked`, `opened`,
`ison`, `issliced`, nor any fact of an irrelevant object):
- look / inventory / help / examine only add `checked`, which no precondition or goal reads -> never;
- close only removes `opened`, which every precondition reads monotonically (open receptacles allow more) -> never;
- take / clean / heat / cool only of goal objects (the goal's attribute only); switch only an unswitched lamp of a
  look-at task; slice never (no goal reads `issliced`); put always (it frees the hands);
- open a receptacle that holds or receives a goal object, or that can receive the held object (an open needed for a
  later put can always be moved to just before that put, at the same place);
- go to a location with a goal receptacle, a tool of the goal's attribute (sink, microwave, fridge), a lamp or a goal
  object; while the agent holds something, also one location of each kind among the others where it could be put
  down (an open receptacle that accepts it; only closed ones): such locations are interchangeable.

**Heuristic** (admissible): per task kind, the actions a plan cannot avoid (take, the attribute action, put, opening a
closed receptacle that is needed, freeing the hands, switching the lamp) plus the changes of location along the order
they must happen in (the object's place, a tool, the goal receptacle; pick-two: first object, goal, second object,
goal), minimised over the candidate objects, tools and goal receptacles. `tests/envs/test_alfworld_planner.py` checks it
against plain breadth-first search on the same actions and V* against an exhaustive search over the full state on small
games.

A* re-opens nodes whose cost improves, so the result is optimal with an admissible heuristic. Every node of a found
optimal path gets its exact V* and best action cached (the tail of an optimal path is optimal); a search that reaches a
cached state stops there with g + V*. Written by hand: the planner libraries on PyPI (pyperplan, unified-planning) would
re-read the domain and lose the engine's own grounding.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from scpo.envs.alfworld.fast_engine import DYNAMIC, SINK_TYPES, CompiledGame, FastEngine

__all__ = ["PlannerError", "GoalSpec", "goal_spec", "Planner", "PlannerStats", "exhaustive_optimum", "oracle_progress"]

ATTR_OPS = {"isclean": "clean", "ishot": "heat", "iscool": "cool"}
ATTR_TOOLS = {"isclean": SINK_TYPES, "ishot": ("microwavetype",), "iscool": ("fridgetype",)}
_STATIC_PROPS = ("cleanable", "heatable", "coolable", "toggleable", "pickupable", "sliceable", "openable")
INF = math.inf


class PlannerError(RuntimeError):
    """A goal the planner does not know, or a search that exceeded its node budget."""


@dataclass(frozen=True)
class GoalSpec:
    """What the goal asks, read from its PDDL formula.

    kind       : "place" (n_objects objects of one type, with `attr` if set, in one receptacle of the goal type) or
                 "look" (hold an object of the type where a switched lamp is)
    candidates : objects that can fill the object variable(s)
    targets    : receptacles of the goal type ("place")
    tools      : receptacles whose type performs `attr` (sinks, microwaves, fridges)
    lamps      : lamps of the goal type ("look")
    """

    kind: str
    n_objects: int
    candidates: tuple[str, ...]
    attr: str | None = None
    targets: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    lamps: tuple[str, ...] = ()


def _atoms(formula, out: list) -> list:
    if isinstance(formula, list) and formula:
        head = formula[0]
        if head in ("and", "or", "not"):
            for part in formula[1:]:
                _atoms(part, out)
        elif head in ("exists", "forall"):
            _atoms(formula[2], out)
        elif head != "=":
            out.append(tuple(formula))
    return out


def goal_spec(game: CompiledGame) -> GoalSpec:
    """The GoalSpec of a compiled game; PlannerError if its goal is not one of ALFWorld's six shapes."""
    atoms = _atoms(game.goal, [])
    otype_of = {a[1]: a[2] for a in atoms if a[0] == "objecttype"}
    rtype_of = {a[1]: a[2] for a in atoms if a[0] == "receptacletype"}
    props: dict[str, set[str]] = {}
    for a in atoms:
        if len(a) == 2 and a[0] in _STATIC_PROPS:
            props.setdefault(a[1], set()).add(a[0])

    def objects(var: str) -> tuple[str, ...]:
        want = otype_of.get(var)
        if want is None:
            raise PlannerError(f"goal variable {var} has no objecttype in the goal {game.goal!r}")
        return tuple(
            sorted(
                o
                for o, t in game.otype.items()
                if t == want and all(o in game.props.get(p, ()) for p in props.get(var, ()))
            )
        )

    held = [a[2] for a in atoms if a[0] == "holds"]
    if held:
        (hvar,) = held
        lamp_vars = [a[1] for a in atoms if a[0] == "istoggled"]
        if len(lamp_vars) != 1:
            raise PlannerError(f"look-at goal without exactly one switched lamp: {game.goal!r}")
        return GoalSpec("look", 1, objects(hvar), lamps=objects(lamp_vars[0]))
    placed = [(a[1], a[2]) for a in atoms if a[0] == "inreceptacle" and a[2] in rtype_of]
    if not placed or len({r for _, r in placed}) != 1 or len({otype_of.get(o) for o, _ in placed}) != 1:
        raise PlannerError(
            f"goal is not one of ALFWorld's six shapes (place n objects of one type in one receptacle "
            f"of a type, or look at an object under a lamp): {game.goal!r}"
        )
    rvar = placed[0][1]
    attrs = {a[0] for a in atoms if a[0] in ATTR_OPS}
    if len(attrs) > 1:
        raise PlannerError(f"goal asks for more than one of {sorted(ATTR_OPS)}: {game.goal!r}")
    attr = next(iter(attrs), None)
    targets = tuple(r for r in game.all_receps if game.rtype.get(r) == rtype_of[rvar])
    tools = tuple(r for r in game.all_receps if attr and game.rtype.get(r) in ATTR_TOOLS[attr])
    return GoalSpec("place", len(placed), objects(placed[0][0]), attr=attr, targets=targets, tools=tools)


@dataclass
class PlannerStats:
    """Counters of one planner: V* queries, cache hits, searches, expanded nodes, the seconds of each search (a cache
    miss) and of each query (`value` / `best_action` call: reading the key, then the cache or a search)."""

    queries: int = 0
    hits: int = 0
    searches: int = 0
    expanded: int = 0
    seconds: list[float] = field(default_factory=list)
    call_seconds: list[float] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else float("nan")


# a key: (location, held object or None, receptacle of each tracked object (None: held), opened receptacles,
#         goal attribute of each candidate, switched flag of each lamp)
Key = tuple


class Planner:
    """V*(s) and an optimal next command for states of one ALFWorld game (fast engine only).

    planner = Planner(game_path)
    engine = FastEngine(game_path)
    planner.value(engine)        # V* of the engine's current state (math.inf if the goal cannot be reached)
    planner.best_action(engine)  # a command on an optimal path (None at the goal)
    planner.plan(engine)         # the whole optimal command list
    """

    def __init__(self, game_path: str | Path, max_expansions: int = 200_000, use_heuristic: bool = True):
        self.game_path = Path(game_path)
        self.use_heuristic = bool(use_heuristic)  # False: uniform-cost search on the same actions (for checks)
        self.scratch = FastEngine(self.game_path)
        self.game = g = self.scratch.game
        self.spec = goal_spec(g)
        self.max_expansions = int(max_expansions)
        self.stats = PlannerStats()
        self.cache: dict[Key, tuple[float, str | None, Key | None]] = {}
        spec = self.spec
        self.cands = spec.candidates
        self.cand_set = frozenset(spec.candidates)
        self.lamps = tuple(lamp for lamp in spec.lamps if lamp not in self.cand_set)
        self.tracked = self.cands + self.lamps
        self.index = {o: i for i, o in enumerate(self.tracked)}
        self.lamp_index = {lamp: i for i, lamp in enumerate(spec.lamps)}
        self.rloc = g.recep_loc
        self.openable = g.props["openable"]
        self.target_set = frozenset(spec.targets)
        self.target_locs = frozenset(self.rloc[r] for r in spec.targets)
        self.tool_locs = tuple(sorted({self.rloc[r] for r in spec.tools}))
        self.attr_op = ATTR_OPS.get(spec.attr) if spec.attr else None
        self.fixed_locs = self.target_locs | frozenset(self.tool_locs)
        # receptacles (in textworld's list order) that accept each object type: for put-down locations
        self.accepting: dict[str, tuple[str, ...]] = {}
        self._extra: str | None = None  # a non-goal object held at the search root, and where it was then
        self._extra_root: frozenset = frozenset()
        self._cur: Key | None = None

    # ----------------------------------------------------------------------------------------------- state <-> engine
    def key_of(self, engine: FastEngine) -> Key:
        """The planner's key of a live fast engine's state."""
        return self._read(engine)

    def _read(self, e: FastEngine) -> Key:
        f = e.facts
        holds = f["holds"]
        held = next(iter(holds))[1] if holds else None
        where: list[list[str]] = [[] for _ in self.tracked]
        index = self.index
        for o, r in f["inreceptacle"]:
            i = index.get(o)
            if i is not None:
                where[i].append(r)
        attr = self.spec.attr
        attrs = tuple((c,) in f[attr] for c in self.cands) if attr else ()
        tog = tuple((lamp,) in f["istoggled"] for lamp in self.spec.lamps)
        return (e.loc, held, tuple(frozenset(w) for w in where), frozenset(r for (r,) in f["opened"]), attrs, tog)

    def _start(self, engine: FastEngine) -> Key:
        """Load the scratch engine with a copy of `engine`'s state (the search root)."""
        s = self.scratch
        s.facts = {**self.game.static, **{p: set(engine.facts[p]) for p in DYNAMIC}}
        s.negated = set()
        s.loc = engine.loc
        s.contents = {r: set(objs) for r, objs in engine.contents.items()}
        key = self._read(s)
        held = key[1]
        self._extra = held if held is not None and held not in self.index else None
        self._extra_root = frozenset(r for o, r in s.facts["inreceptacle"] if o == self._extra)
        self._cur = key
        return key

    def _place(self, o: str, have: frozenset, want: frozenset) -> None:
        s = self.scratch
        f = s.facts
        for r in have - want:
            f["inreceptacle"].discard((o, r))
            s.contents.get(r, set()).discard(o)
            f["objectatlocation"].discard((o, self.rloc[r]))
        for r in want - have:
            f["inreceptacle"].add((o, r))
            s.contents.setdefault(r, set()).add(o)
            f["objectatlocation"].add((o, self.rloc[r]))

    def _load(self, key: Key) -> None:
        """Put the scratch engine in the state of `key` (a diff against the state it is in)."""
        cur = self._cur
        if cur == key:
            return
        s = self.scratch
        f = s.facts
        loc, held, pos, opened, attrs, tog = key
        if s.loc != loc:
            f["atlocation"] = {(self.game.agent, loc)}
            s.loc = loc
        if cur[1] != held:
            a = self.game.agent
            f["holds"] = {(a, held)} if held is not None else set()
            f["holdsany"] = {(a,)} if held is not None else set()
            x = self._extra
            if x is not None:  # the non-goal object held at the root: in its root receptacles while held, else parked
                now = frozenset(r for o, r in f["inreceptacle"] if o == x)
                want = self._extra_root if held == x else (now if cur[1] != x else now | {self.game.all_receps[0]})
                self._place(x, now, want)
        for o, have, want in zip(self.tracked, cur[2], pos):
            if have != want:
                self._place(o, have, want)
        if cur[3] != opened:
            f["opened"] = {(r,) for r in opened}
        attr = self.spec.attr
        if attr and cur[4] != attrs:
            rows = f[attr]
            for c, on in zip(self.cands, attrs):
                (rows.add if on else rows.discard)((c,))
        if cur[5] != tog:
            rows = f["istoggled"]
            for lamp, on in zip(self.spec.lamps, tog):
                (rows.add if on else rows.discard)((lamp,))
        self._cur = key

    def _after_apply(self) -> Key:
        self._cur = key = self._read(self.scratch)
        return key

    # ------------------------------------------------------------------------------------------------------ actions
    def _accepting(self, obj: str) -> tuple[str, ...]:
        t = self.game.otype.get(obj)
        if t not in self.accepting:
            g = self.game
            self.accepting[t] = tuple(r for r in g.all_receps if (g.rtype.get(r), t) in g.can_contain)
        return self.accepting[t]

    def _successors(self, key: Key) -> list[tuple[str, tuple]]:
        """The (command, grounded action) pairs worth trying in `key` (module docstring), engine order."""
        self._load(key)
        s = self.scratch
        texts = s.admissible_actions()  # the engine's applicable grounded actions, also kept in s.commands
        actions = s.commands
        loc, held, pos, opened, _, tog = key
        recep_of_tracked = set().union(*pos)
        allowed = set(self.fixed_locs)
        allowed.update(self.rloc[r] for r in recep_of_tracked)
        if held is not None:  # one put-down location of each kind among the others
            found_open = found_closed = False
            for r in self._accepting(held):
                where = self.rloc[r]
                if where in allowed or where == loc:
                    continue
                is_open = r not in self.openable or r in opened
                if is_open and not found_open:
                    allowed.add(where)
                    found_open = True
                elif not is_open and not found_closed:
                    allowed.add(where)
                    found_closed = True
                if found_open and found_closed:
                    break
        openable_ok = self.target_set | recep_of_tracked
        accept = set(self._accepting(held)) if held is not None else set()
        out, gone_to = [], set()
        for text in texts:
            act = actions[text]
            kind = act[0]
            if kind == "goto":
                where = self.rloc[act[1]]
                if where in allowed and where not in gone_to:
                    gone_to.add(where)
                    out.append((text, act))
            elif kind == "take":
                if act[1] in self.cand_set:
                    out.append((text, act))
            elif kind == "put":
                out.append((text, act))
            elif kind == "open":
                if act[1] in openable_ok or act[1] in accept:
                    out.append((text, act))
            elif kind == self.attr_op:
                if act[1] in self.cand_set:
                    out.append((text, act))
            elif kind == "toggle":
                i = self.lamp_index.get(act[1])
                if i is not None and not tog[i]:
                    out.append((text, act))
        return out

    # ---------------------------------------------------------------------------------------------------- heuristic
    def heuristic(self, key: Key) -> float:
        """An admissible lower bound on V*(key) (module docstring); 0 only when the goal's condition holds.

        An object may sit in several receptacles at once (ALFWorld's initial facts, e.g. a pan on two stove burners; a
        take removes only the one it is taken from), so each object's place is a set; taking it costs the cheapest of
        them."""
        if not self.use_heuristic:
            return 0.0
        spec = self.spec
        opened, openable = key[3], self.openable

        def closed(r: str | None) -> int:
            return 1 if r is not None and r in openable and r not in opened else 0

        if spec.kind == "look":
            return self._h_look(key, closed)
        if spec.n_objects == 1:
            return self._h_one(key, closed)
        return self._h_two(key, closed)

    def _pickups(self, key: Key, i: int, closed) -> list[tuple[int, str, str | None]]:
        """Ways to have candidate i in hand: (cost, location after, receptacle taken from) -- cost counts freeing the
        hands, going to the object, opening its receptacle and the take; [] if it cannot be had."""
        loc, held, pos = key[0], key[1], key[2]
        c = self.tracked[i]
        if held == c:
            return [(0, loc, None)]
        drop = 1 if held is not None else 0
        rloc = self.rloc
        return [(drop + 1 + (rloc[r] != loc) + closed(r), rloc[r], r) for r in pos[i]]

    def _h_look(self, key: Key, closed) -> float:
        pos, tog = key[2], key[5]
        lamp_locs = [(self.rloc[r], on) for lamp, on in zip(self.spec.lamps, tog) for r in pos[self.index[lamp]]]
        best = INF
        for i in range(len(self.cands)):
            for cost, x, _ in self._pickups(key, i, closed):
                for ll, on in lamp_locs:
                    best = min(best, cost + (not on) + (ll != x))
        return best

    def _h_one(self, key: Key, closed) -> float:
        pos, attrs = key[2], key[4]
        rloc = self.rloc
        targets = self.target_set
        open_target_locs = {rloc[t] for t in self.spec.targets if not closed(t)}
        any_open = bool(open_target_locs)

        def put_cost(x: str, came_from: str | None) -> int:
            """1 (put) + min over goal receptacles T of [T elsewhere] + [T closed and not the one just opened]."""
            from_target = came_from is not None and came_from in targets
            if x in open_target_locs or (from_target and rloc[came_from] == x):
                return 1
            if x in self.target_locs or any_open or from_target:
                return 2
            return 3

        need_attr = self.spec.attr is not None
        for i in range(len(self.cands)):
            if (attrs[i] if need_attr else True) and not pos[i].isdisjoint(targets):
                return 0
        best = INF
        for i in range(len(self.cands)):
            ok = attrs[i] if need_attr else True
            for cost, x, came_from in self._pickups(key, i, closed):
                # still in a goal receptacle after the take (another of its places): no put needed
                stays = not (pos[i] - {came_from}).isdisjoint(targets)
                if ok:
                    cost += 0 if stays else put_cost(x, came_from)
                elif self.tool_locs:
                    cost += 1 + min((tl != x) + (0 if stays else put_cost(tl, came_from)) for tl in self.tool_locs)
                else:
                    continue
                best = min(best, cost)
        return best

    def _h_two(self, key: Key, closed) -> float:
        held, pos = key[1], key[2]
        rloc = self.rloc
        n = len(self.cands)
        best = INF
        seen_empty: set[tuple[str, int]] = set()
        pickups = [self._pickups(key, i, closed) for i in range(n)]
        for t in self.spec.targets:
            inside = [i for i in range(n) if t in pos[i]]
            if len(inside) >= 2:
                return 0
            lt, ct = rloc[t], closed(t)
            if not inside:  # goal receptacles holding no candidate are interchangeable within (location, closed)
                if (lt, ct) in seen_empty:
                    continue
                seen_empty.add((lt, ct))
            others = [i for i in range(n) if t not in pos[i]]
            if inside:
                for i in others:
                    for cost, x, r in pickups[i]:
                        best = min(best, cost + 1 + (lt != x) + (ct if r != t else 0))
                continue
            for a in others:
                for cost_a, xa, ra in pickups[a]:
                    for b in others:
                        if b == a or held == self.cands[b]:  # a held object is delivered first
                            continue
                        for rb in pos[b]:
                            opens = {r for r in (ra, rb, t) if r is not None and closed(r)}
                            cost = (
                                cost_a - closed(ra) + len(opens) + 1 + 2
                            )  # (a's part without its open), opens, take b, puts
                            seq = (xa, lt, rloc[rb], lt)
                            cost += sum(1 for u, v in zip(seq, seq[1:]) if u != v)
                            best = min(best, cost)
        return best

    # ------------------------------------------------------------------------------------------------------- search
    def _search(self, root: Key) -> float:
        """A* from the loaded root; fills the cache along the optimal path found; returns V*(root)."""
        t0 = time.perf_counter()
        self.stats.searches += 1
        cache = self.cache
        best_g: dict[Key, int] = {root: 0}
        parent: dict[Key, tuple[Key, str] | None] = {root: None}
        hval: dict[Key, float] = {}

        def estimate(key: Key) -> tuple[float, bool]:
            """(h, final): final = exact (cached V*, or 0 at a goal the engine confirms)."""
            hit = cache.get(key)
            if hit is not None:
                return hit[0], True
            h = self.heuristic(key)
            if h == 0:
                if self.scratch.won():
                    return 0.0, True
                h = 1.0
            return h, False

        self._load(root)
        h0, final0 = estimate(root)
        heap = [(h0, h0, 0, 0, root, final0)]
        tie = 0
        expanded = 0
        end: Key | None = None
        while heap:
            _, _, _, g, key, final = heapq.heappop(heap)
            if g > best_g.get(key, INF):
                continue
            if final:
                end = key
                break
            expanded += 1
            if expanded > self.max_expansions:
                raise PlannerError(
                    f"V* search of {self.game_path} expanded more than {self.max_expansions} nodes; "
                    "raise max_expansions"
                )
            for text, act in self._successors(key):
                self._load(key)
                self.scratch.apply(act)
                child = self._after_apply()
                g2 = g + 1
                if g2 >= best_g.get(child, INF):
                    continue
                best_g[child] = g2
                parent[child] = (key, text)
                if child not in hval:
                    hval[child] = estimate(child)
                hc, fin = hval[child]
                tie -= 1
                heapq.heappush(heap, (g2 + hc, hc, tie, g2, child, fin))
        self.stats.expanded += expanded
        if end is None:  # every state reached is a dead end too (a goal reachable from one would be reachable here)
            for key in best_g:
                cache[key] = (INF, None, None)
            self.stats.seconds.append(time.perf_counter() - t0)
            return INF
        path: list[tuple[Key, str]] = []
        node = end
        while parent[node] is not None:
            prev, text = parent[node]
            path.append((prev, text))
            node = prev
        path.reverse()
        tail = cache[end][0] if end in cache else 0.0
        if end not in cache:
            cache[end] = (0.0, None, None)
        n = len(path)
        for i, (k, text) in enumerate(path):
            nxt = path[i + 1][0] if i + 1 < n else end
            cache[k] = (n - i + tail, text, nxt)
        self.stats.seconds.append(time.perf_counter() - t0)
        return n + tail

    # ---------------------------------------------------------------------------------------------------------- API
    def value_of_key(self, key: Key, engine: FastEngine) -> float:
        self.stats.queries += 1
        hit = self.cache.get(key)
        if hit is not None:
            self.stats.hits += 1
            return hit[0]
        root = self._start(engine)
        return self._search(root)

    def value(self, engine: FastEngine) -> float:
        """V* of `engine`'s current state: the fewest commands to win from here (math.inf if unreachable)."""
        t0 = time.perf_counter()
        v = self.value_of_key(self._read(engine), engine)
        self.stats.call_seconds.append(time.perf_counter() - t0)
        return v

    def best_action(self, engine: FastEngine) -> str | None:
        """A command on an optimal path from `engine`'s state (None at the goal or when the goal is unreachable)."""
        t0 = time.perf_counter()
        key = self._read(engine)
        self.value_of_key(key, engine)
        self.stats.call_seconds.append(time.perf_counter() - t0)
        return self.cache[key][1]

    def plan(self, engine: FastEngine) -> list[str]:
        """The optimal command list from `engine`'s state (empty at the goal); the engine is not changed."""
        key = self._read(engine)
        if self.value_of_key(key, engine) == INF:
            raise PlannerError(f"the goal of {self.game_path} cannot be reached from this state")
        out = []
        while True:
            _, text, nxt = self.cache[key]
            if text is None:
                return out
            out.append(text)
            key = nxt


def oracle_progress(v_before: float, v_after: float) -> float:
    """q_t = V*(s_t) - V*(s_{t+1}): 1 on an optimal path, 0 or less otherwise (algorithms.md, "Measuring credit").
    A step between two states from which the goal cannot be reached has q = 0; into such a state, -inf."""
    if v_before == INF and v_after == INF:
        return 0.0
    return float(v_before - v_after)


def exhaustive_optimum(engine: FastEngine, max_states: int = 200_000) -> int | None:
    """The fewest commands from `engine`'s state to a win by breadth-first search over the *full* state with *every*
    admissible command (no pruning, no heuristic, no cache): the state is every dynamic fact but `checked` (read by no
    precondition nor goal) and textworld's `not_` facts (text only). None when more than `max_states` states were seen
    before a win. `engine` is not changed."""
    e = FastEngine(engine.game_path)
    preds = tuple(p for p in DYNAMIC if p != "checked")

    def full_key(eng: FastEngine) -> tuple:
        return (eng.loc,) + tuple(frozenset(eng.facts[p]) for p in preds)

    def load(key: tuple) -> None:
        e.loc = key[0]
        for p, rows in zip(preds, key[1:]):
            e.facts[p] = set(rows)
        e.contents = {}
        for o, r in e.facts["inreceptacle"]:
            e.contents.setdefault(r, set()).add(o)

    start = full_key(engine)
    load(start)
    if e.won():
        return 0
    seen = {start}
    frontier = [start]
    depth = 0
    while frontier:
        depth += 1
        nxt = []
        for key in frontier:
            load(key)
            texts = e.admissible_actions()
            actions = dict(e.commands)
            for text in texts:
                load(key)
                e.apply(actions[text])
                if e.won():
                    return depth
                child = full_key(e)
                if child not in seen:
                    seen.add(child)
                    if len(seen) > max_states:
                        return None
                    nxt.append(child)
        frontier = nxt
    return None
