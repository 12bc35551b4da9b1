"""Sokoban's rooms and exact solver, per split: the time to generate a room and to solve it (every reachable state and
its V*), the size of the state space, V* from reset, the share of reachable states that are deadlocks, and the success
of a uniformly random policy within the step limit (exact, by dynamic programming over the state space).

    python benchmarks/sokoban_bench.py                 # every split
    python benchmarks/sokoban_bench.py --quick         # 20 rooms of train and of train_hard

Times are process CPU seconds (`time.process_time`) per room, the solver's on an empty cache; `solve / generate` is the
ratio of the two measured side by side on the same rooms.

Measured (`python benchmarks/sokoban_bench.py`, at the commit that added it, on the 2-core shared machine under a load
average of 13: the times are indicative; the other columns do not depend on the machine):

| split | rooms | gen ms | solve ms | solve/gen | states mean (max) | V* min-max (mean) | V* > 15 | dead | random wins |
|---|---|---|---|---|---|---|---|---|---|
| train | 300 | 0.69 | 0.34 | 0.50 | 73 (227) | 1-10 (3.9) | 0 | 0.49 | 0.23 |
| valid_seen | 50 | 0.62 | 0.26 | 0.42 | 66 (198) | 1-9 (3.8) | 0 | 0.51 | 0.24 |
| valid_unseen | 50 | 0.70 | 0.34 | 0.48 | 92 (227) | 1-9 (4.4) | 0 | 0.48 | 0.20 |
| train_hard | 300 | 1.49 | 2.35 | 1.58 | 442 (1666) | 2-16 (7.6) | 5 | 0.73 | 0.06 |
| valid_hard | 50 | 2.43 | 3.53 | 1.45 | 562 (1666) | 3-16 (7.9) | 1 | 0.74 | 0.04 |

dead: the mean over rooms of the share of reachable states with V* = inf; random wins: the mean over rooms of the
probability that the uniform policy wins within 15 moves.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from scpo.envs import sokoban
from scpo.envs.sokoban.generation import generate


def random_policy_success(space: sokoban.StateSpace, steps: int) -> float:
    """P(win within `steps` moves from the start) of the policy that plays each of the four moves with probability
    1/4: p_0 = won, p_k = won + (1 - won) mean_a p_{k-1}(successor(s, a))."""
    p = space.won.astype(float)
    live = ~space.won
    for _ in range(steps):
        nxt = p.copy()
        nxt[live] = p[space.successor[live]].mean(axis=1)
        p = np.where(space.won, 1.0, nxt)
    return float(p[0])


def measure(split: str, limit: int | None, max_steps: int) -> dict:
    tasks = sokoban.list_tasks(split, limit=limit)
    seeds = [sokoban.parse_task_id(t) for t in tasks]
    t0 = time.process_time()
    starts = [generate(seed, h, w, boxes) for h, w, boxes, seed in seeds]
    gen = (time.process_time() - t0) / len(tasks)
    t0 = time.process_time()
    spaces = [sokoban.state_space.__wrapped__(s) for s in starts]  # no cache
    solve = (time.process_time() - t0) / len(tasks)
    v = np.array([s.v_star[0] for s in spaces])
    n = np.array([len(s.states) for s in spaces])
    return {
        "split": split,
        "rooms": len(tasks),
        "generate_ms": round(1e3 * gen, 3),
        "solve_ms": round(1e3 * solve, 3),
        "solve_over_generate": round(solve / gen, 3),
        "states_mean": round(float(n.mean()), 1),
        "states_max": int(n.max()),
        "v_star_min": float(v.min()),
        "v_star_max": float(v.max()),
        "v_star_mean": round(float(v.mean()), 2),
        "v_star_counts": np.bincount(v.astype(int)).tolist(),
        "v_star_beyond_step_limit": int((v > max_steps).sum()),
        "deadlocked_state_share": round(float(np.mean([np.isinf(s.v_star).mean() for s in spaces])), 3),
        "random_policy_success": round(float(np.mean([random_policy_success(s, max_steps) for s in spaces])), 3),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 rooms of train and of train_hard")
    parser.add_argument("--max-steps", type=int, default=sokoban.DEFAULT_MAX_STEPS)
    args = parser.parse_args(argv)
    splits = ["train", "train_hard"] if args.quick else list(sokoban.SPLITS)
    rows = [measure(split, 20 if args.quick else None, args.max_steps) for split in splits]
    for row in rows:
        print(json.dumps(row))
    return rows


if __name__ == "__main__":
    main()
