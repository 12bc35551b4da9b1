"""The reference engine: a game file played by textworld's PDDL environment with ALFWorld's wrappers.

This is how ALFWorld itself builds a text env (`alfworld.agents.environment.alfred_tw_env.AlfredTWEnv.init_env`), minus
the gym batching and the `traj_data.json` lookups: `PddlEnv` + `AlfredDemangler` (object names such as "apple 1") +
`AlfredInfos`, requesting `admissible_commands` and `won` (its speed beside the fast engine's:
benchmarks/alfworld_bench.py).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path

from scpo.envs.alfworld.games import load_game

__all__ = ["TextworldEngine", "memoized_parsers"]


@contextlib.contextmanager
def memoized_parsers() -> Iterator[None]:
    """Inside the block, textworld re-uses its grammar parses: faster steps, the same text.

    textworld parses every command template, grammar rule and condition with tatsu on every step (most of a step).
    Both parsers are pure functions of their input string, so we cache their results by string; the grammar symbols are
    handed out as deep copies because textworld's derivation mutates them. Used by the parity harness (whose CI test
    checks against the plain reference); the patch is undone on exit.
    """
    import textworld.envs.pddl.textgen as textgen
    from textworld.logic import Rule

    parse, parse_query = textgen._parse_and_convert, Rule.__dict__["parse_conjunctive_query"]
    parsed: dict = {}
    queries: dict = {}

    def cached_parse(text, rule_name=None, **kwargs):
        key = (text, rule_name, tuple(sorted(kwargs.items())))
        if key not in parsed:
            parsed[key] = parse(text, rule_name=rule_name, **kwargs)
        return copy.deepcopy(parsed[key])

    def cached_query(cls, expr):
        if expr not in queries:
            queries[expr] = parse_query.__func__(cls, expr)
        return queries[expr]

    textgen._parse_and_convert = cached_parse
    Rule.parse_conjunctive_query = classmethod(cached_query)
    try:
        yield
    finally:
        textgen._parse_and_convert = parse
        Rule.parse_conjunctive_query = parse_query


class TextworldEngine:
    """reset() / step(command) -> (observation, admissible_commands, won), through textworld."""

    def __init__(self, game_path: str | Path):
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        from textworld.envs.pddl import PddlEnv

        game = load_game(game_path)  # clear DataError on a missing or corrupt file before textworld sees it
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        self._env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
        self._env.load(dict(game))
        self.game_path = Path(game_path)

    def reset(self) -> tuple[str, list[str], bool]:
        state = self._env.reset()
        return state.feedback, list(state["admissible_commands"]), bool(state["won"])

    def step(self, command: str) -> tuple[str, list[str], bool]:
        state, _, _ = self._env.step(command)
        return state.feedback, list(state["admissible_commands"]), bool(state["won"])
