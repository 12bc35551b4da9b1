"""Sokoban's rules on a state: the room (`Room`: walls and targets, fixed), the state (`State`: the room, the player's
cell, the boxes' cells), the four moves and their rewards (`step`), and the text grid the agent sees (`render`).

Cells are numbered row-major, `cell = row * width + col`; every room has walls all round its border, so a move's cell
arithmetic never leaves the grid. The rules are gym-sokoban's push actions (`SokobanEnv._push` / `_move`, the actions
1-4 that verl-agent plays):

    next = player + delta(action)          up -width, down +width, left -1, right +1
    next holds a box, the cell beyond is neither wall nor box  -> the box moves beyond, the player to next
    next is free floor or target                                -> the player moves to next
    otherwise (a wall; a box against a wall or a box)           -> nothing moves (the step still counts)

Rewards: `reward="success"` gives SUCCESS_REWARD (10.0) on the winning step, else 0.0 (the suite's convention, as
ALFWorld, WebShop and the corridor); `reward="verl_agent"` gives gym-sokoban's, which verl-agent trains on:
-0.1 every step, +1 when a step raises the number of boxes on targets, -1 when it lowers it, +10 when all are on
targets (added in that order, as `SokobanEnv._calc_reward`). The grid is verl-agent's text rendering (`tiny_rgb_array`
mode of its `SokobanEnv.render`): one line per row, each cell a symbol between spaces and a tab (`" # \\t"`), rows
joined by newlines. docs/environments.md, "Sokoban".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

__all__ = [
    "ACTIONS",
    "NO_OP",
    "REWARDS",
    "SUCCESS_REWARD",
    "SYMBOLS",
    "Room",
    "State",
    "room_from_text",
    "render",
    "step",
    "is_won",
    "boxes_on_target",
]

ACTIONS = ("up", "down", "left", "right")  # verl-agent's actions 1-4, in its order (its prompt lists them so)
NO_OP = "still"  # verl-agent's action 0: what an answer that names no move plays (nothing moves)
REWARDS = ("success", "verl_agent")
SUCCESS_REWARD = 10.0
STEP_PENALTY, BOX_ON_TARGET, BOX_OFF_TARGET, ALL_ON_TARGET = -0.1, 1.0, -1.0, 10.0  # gym-sokoban's SokobanEnv.__init__
# verl-agent's GRID_LOOKUP: the symbol of each kind of cell
SYMBOLS = {
    "wall": "#",
    "floor": "_",
    "target": "O",
    "box_on_target": "√",
    "box": "X",
    "player": "P",
    "player_on_target": "S",
}
_CELL = " {} \t"


@dataclass(frozen=True)
class Room:
    """The fixed part of a level: its size, walls and targets (sets of cell numbers)."""

    height: int
    width: int
    walls: frozenset[int]
    targets: frozenset[int]

    def __post_init__(self) -> None:
        border = {c for c in range(self.height * self.width) if self._on_border(c)}
        if not border <= self.walls:
            raise ValueError(
                f"a Sokoban room needs walls all round its border (open cells {sorted(border - self.walls)})"
            )
        if self.walls & self.targets:
            raise ValueError(f"targets on walls: cells {sorted(self.walls & self.targets)}")
        object.__setattr__(self, "_hash", hash((self.height, self.width, self.walls, self.targets)))

    def __hash__(self) -> int:  # computed once: every state hashes its room
        return self._hash

    def _on_border(self, cell: int) -> bool:
        row, col = divmod(cell, self.width)
        return row in (0, self.height - 1) or col in (0, self.width - 1)

    def delta(self, action: str) -> int:
        """The cell offset of a move."""
        return (-self.width, self.width, -1, 1)[ACTIONS.index(action)]


class State(NamedTuple):
    """A Sokoban state: the room, the player's cell and the boxes' cells (sorted). Hashable; two states are equal when
    their rooms, players and boxes are."""

    room: Room
    player: int
    boxes: tuple[int, ...]


def is_won(state: State) -> bool:
    """Every box on a target (as many boxes as targets)."""
    return all(b in state.room.targets for b in state.boxes)


def boxes_on_target(state: State) -> int:
    return sum(b in state.room.targets for b in state.boxes)


def step(
    state: State, action: str, reward: Literal["success", "verl_agent"] = "success"
) -> tuple[State, float, bool, bool]:
    """(next state, reward, done, won) of playing `action` in `state` (a state not yet won). `action` not one of
    ACTIONS (NO_OP, an invalid answer's text): nothing moves, reward 0.0 (verl-agent's action 0). `done` is the game's
    end (won); the episode's step limit is the environment's, not the state's."""
    room, player, boxes = state
    if action not in ACTIONS:
        return state, 0.0, False, False
    d = room.delta(action)
    nxt = player + d
    if nxt in boxes:
        beyond = nxt + d
        if beyond in room.walls or beyond in boxes:
            new = state
        else:
            new = State(room, nxt, tuple(sorted(beyond if b == nxt else b for b in boxes)))
    elif nxt in room.walls:
        new = state
    else:
        new = State(room, nxt, boxes)
    won = is_won(new)
    if reward == "success":
        return new, SUCCESS_REWARD if won else 0.0, won, won
    if reward != "verl_agent":
        raise ValueError(f"unknown Sokoban reward {reward!r}; allowed: {', '.join(REWARDS)}")
    r = STEP_PENALTY
    before, after = boxes_on_target(state), boxes_on_target(new)
    if after > before:
        r += BOX_ON_TARGET
    elif after < before:
        r += BOX_OFF_TARGET
    if won:
        r += ALL_ON_TARGET
    return new, r, won, won


