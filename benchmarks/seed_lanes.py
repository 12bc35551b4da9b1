"""One train or evaluate stage's seeds as notebooks 02 and 03 run them (`scpo.train.seed_pool`), this checkout against a
baseline commit, whole processes in turn: what the stage's process pool costs against the baseline's.

    env $(python -m scpo.numerics env) python benchmarks/seed_lanes.py [--baseline de1753a] [--pairs 1]
        [--stage train|evaluate] [--env alfworld] [--method grpo] [--seeds 0 1 2]
    python benchmarks/seed_lanes.py --quick    # 2 corridor seeds of one iteration, this checkout twice (seconds)

Each run is a fresh process that imports what notebook 02's first cell imports (the config loader and the trainer).
`--stage train` then trains `--seeds` with the cpu profile's `report.parallel_runs` from the pipeline's warm start
`runs/<env>/sft/seed0` (without one: `train.rl_start: base`) into a temporary folder; `--stage evaluate` evaluates the
pipeline's runs `runs/<env>/<method>/seed<k>` into a temporary reports folder. The baseline is checked out once as a
detached worktree (`.bench/seed_lanes/<commit>`) and imported from there. One warm-up pair is not counted; then the
pairs alternate baseline / current, so both see the same machine load. Printed: the median wall seconds of the whole
process and of the seeds alone, each checkout's, and the paired ratio current / baseline (median, min and max over the
pairs). The default baseline, de1753a, started its workers with `spawn` (each imported torch and the trainer itself);
this checkout forks them from a server that imports those once (`scpo.workers`).

On the idle 2-core AMD EPYC (Zen 4), cpu profile, numerics pin, against de1753a, medians (current/baseline, min-max):
- `--stage train --pairs 2` (ALFWorld GRPO): seeds 27.3 s against 31.9 s, 0.856 (0.850-0.862); whole process 34.0
  against 36.9 s, 0.920 (0.909-0.931);
- `--stage evaluate --pairs 3` (ALFWorld GRPO): seeds 10.8 against 14.4 s, 0.752 (0.705-0.766); whole process 16.9
  against 19.1 s, 0.883 (0.869-0.910);
- `--stage evaluate --env webshop --pairs 3`: seeds 8.2 against 13.9 s, 0.596 (0.556-0.777); whole process 14.7
  against 19.1 s, 0.800 (0.769-0.956).
The kernel as a lane beside spawned workers (cd6fdf1 against 637faaf, `--pairs 3`, train) had saved 1-2 s per stage:
seeds 31.8 against 34.1 s, 0.932 (0.904-1.042).
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
from pathlib import Path
from scpo.pipeline.notebook import notebook_config
from scpo.train.run import run_training  # notebook 02's first cell (03's imports the evaluation's entry point)
from scpo.train.seed_pool import evaluate_seeds, train_seeds
spec = json.loads(os.environ["BENCH_SPEC"])
cfg, _ = notebook_config(spec["params"], "cpu", "", **spec["fixed"])
t1 = time.perf_counter()
if spec["stage"] == "train":
    cfg.train.out_dir = spec["out"]
    summaries = train_seeds(cfg, spec["seeds"], stage="rl")
else:
    cfg.train.out_dir = os.path.join(spec["repo"], "runs")
    summaries = evaluate_seeds(cfg, spec["seeds"], cfg.credit.method, cfg.env.name, Path(spec["out"]))
t2 = time.perf_counter()
runs = [s["wall_s"] for s in summaries.values()]
print("BENCH " + json.dumps({"imports_s": t1 - t0, "seeds_s": t2 - t1, "runs_s": runs}))
"""


QUICK = {"train.iterations": 1, "rollout.n_tasks": 2, "rollout.group_size": 2}  # --quick's runs (on the corridor)


def run_once(code: Path, stage: str, env: str, method: str, seeds: list[int], quick: bool = False) -> dict:
    """One fresh process of `code`'s `stage` (train: into a temporary folder; evaluate: the pipeline's runs, into a
    temporary reports folder): its wall seconds from outside, and its own figures."""
    init = REPO / "runs" / env / "sft" / "seed0"
    fixed = {"env.name": env, "credit.method": method, "data.root": str(REPO / "data"), **(QUICK if quick else {})}
    fixed.update({"train.init_from": str(init)} if (init / "model").is_dir() else {"train.rl_start": "base"})
    with tempfile.TemporaryDirectory(prefix="seed_lanes_") as out:
        # each checkout reads its own params.yaml (a baseline's config does not know keys added since)
        params = str(code / "params.yaml")
        spec = {"repo": str(REPO), "params": params, "fixed": fixed, "out": out, "seeds": seeds, "stage": stage}
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
    ap.add_argument("--baseline", default="de1753a", help="the commit to compare with")
    ap.add_argument("--stage", choices=["train", "evaluate"], default="train")
    ap.add_argument("--pairs", type=int, default=1, help="counted pairs (one more warm-up pair first)")
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--method", default="grpo")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--quick", action="store_true", help="train 2 seeds of one corridor iteration, one pair, this checkout twice"
    )
    args = ap.parse_args()
    if args.pairs < 1:
        ap.error(f"--pairs must be at least 1, got {args.pairs}")
    if args.quick:
        args.stage, args.env, args.seeds, args.pairs = "train", "corridor", [0, 1], 1
        print("--quick: this checkout on both sides (no baseline worktree), no warm-up pair")
    base = REPO if args.quick else baseline_checkout(args.baseline, "seed_lanes")
    runs: dict[str, list[dict]] = {"baseline": [], "current": []}
    for k in range(int(args.quick), args.pairs + 1):
        pair = {"baseline": run_once(base, args.stage, args.env, args.method, args.seeds, args.quick)}
        pair["current"] = run_once(REPO, args.stage, args.env, args.method, args.seeds, args.quick)
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
