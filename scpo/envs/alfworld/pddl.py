"""A small PDDL reader for ALFWorld problems: objects, initial facts and the goal formula, and a goal checker.

Names are lower-cased as Fast Downward (textworld's planner backend) does, so ids match the reference engine's facts.
Goal formulas (and, or, not, exists, forall, =, atoms) are checked by a backtracking search that binds quantified
variables from the facts of positive atoms, so a goal costs a few dozen set look-ups instead of an enumeration of all
objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["PddlError", "Problem", "parse_sexpr", "parse_problem", "goal_satisfied", "Facts"]

Facts = dict[str, set[tuple[str, ...]]]  # predicate -> set of argument tuples
_TOKENS = re.compile(r"\(|\)|[^\s()]+")
_COMMENT = re.compile(r";[^\n]*")


class PddlError(ValueError):
    """A PDDL text we cannot read; the message says what and where."""


@dataclass(frozen=True)
class Problem:
    name: str
    objects: dict[str, str]  # id -> type
    init: tuple[tuple[str, ...], ...]  # (predicate, arg1, ...), duplicates removed, file order kept
    goal: object  # nested lists (s-expression)


def parse_sexpr(text: str) -> list:
    """PDDL text -> nested lists of lower-cased tokens (comments removed)."""
    stack: list[list] = [[]]
    for tok in _TOKENS.findall(_COMMENT.sub("", text).lower()):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) == 1:
                raise PddlError("unbalanced ')' in PDDL text")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    if len(stack) != 1:
        raise PddlError(f"PDDL text ends with {len(stack) - 1} unclosed '('")
    return stack[0]


def _typed_list(tokens: list) -> list[tuple[str, str]]:
    """`a b - t1 c - t2` -> [(a, t1), (b, t1), (c, t2)]."""
    out, pending, i = [], [], 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "-":
            if i + 1 >= len(tokens):
                raise PddlError("typed list ends with '-'")
            out += [(name, tokens[i + 1]) for name in pending]
            pending, i = [], i + 2
        else:
            pending.append(tok)
            i += 1
    return out + [(name, "object") for name in pending]


def parse_problem(text: str) -> Problem:
    """Read `(define (problem ...) (:domain ...) (:objects ...) (:init ...) (:goal ...))`."""
    forms = parse_sexpr(text)
    if not forms or not isinstance(forms[0], list) or forms[0][:1] != ["define"]:
        raise PddlError("PDDL problem does not start with (define ...)")
    sections = {f[0]: f[1:] for f in forms[0][1:] if isinstance(f, list) and f}
    missing = [k for k in (":objects", ":init", ":goal") if k not in sections]
    if missing:
        raise PddlError(f"PDDL problem lacks sections {missing}")
    init: dict[tuple[str, ...], None] = {}
    for atom in sections[":init"]:
        if not isinstance(atom, list) or not atom or any(isinstance(a, list) for a in atom):
            raise PddlError(f"unsupported :init entry {atom!r} (only ground atoms)")
        init[tuple(atom)] = None
    name = sections.get("problem", ["?"])[0]
    return Problem(
        name=name, objects=dict(_typed_list(sections[":objects"])), init=tuple(init), goal=sections[":goal"][0]
    )


def _bind(value: str, binding: dict[str, str]) -> str | None:
    """A constant, a bound variable's value, or None for an unbound variable."""
    return binding.get(value) if value.startswith("?") else value


def _solutions(f, b: dict[str, str], facts: Facts, objects_by_type: dict[str, list[str]]) -> Iterator[dict[str, str]]:
    head = f[0]
    if head == "and":
        yield from _conjunction(f[1:], b, facts, objects_by_type)
    elif head == "or":
        for g in f[1:]:
            yield from _solutions(g, b, facts, objects_by_type)
    elif head == "not":
        if next(_solutions(f[1], b, facts, objects_by_type), None) is None:
            yield b
    elif head in ("exists", "forall"):
        names = [n for n, _ in _typed_list(f[1])]
        inner = {k: v for k, v in b.items() if k not in names}
        if head == "exists":
            if next(_solutions(f[2], inner, facts, objects_by_type), None) is not None:
                yield b
        else:  # forall x: g  ==  not exists x: not g, with x ranging over its type
            for combo in _assignments(_typed_list(f[1]), inner, objects_by_type):
                if next(_solutions(f[2], combo, facts, objects_by_type), None) is None:
                    return
            yield b
    elif head == "=":
        x, y = _bind(f[1], b), _bind(f[2], b)
        if x is None or y is None:
            raise PddlError(f"unbound variable in {f!r}")
        if x == y:
            yield b
    else:
        args = [_bind(a, b) for a in f[1:]]
        rows = facts.get(head, ())
        if None not in args:
            if tuple(args) in rows:
                yield b
            return
        for row in rows:
            if len(row) != len(args):
                continue
            new = dict(b)
            for var, want, got in zip(f[1:], args, row):
                if want is None:
                    if new.setdefault(var, got) != got:
                        break
                elif want != got:
                    break
            else:
                yield new


def _assignments(typed, b, objects_by_type):
    if not typed:
        yield b
        return
    (name, typ), rest = typed[0], typed[1:]
    for obj in objects_by_type.get(typ, ()):
        yield from _assignments(rest, {**b, name: obj}, objects_by_type)


def _conjunction(parts, b, facts, objects_by_type):
    # positive atoms first (they bind variables), then the tests that need bound variables
    ordered = sorted(parts, key=lambda g: 2 if g[0] in ("not", "=", "forall", "or") else 1 if g[0] == "exists" else 0)
    if not ordered:
        yield b
        return
    first, rest = ordered[0], ordered[1:]
    for b1 in _solutions(first, b, facts, objects_by_type):
        yield from _conjunction(rest, b1, facts, objects_by_type)


def goal_satisfied(goal, facts: Facts, objects_by_type: dict[str, list[str]]) -> bool:
    """Whether the goal formula holds in `facts` (closed-world)."""
    return next(_solutions(goal, {}, facts, objects_by_type), None) is not None