def _kind(state: State, cell: int) -> str:
    room = state.room
    if cell in room.walls:
        return "wall"
    on_target = cell in room.targets
    if cell == state.player:
        return "player_on_target" if on_target else "player"
    if cell in state.boxes:
        return "box_on_target" if on_target else "box"
    return "target" if on_target else "floor"


def render(state: State) -> str:
    """The text grid verl-agent shows (module docstring): `" # \\t # \\t ..."` one row per line."""
    w = state.room.width
    return "\n".join(
        "".join(_CELL.format(SYMBOLS[_kind(state, r * w + c)]) for c in range(w)) for r in range(state.room.height)
    )


def room_from_text(text: str) -> State:
    """The state drawn by `text`: one row per line, one symbol per cell (SYMBOLS; whitespace between symbols is
    ignored), so a rendered grid and a compact drawing (`"#####"`) both read. ValueError on an unknown symbol, ragged
    rows, not exactly one player, as many boxes as targets (at least one), or an open border."""
    by_symbol = {s: k for k, s in SYMBOLS.items()}
    rows = [[ch for ch in line if not ch.isspace()] for line in text.strip("\n").split("\n")]
    rows = [r for r in rows if r]
    if not rows or len({len(r) for r in rows}) != 1:
        raise ValueError(f"a Sokoban room is a rectangle of symbols; got rows of lengths {[len(r) for r in rows]}")
    width = len(rows[0])
    walls, targets, boxes, players = set(), set(), [], []
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            if ch not in by_symbol:
                raise ValueError(f"unknown Sokoban symbol {ch!r} at row {r}, column {c}; known: {''.join(by_symbol)}")
            kind, cell = by_symbol[ch], r * width + c
            if kind == "wall":
                walls.add(cell)
            if kind in ("target", "box_on_target", "player_on_target"):
                targets.add(cell)
            if kind in ("box", "box_on_target"):
                boxes.append(cell)
            if kind in ("player", "player_on_target"):
                players.append(cell)
    if len(players) != 1:
        raise ValueError(f"a Sokoban room has one player; found {len(players)}")
    if not boxes or len(boxes) != len(targets):
        raise ValueError(
            f"a Sokoban room has as many boxes as targets (at least one); found {len(boxes)} and {len(targets)}"
        )
    room = Room(len(rows), width, frozenset(walls), frozenset(targets))
    return State(room, players[0], tuple(sorted(boxes)))
