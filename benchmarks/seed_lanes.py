"""One train stage's seeds as notebook 02 runs them (`scpo.train.seed_pool.train_seeds`), this checkout against a
baseline commit, whole processes in turn: what running seeds in the notebook's own process (a lane beside the spawned
workers) saves against spawned workers only.

    env $(python -m scpo.numerics env) python benchmarks/seed_lanes.py [--baseline 637faaf] [--pairs 1]
        [--env alfworld] [--method grpo] [--seeds 0 1 2]

Each run is a fresh process that imports what notebook 02's first cell imports (the config loader and the trainer),
then trains `--seeds` with the cpu profile's `report.parallel_runs` (2 on the pipeline's machine) from the pipeline's
warm start `runs/<env>/sft/seed0` (without one: `train.rl_start: base`) into a temporary folder. The baseline is
checked out once as a detached worktree (`.bench/seed_lanes/<commit>`) and imported from there. One warm-up pair is
not counted; then the pairs alternate baseline / current, so both see the same machine load. Printed: the median wall
seconds of the whole process and of the seeds alone, each checkout's, and the paired ratio current / baseline (median,
min and max over the pairs). The default baseline, 637faaf, ran every seed of a stage in spawned workers.

`--pairs 3` at cd6fdf1 against 637faaf on the idle 2-core AMD EPYC (Zen 4), cpu profile, numerics pin: the whole
process 37.5 s against 38.1 s (medians), current/baseline 0.975 (0.918-1.096); the seeds alone 31.8 s against 34.1 s,
0.932 (0.904-1.042). A saving of 1-2 s per stage, of the size of the machine's noise between pairs
(benchmarks/results/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rl_iteration import baseline_checkout  # this folder: python puts the script's folder on sys.path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from scpo.pipeline.notebook import notebook_config
from scpo.train.run import run_training  # notebook 02's first cell
from scpo.train.seed_pool import train_seeds
spec = json.loads(os.environ["BENCH_SPEC"])
cfg, _ = notebook_config(os.path.join(spec["repo"], "params.yaml"), "cpu", "", **spec["fixed"])
cfg.train.out_dir = spec["out"]
t1 = time.perf_counter()
summaries = train_seeds(cfg, spec["seeds"], stage="rl")
t2 = time.perf_counter()
runs = [s["wall_s"] for s in summaries.values()]
print("BENCH " + json.dumps({"imports_s": t1 - t0, "seeds_s": t2 - t1, "runs_s": runs}))
"""


def run_once(code: Path, env: str, method: str, seeds: list[int]) -> dict:
    """One fresh process of `code`'s trainer: its wall seconds from outside, and its own figures."""
    init = REPO / "runs" / env / "sft" / "seed0"
    fixed = {"env.name": env, "credit.method": method, "data.root": str(REPO / "data")}
    fixed.update({"train.init_from": str(init)} if (init / "model").is_dir() else {"train.rl_start": "base"})
    with tempfile.TemporaryDirectory(prefix="seed_lanes_") as out:
        spec = {"repo": str(REPO), "fixed": fixed, "out": out, "seeds": seeds}
        env_vars = {**os.environ, "PYTHONPATH": str(code), "BENCH_SPEC": json.dumps(spec), "TQDM_DISABLE": "1"}
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD], cwd=code, env=env_vars, capture_output=True, text=True, timeout=3600
        )
        wall = time.perf_counter() - t0
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{code}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return {"wall_s": wall, **json.loads(line[6:])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="637faaf", help="the commit to compare with")
    ap.add_argument("--pairs", type=int, default=1, help="counted pairs (one more warm-up pair first)")
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--method", default="grpo")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    if args.pairs < 1:
        ap.error(f"--pairs must be at least 1, got {args.pairs}")
    base = baseline_checkout(args.baseline, "seed_lanes")
    runs: dict[str, list[dict]] = {"baseline": [], "current": []}
    for k in range(args.pairs + 1):
        pair = {"baseline": run_once(base, args.env, args.method, args.seeds)}
        pair["current"] = run_once(REPO, args.env, args.method, args.seeds)
        if k:  # the first pair warms the page cache and the compiled bytecode
            for name, run in pair.items():
                runs[name].append(run)
        walls = ", ".join(f"{n} {r['wall_s']:.1f} s" for n, r in pair.items())
        print(f"pair {k}{' (warm-up)' if not k else ''}: {walls}")
    for key in ("wall_s", "seeds_s"):
        ratios = [c[key] / b[key] for b, c in zip(runs["baseline"], runs["current"])]
        print(
            f"{key:8s} baseline {statistics.median(r[key] for r in runs['baseline']):6.1f} s  "
            f"current {statistics.median(r[key] for r in runs['current']):6.1f} s  "
            f"current/baseline {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        )


if __name__ == "__main__":
    main()
