"""Rooms by reverse play, from a seed: the room verl-agent's `SokobanEnv.reset(seed)` generates (its
`room_utils.generate_room`, gym-sokoban's generator with verl-agent's changes), drawn from the same random streams in
the same order, so a seed gives the same room here and there (tests/envs/test_sokoban_parity.py compares them).

    1. topology: a random walk of `num_steps` steps (int(1.7 (h + w)), gym-sokoban's default) from a random interior
       cell, changing direction with probability 0.35, stamping one of five 3x3 floor masks at each step; border walls.
    2. the player, then each box, on a uniformly drawn free floor cell (numpy's legacy generator); each box starts on
       its own target.
    3. reverse play: a depth-first search (depth `search_depth`, verl-agent's 30) over pulls (the player steps back and
       drags an adjacent box along); the room kept is the first state found with the highest score
       `box swaps x sum of the boxes' Manhattan distances from their targets`, scored 0 while a target is covered.
       Pushing the pulls' reverse solves it: every room is solvable by construction.
    4. up to 4 tries for a room with a positive score; then the player walks 0-3 random steps (with probability 0.8 when
       the boxes moved 1 cell in all, else 0.5; each further step with probability 0.5), verl-agent's addition.

Python's `random` draws steps 1, 3 and 4, numpy's legacy `RandomState` step 2, both seeded with the seed, as
verl-agent's `set_seed` does. A seed whose room cannot be made (too few floor cells; no positive score) is retried
with a seed derived from it by SHA-256 (verl-agent derives it with Python's salted `hash`, which differs per process).
"""

from __future__ import annotations

import hashlib
import random

import numpy as np

from scpo.envs.sokoban.room import Room, State

__all__ = ["generate", "num_gen_steps", "SEARCH_DEPTH", "MAX_EXPLORED"]

SEARCH_DEPTH = 30  # verl-agent's env.sokoban.search_depth
MAX_EXPLORED = 300_000  # the search stops after this many states (gym-sokoban's limit)
P_CHANGE_DIRECTIONS = 0.35
TRIES = 4
# the cell codes of the generator (gym-sokoban's room_utils)
WALL, FLOOR, TARGET, PULLED_BOX, BOX, PLAYER = range(6)
MASKS = (
    ((0, 0, 0), (1, 1, 1), (0, 0, 0)),
    ((0, 1, 0), (0, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (1, 1, 0)),
    ((0, 0, 0), (0, 1, 1), (0, 1, 0)),
)
DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))


def num_gen_steps(height: int, width: int) -> int:
    """The topology walk's length: gym-sokoban's default int(1.7 (h + w)) (20 for 6x6)."""
    return int(1.7 * (height + width))


def generate(seed: int, height: int = 6, width: int = 6, num_boxes: int = 1, search_depth: int = SEARCH_DEPTH) -> State:
    """The initial state of the room of `seed` (module docstring); ValueError for a seed outside [0, 2**32)."""
    if not 0 <= seed < 2**32:
        raise ValueError(f"a Sokoban seed is in [0, 2**32) (numpy's legacy seeding); got {seed}")
    for _ in range(1000):
        made = _generate_once(seed, height, width, num_boxes, search_depth)
        if made is not None:
            return made
        seed = int.from_bytes(hashlib.sha256(f"sokoban retry {seed}".encode()).digest()[:4], "big")
    raise ValueError(f"no {height}x{width} room with {num_boxes} boxes after 1000 seeds")


def _generate_once(seed: int, height: int, width: int, num_boxes: int, search_depth: int) -> State | None:
    rng, np_rng = random.Random(seed), np.random.RandomState(seed)
    score = 0
    for _ in range(TRIES):
        room = _topology(rng, height, width, num_gen_steps(height, width))
        if not _place_player_and_boxes(np_rng, room, num_boxes):
            return None
        structure = [FLOOR if v == PLAYER else v for v in room]
        start = [BOX if v == TARGET else v for v in room]
        state, mapping = _reverse_play(start, structure, width, num_boxes, search_depth)
        state = [BOX if v == PULLED_BOX else v for v in state]
        score = _displacement(mapping, width)
        if score > 0:
            break
    if score == 0:
        return None
    state = _walk_player(rng, state, structure, width, move_probability=0.8 if score == 1 else 0.5)
    walls = frozenset(i for i, v in enumerate(structure) if v == WALL)
    targets = frozenset(i for i, v in enumerate(structure) if v == TARGET)
    boxes = tuple(i for i, v in enumerate(state) if v == BOX)
    return State(Room(height, width, walls, targets), state.index(PLAYER), boxes)


