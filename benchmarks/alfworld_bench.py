"""ALFWorld engine speed: steps/s and resets/s of the fast engine and the textworld reference, side by side.

Both engines play the same games and the same command sequences (each game's walkthrough followed by a seeded random
walk over admissible commands, recorded once with the fast engine). Three figures per engine:
- steps/s: `step(command)` calls (observation + admissible commands + win check);
- resets/s: `reset()` of an already loaded game;
- loads/s: building the engine from the game file and resetting it (fast: its parse cache cleared first).

    .venv/bin/python benchmarks/alfworld_bench.py --games 6 --walk-steps 40
    .venv/bin/python benchmarks/alfworld_bench.py --quick     # 1 game of tests/fixtures, 3 random steps (seconds)

Measured with those defaults (6 games, one per task type; 2-core machine under load): fast 6,094 steps/s vs textworld
9.2 (661x); resets 8,026/s vs 0.74/s.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from scpo.envs.alfworld import TASK_TYPES, expert_actions, game_file, list_tasks
from scpo.envs.alfworld.env import make_engine
from scpo.envs.alfworld.fast_engine import clear_caches

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "alfworld"


def pick_games(split: str, n: int, data_root: str) -> list[str]:
    """n task ids cycling over the six task types (first game of each type, then the second, ...)."""
    by_type = {t: [i for i in list_tasks(split, data_root) if i.split("/")[1].startswith(t)] for t in TASK_TYPES}
    picked, k = [], 0
    while len(picked) < n and k < max(len(v) for v in by_type.values()):
        picked += [by_type[t][k] for t in TASK_TYPES if k < len(by_type[t])]
        k += 1
    return picked[:n]


def record_commands(task_id: str, data_root: str, walk_steps: int, seed: int) -> list[list[str]]:
    """[walkthrough, random walk] command lists for one game (the walk stops early on a win)."""
    engine = make_engine(game_file(task_id, data_root), "fast")
    _, admissible, _ = engine.reset()
    rng, walk = random.Random(seed), []
    for _ in range(walk_steps):
        cmd = rng.choice(admissible)
        walk.append(cmd)
        _, admissible, won = engine.step(cmd)
        if won:
            break
    return [expert_actions(task_id, data_root), walk]


def measure(
    engine_name: str, tasks: list[str], plans: dict[str, list[list[str]]], data_root: str, resets_per_game: int
) -> dict[str, float]:
    load_s = reset_s = step_s = 0.0
    n_steps = n_resets = 0
    for task in tasks:
        path = game_file(task, data_root)
        if engine_name == "fast":
            clear_caches()
        t0 = time.perf_counter()
        engine = make_engine(path, engine_name)
        engine.reset()
        load_s += time.perf_counter() - t0
        for _ in range(resets_per_game):
            t0 = time.perf_counter()
            engine.reset()
            reset_s += time.perf_counter() - t0
            n_resets += 1
        for commands in plans[task]:
            engine.reset()
            for cmd in commands:
                t0 = time.perf_counter()
                engine.step(cmd)
                step_s += time.perf_counter() - t0
                n_steps += 1
    return {
        "steps": n_steps,
        "steps_per_s": n_steps / step_s,
        "resets_per_s": n_resets / reset_s,
        "loads_per_s": len(tasks) / load_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="valid_seen")
    parser.add_argument("--games", type=int, default=6)
    parser.add_argument("--walk-steps", type=int, default=40)
    parser.add_argument("--resets-per-game", type=int, default=2)
    parser.add_argument("--data-root", default=None, help="default: data (--quick: the games in tests/fixtures)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="1 game, 3 random steps, 1 reset: seconds")
    args = parser.parse_args()
    if args.quick:
        args.games, args.walk_steps, args.resets_per_game = 1, 3, 1
    if args.data_root is None:
        args.data_root = str(FIXTURES if args.quick else "data")

    tasks = pick_games(args.split, args.games, args.data_root)
    plans = {t: record_commands(t, args.data_root, args.walk_steps, args.seed + i) for i, t in enumerate(tasks)}
    fast = measure("fast", tasks, plans, args.data_root, resets_per_game=50 * args.resets_per_game)
    ref = measure("textworld", tasks, plans, args.data_root, resets_per_game=args.resets_per_game)
    print(f"ALFWorld engines on {len(tasks)} {args.split} games, {fast['steps']} identical steps each")
    print(f"{'':12s}{'steps/s':>12s}{'resets/s':>12s}{'loads/s':>12s}")
    for name, r in (("fast", fast), ("textworld", ref)):
        print(f"{name:12s}{r['steps_per_s']:12.1f}{r['resets_per_s']:12.2f}{r['loads_per_s']:12.2f}")
    print(
        f"{'ratio':12s}{fast['steps_per_s'] / ref['steps_per_s']:11.0f}x"
        f"{fast['resets_per_s'] / ref['resets_per_s']:11.0f}x"
        f"{fast['loads_per_s'] / ref['loads_per_s']:11.0f}x"
    )


if __name__ == "__main__":
    main()
