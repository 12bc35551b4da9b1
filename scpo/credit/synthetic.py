"""Synthetic rollout batches with repeated observations, for benchmarks, tests and notebook demos (no environment).

Each group walks a small random state graph (`n_states` rooms per task); a trajectory wins when it reaches the goal
state within `max_steps`. Observations repeat across trajectories of a group (GiGPO's anchor states exist), actions name
the target state, a fraction of steps is invalid. Deterministic for a given seed.
"""

from __future__ import annotations

import numpy as np

from scpo.batch import RolloutBatch

__all__ = ["synthetic_batch"]

_PLACES = (
    "kitchen",
    "cabinet",
    "drawer",
    "shelf",
    "countertop",
    "fridge",
    "sinkbasin",
    "desk",
    "sofa",
    "bed",
    "safe",
    "garbagecan",
    "toilet",
    "bathtub",
    "dresser",
    "armchair",
    "sidetable",
    "microwave",
    "stoveburner",
    "laundry",
)
_THINGS = (
    "apple",
    "mug",
    "plate",
    "knife",
    "book",
    "pen",
    "cellphone",
    "pillow",
    "towel",
    "soapbar",
    "candle",
    "vase",
    "keychain",
    "laptop",
    "lettuce",
    "egg",
    "bowl",
    "spoon",
    "watch",
    "creditcard",
    "statue",
    "cloth",
    "potato",
)


def _describe(rng: np.random.Generator, group: int, state: int) -> str:
    """An ALFWorld-like observation: a place and a few objects (distinct states read differently)."""
    things = rng.choice(_THINGS, size=int(rng.integers(1, 5)), replace=False)
    place = f"{_PLACES[int(rng.integers(len(_PLACES)))]} {state + 1}"
    return (
        f"You arrive at the {place}. On the {place}, you see "
        + ", ".join(f"a {t} {int(rng.integers(1, 4))}" for t in things)
        + "."
    )


def synthetic_batch(
    n_groups: int = 16,
    group_size: int = 8,
    max_steps: int = 50,
    n_states: int = 12,
    *,
    p_invalid: float = 0.05,
    success_reward: float = 10.0,
    fixed_length: bool = False,
    seed: int = 0,
) -> RolloutBatch:
    """A RolloutBatch of n_groups x group_size trajectories. `fixed_length=True`: every trajectory runs max_steps
    steps (a win is still reported on its last step), the benchmark's worst case."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {
        k: []
        for k in ("group_id", "traj_id", "step", "reward", "valid", "won", "observation", "action", "next_observation")
    }
    traj = 0
    for g in range(n_groups):
        goal = int(rng.integers(1, n_states))
        succ = rng.integers(0, n_states, size=(n_states, 3))  # 3 exits per state
        rooms = [_describe(rng, g, s) for s in range(n_states)]
        for _ in range(group_size):
            state, won = 0, False
            for t in range(max_steps):
                choice = int(rng.integers(3))
                nxt = int(succ[state, choice])
                last = t == max_steps - 1 or (nxt == goal and not fixed_length)
                won = won or nxt == goal
                cols["group_id"].append(g)
                cols["traj_id"].append(traj)
                cols["step"].append(t)
                cols["observation"].append(rooms[state])
                cols["action"].append(f"go to {rooms[nxt].split('.')[0].removeprefix('You arrive at the ')}")
                cols["next_observation"].append(rooms[nxt])
                cols["valid"].append(bool(rng.random() >= p_invalid))
                cols["reward"].append(success_reward if (last and won) else 0.0)
                state = nxt
                if last:
                    break
            cols["won"].extend([won] * (t + 1))
            traj += 1
    return RolloutBatch.from_columns(**cols)
