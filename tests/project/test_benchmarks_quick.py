"""Every benchmark of `make bench` in its quick mode (`--quick`: smallest sizes, the test fixtures or the data-free
corridor), so none breaks unseen: each exits 0 and prints the figures it exists for, or, where it needs what no test
can have (a pipeline run of the WebShop study, a WebShop checkout), the one line that says so."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from helpers import REPO

BENCHMARKS = sorted(p.name for p in (REPO / "benchmarks").glob("[!_]*.py"))
# per benchmark, what its quick run must print (regular expressions, all of them)
EXPECTED = {
    "alfworld_bench.py": [r"ALFWorld engines on 1 valid_seen games", r"\nratio +\d+x"],
    "checkpoint_io.py": [r"AdamW state of 1M parameters", r"ratio state files / torch: write [\d.]+x"],
    "critic_cost.py": [
        r"--quick: the smoke profile's policy on the corridor",
        r"ratio ppo / grpo: time per iteration [\d.]+x, per collected step [\d.]+x; the critic's share",
        r"critic memory: checkpoint files .* ratio files / plan [\d.]+",
    ],
    "credit_bench.py": [r"difflib / lexical CPU time: [\d.]+x", r"\nlexical +cold"],
    "explorer_bench.py": [r"rollouts: synthetic, quick sizes", r"\nestimator +[\d.]+"],
    "fused_projections.py": [r"--quick: measured on a two-iteration corridor run", r"fused / model's layers: [\d.]+"],
    "import_bench.py": [r"5 iterations of 2 x 4 x 10 steps", r"jsonl: 5 vs 1 iterations: time x[\d.]+"],
    "hindsight_bench.py": [r"16 synthetic rows \(--quick\)", r"largest difference of the values"],
    "memory_plan.py": [r"bfloat16 checkpointing=False .* estimate / measured [\d.]+", r"--quick: .*nothing written"],
    "numerics_pin_cost.py": [r"--quick: the smoke profile's policy on the corridor", r"rl steps/s +pinned .* ratio"],
    "packing.py": [
        r"alfworld: \d+ steps in \d+ micro-batches of 8 \(group size 8",
        r"token positions: real [\d,]+, processed padded [\d,]+ \(padding fraction 0\.\d+\), packed [\d,]+",
        r"packed / padded [\d.]+; largest log-prob difference",
    ],
    "planner_check.py": [r'"games": 2', r'"all_checks_pass": true'],
    "rl_iteration.py": [r"--quick: this checkout vs this checkout", r"corridor +2x2 +\| collect ms/step"],
    "seed_lanes.py": [r"--quick: this checkout on both sides", r"seeds_s +baseline .* current/baseline [\d.]+"],
    "sokoban_bench.py": [r'"split": "train", "rooms": \d+', r'"split": "train_hard"'],
    "sft_step.py": [r"alfworld: \d+ demo steps", r"ratio [\d.]+ \(median over 1 rounds\)"],
    "torch_compile.py": [r"torch.compile backend eager", r"ratio [\d.]+; largest log-prob difference"],
    "webshop_bench.py": [r"--quick, built:", r"expert: score 1.0 on \d+/20 goals", r"random \(warm search cache\)"],
}
RUNS_MISSING = not (REPO / "runs" / "ws_eval_sft_s0" / "eval.json").is_file()
EXPECTED["webshop_cpu_policy.py"] = (
    [r"^webshop_cpu_policy: skipped, no runs/ws_eval_sft_s0/eval.json \(2 of the 2 run files missing\)"]
    if RUNS_MISSING
    else [r"warm start success .* RL: mixed groups"]
)
EXPECTED["webshop_original_parity.py"] = (
    [r"^webshop_original_parity: skipped, no WebShop checkout to compare against"]
    if not os.environ.get("WEBSHOP_REPO")
    else [r"mismatch"]
)


def test_every_benchmark_has_a_quick_run_checked_here():
    assert BENCHMARKS and sorted(EXPECTED) == BENCHMARKS


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCHMARKS)
def test_quick_mode_runs(name):
    env = {**os.environ, "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1"}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), "--quick"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{name} --quick exited {done.returncode}:\n{done.stderr[-3000:]}"
    for pattern in EXPECTED[name]:
        assert re.search(pattern, done.stdout, re.MULTILINE), f"{name}: no {pattern!r} in\n{done.stdout[-3000:]}"
    if name == "credit_bench.py":  # every registered estimator is timed, with what it needs
        from scpo.credit import available_methods

        timed = set(
            re.findall(r"^(\w+)(?: \(lexical scorer\))? +[\d.]+ +[\d.]+ +[\d.]+ +(?:ok|OVER)$", done.stdout, re.M)
        )
        assert timed == set(available_methods())
