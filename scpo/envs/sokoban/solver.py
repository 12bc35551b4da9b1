"""The exact solver: every state reachable from a start state, breadth first, and V* of each by a backward
breadth-first search from the won states.

    V*(s) = 0                                  s won
    V*(s) = 1 + min_a V*(step(s, a))           otherwise (every step costs 1; a move into a wall is a step too)
    V*(s) = inf                                no sequence of moves wins from s: a deadlock (a box in a corner
                                               off target, two boxes side by side against a wall, ...)

`StateSpace` is the reachable graph as arrays (a successor per state and action, in ACTIONS order), the input of exact
dynamic programming over a policy. The planner's oracle progress of a step is q_t = V*(s_t) - V*(s_{t+1}) (potential-
based shaping with the potential -V*: 1 on a step of an optimal path, 0 on a step that changes nothing, -1 on a step
away), -inf on a step into a deadlock, 0 between two deadlocked states (as ALFWorld's planner). The expert plan takes,
in each state, the first action in ACTIONS order whose successor has V* one lower.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from scpo.envs.sokoban.room import ACTIONS, State, render, step
from scpo.envs.sokoban.tasks import initial_state

__all__ = [
    "StateSpace",
    "state_space",
    "optimal_cost",
    "is_deadlock",
    "expert_plan",
    "optimal_action",
    "oracle_progress",
    "label_progress",
]


@dataclass(frozen=True)
class StateSpace:
    """The states reachable from `states[0]`, breadth first.

    states    : tuple of State; `index[state]` its position
    successor : int64 [n, len(ACTIONS)], the state each action leads to; -1 from a won state (the episode ends there)
    won       : bool [n]
    v_star    : float64 [n], V* (inf for a deadlock)
    """

    states: tuple[State, ...]
    index: dict[State, int]
    successor: np.ndarray
    won: np.ndarray
    v_star: np.ndarray

    def value(self, state: State) -> float:
        """V* of a state of this space; KeyError for a state not reachable from its start."""
        return float(self.v_star[self.index[state]])

    def optimal_action(self, state: State) -> str | None:
        """The planner's move in a state of this space: the first action in ACTIONS order whose successor has V* one
        lower (the expert plan's); None in a deadlock (no move leads to a win) and in a won state."""
        k = self.index[state]
        if self.won[k] or self.v_star[k] == math.inf:
            return None
        return next(a for a, nxt in zip(ACTIONS, self.successor[k]) if self.v_star[nxt] == self.v_star[k] - 1)


@lru_cache(maxsize=1024)
def state_space(start: State) -> StateSpace:
    """The reachable states of `start`, their transitions and V* (module docstring); cached per start state. The
    search runs on (player, boxes) pairs with the rules of `room.step` inlined (tests check every transition against
    `step`)."""
    room = start.room
    walls, targets = room.walls, room.targets
    deltas = [room.delta(a) for a in ACTIONS]
    keys = [(start.player, start.boxes)]
    index = {keys[0]: 0}
    successors: list[list[int]] = []
    won: list[bool] = []
    frontier = 0
    while frontier < len(keys):
        player, boxes = keys[frontier]
        frontier += 1
        done = all(b in targets for b in boxes)
        won.append(done)
        if done:
            successors.append([-1] * len(ACTIONS))
            continue
        row = []
        for d in deltas:
            nxt = player + d
            if nxt in boxes:
                beyond = nxt + d
                if beyond in walls or beyond in boxes:
                    key = (player, boxes)
                else:
                    key = (nxt, tuple(sorted(beyond if b == nxt else b for b in boxes)))
            elif nxt in walls:
                key = (player, boxes)
            else:
                key = (nxt, boxes)
            k = index.get(key)
            if k is None:
                k = index[key] = len(keys)
                keys.append(key)
            row.append(k)
        successors.append(row)
    states = tuple(State(room, p, b) for p, b in keys)
    successor = np.array(successors, dtype=np.int64).reshape(len(states), len(ACTIONS))
    won_mask = np.array(won, dtype=bool)
    return StateSpace(
        states, dict(zip(states, range(len(states)))), successor, won_mask, _backward_bfs(successor, won_mask)
    )


def _backward_bfs(successor: np.ndarray, won: np.ndarray) -> np.ndarray:
    """V*: the number of steps to the nearest won state along the successor graph (inf where none is reachable)."""
    n = len(won)
    predecessors: list[list[int]] = [[] for _ in range(n)]
    for s, row in enumerate(successor.tolist()):
        for t in row:
            if t >= 0 and t != s:
                predecessors[t].append(s)
    v = [math.inf] * n
    queue = deque(np.flatnonzero(won).tolist())
    for t in queue:
        v[t] = 0.0
    while queue:
        t = queue.popleft()
        for s in predecessors[t]:
            if v[s] == math.inf:
                v[s] = v[t] + 1.0
                queue.append(s)
    return np.array(v, dtype=np.float64)


def optimal_cost(state: State) -> float:
    """V*(state): the fewest moves that win from `state` (0 once won, inf in a deadlock)."""
    return state_space(state).value(state)


def is_deadlock(state: State) -> bool:
    """No sequence of moves wins from `state`."""
    return optimal_cost(state) == math.inf


def optimal_action(state: State) -> str | None:
    """The planner's move in `state` (`StateSpace.optimal_action`); None in a deadlock and in a won state."""
    return state_space(state).optimal_action(state)


def expert_plan(state: State) -> list[str]:
    """An optimal plan from `state` (V*(state) moves; the first optimal action in ACTIONS order at each state);
    ValueError in a deadlock."""
    space = state_space(state)
    k = 0
    if space.v_star[k] == math.inf:
        raise ValueError(f"no plan wins from a deadlocked state:\n{render(state)}")
    plan = []
    while not space.won[k]:
        plan.append(space.optimal_action(space.states[k]))
        k = int(space.successor[k, ACTIONS.index(plan[-1])])
    return plan


def oracle_progress(v_before: float, v_after: float) -> float:
    """q = V*(s_t) - V*(s_{t+1}); -inf into a deadlock, 0 between two deadlocked states."""
    if v_after == math.inf:
        return 0.0 if v_before == math.inf else -math.inf
    return v_before - v_after


def label_progress(batch, data_root: str | Path = "data"):
    """`batch` (Sokoban rollouts) with its oracle_progress column q_t (`oracle_progress`), each trajectory replayed
    from its task's room; ValueError if a replayed grid differs from the saved next observation."""
    q = np.zeros(batch.n_rows)
    for rows in batch.trajectory_rows():
        task = str(batch.task_id[rows[0]])
        state = initial_state(task)
        space = state_space(state)
        for r in rows:
            nxt = step(state, str(batch.action[r]))[0]
            if render(nxt) != batch.next_observation[r]:
                raise ValueError(
                    f"replay of {task} (trajectory {batch.traj_uid[r]}, step {batch.step[r]}) gave another grid than "
                    "the saved rollout's next observation"
                )
            q[r] = oracle_progress(space.value(state), space.value(nxt))
            state = nxt
    return batch.with_column("oracle_progress", q)
