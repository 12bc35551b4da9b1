"""benchmarks/sokoban_bench.py in its quick mode, and its exact random-policy success against Monte-Carlo play of the
same policy in the environment."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np

from scpo.envs import sokoban

from helpers import REPO


def _bench():
    spec = importlib.util.spec_from_file_location("sokoban_bench", REPO / "benchmarks" / "sokoban_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_quick_mode_prints_one_row_per_split():
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "sokoban_bench.py"), "--quick"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["split"] for r in rows] == ["train", "train_hard"] and all(r["rooms"] == 20 for r in rows)
    assert all(r["v_star_min"] >= 1 and 0 < r["random_policy_success"] < 1 and r["solve_ms"] > 0 for r in rows)


def test_the_random_policys_exact_success_is_what_monte_carlo_play_finds():
    bench = _bench()
    task = next(t for t in sokoban.list_tasks("valid_unseen") if len(sokoban.expert_actions(t)) == 4)
    exact = bench.random_policy_success(sokoban.state_space(sokoban.initial_state(task)), steps=8)
    rng = np.random.default_rng(0)
    n, wins = 4000, 0
    for _ in range(n):
        env = sokoban.make_env(task, max_steps=8)
        env.reset()
        done, info = False, {}
        while not done:
            _, _, done, info = env.step(sokoban.ACTIONS[rng.integers(4)])
        wins += info["won"]
    se = np.sqrt(exact * (1 - exact) / n)
    assert 0 < exact < 1 and abs(wins / n - exact) < 4 * se