def _topology(rng: random.Random, height: int, width: int, steps: int) -> list[int]:
    """Step 1: the floor cells of a random walk (row-major list of WALL / FLOOR)."""
    level = [[0] * width for _ in range(height)]
    direction = rng.sample(DIRECTIONS, 1)[0]
    row, col = rng.randint(1, height - 1), rng.randint(1, width - 1)
    for _ in range(steps):
        if rng.random() < P_CHANGE_DIRECTIONS:
            direction = rng.sample(DIRECTIONS, 1)[0]
        row = max(min(row + direction[0], height - 2), 1)
        col = max(min(col + direction[1], width - 2), 1)
        mask = rng.sample(MASKS, 1)[0]
        for i in range(3):
            for j in range(3):
                level[row - 1 + i][col - 1 + j] += mask[i][j]
    return [
        FLOOR if level[r][c] > 0 and 0 < r < height - 1 and 0 < c < width - 1 else WALL
        for r in range(height)
        for c in range(width)
    ]


def _place_player_and_boxes(np_rng: np.random.RandomState, room: list[int], num_boxes: int) -> bool:
    """Step 2, in place: the player, then each box on its target; False when there are too few floor cells."""
    free = [i for i, v in enumerate(room) if v == FLOOR]
    if len(free) <= num_boxes + 1:
        return False
    room[free[np_rng.randint(len(free))]] = PLAYER
    for _ in range(num_boxes):
        free = [i for i, v in enumerate(room) if v == FLOOR]
        room[free[np_rng.randint(len(free))]] = TARGET
    return True


def _displacement(mapping: dict[int, int], width: int) -> int:
    """The sum over boxes of the Manhattan distance from their target."""
    total = 0
    for target, at in mapping.items():
        (r0, c0), (r1, c1) = divmod(target, width), divmod(at, width)
        total += abs(r1 - r0) + abs(c1 - c0)
    return total


def _reverse_play(
    start: list[int], structure: list[int], width: int, num_boxes: int, search_depth: int
) -> tuple[list[int], dict[int, int]]:
    """Step 3: the best room of the depth-first search over pulls, and where each target's box went."""
    deltas = (-width, width, -1, 1)  # up, down, left, right
    explored: set[tuple[int, ...]] = set()
    best: dict = {"score": -1, "state": None, "mapping": None}

    def search(state: list[int], mapping: dict[int, int], swaps: int, last_pull: int, ttl: int) -> None:
        ttl -= 1
        if ttl <= 0 or len(explored) >= MAX_EXPLORED:
            return
        key = tuple(state)
        if key in explored:
            return
        score = swaps * _displacement(mapping, width) if state.count(TARGET) == num_boxes else 0
        if score > best["score"]:
            best.update(score=score, state=list(state), mapping=dict(mapping))
        explored.add(key)
        for d in deltas:
            nxt_state, nxt_mapping, pulled = list(state), dict(mapping), last_pull
            player = state.index(PLAYER)
            to = player + d
            if state[to] in (FLOOR, TARGET):
                nxt_state[player], nxt_state[to] = structure[player], PLAYER
                behind = player - d
                if state[behind] in (PULLED_BOX, BOX):
                    nxt_state[player], nxt_state[behind] = PULLED_BOX, structure[behind]
                    for target, at in nxt_mapping.items():
                        if at == behind:
                            nxt_mapping[target], pulled = player, target
            search(nxt_state, nxt_mapping, swaps + (pulled != last_pull), pulled, ttl)

    search(start, {i: i for i, v in enumerate(structure) if v == TARGET}, 0, -1, search_depth)
    return best["state"], best["mapping"]


def _walk_player(rng: random.Random, state: list[int], structure: list[int], width: int, move_probability: float):
    """Step 4: the player walks up to 3 random steps, never back onto a cell it left."""
    if rng.random() > move_probability:
        return state
    state = list(state)
    player = state.index(PLAYER)
    visited = [player]
    for steps in range(1, 4):
        moves = [player + d for d in (-width, width, -1, 1) if state[player + d] in (FLOOR, TARGET)]
        moves = [m for m in moves if m not in visited]
        if not moves:
            break
        to = rng.choice(moves)
        state[player], state[to] = structure[player], PLAYER
        player = to
        visited.append(player)
        if steps >= 3 or rng.random() > 0.5:
            break
    return state
