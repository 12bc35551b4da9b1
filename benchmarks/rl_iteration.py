"""One RL iteration of the tiny policy, this checkout against a baseline commit, run side by side: per-step cost of
collection (environments + generation), credit and update, and steps per second of the whole iteration.

    python benchmarks/rl_iteration.py [--envs alfworld webshop] [--shapes cpu] [--iterations 2] [--repeats 1]
        [--baseline 6326b05] [--init-from alfworld=DIR webshop=DIR] [--profile] [--out DIR]

The committed figures (benchmarks/results/rl_iteration/) come from
    python benchmarks/rl_iteration.py --shapes cpu 8x8 --iterations 3 --repeats 1 --profile \
        --init-from alfworld=runs/alfworld/sft/seed0 --out benchmarks/results/rl_iteration
the defaults are the short run `make bench` does (it prints and writes nothing unless `--out` is given).

Each run is a fresh process training `--iterations` iterations of GiGPO from the same warm start (`--init-from`;
default: the pipeline's SFT run `runs/<env>/sft/seed0`; where there is none, both checkouts start RL from the profile's
untrained model, `train.rl_start: base`: the same per-step arithmetic, longer failing episodes), cpu profile, at the
shape `cpu` (2 tasks x 8 rollouts) or `NxM` (N tasks x M rollouts). The baseline is checked out once as a detached git
worktree (`.bench/rl_iteration/<commit>`) and imported from there; this checkout's runs import this checkout. Runs
alternate baseline / current, `--repeats` times per (env, shape), so both see the same machine load. Figures are medians
over the runs' iterations after the first (the first pays one-off costs: imports, tokenizer and kernel warm-up):
milliseconds per step (wall) of collection, credit and update, steps per second of the whole iteration, and the process
CPU milliseconds per step of collection and update (`*_cpu_ms_step`: waiting for a busy core does not inflate them).
Every step is trained (`train.skip_zero_advantage: false`), so the update does the same work whoever won.
`--profile` also writes a cProfile of two iterations of each checkout (`profile_<env>_<checkout>.txt`, top functions by
cumulative time).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = r"""
import cProfile, io, json, os, pstats, resource, sys, time
sys.path.insert(0, os.environ["BENCH_CODE"])
import scpo
assert os.path.realpath(scpo.__file__).startswith(os.path.realpath(os.environ["BENCH_CODE"])), scpo.__file__
from scpo.config import load_config
try:
    from scpo.train.run import run_training
except ImportError:  # the baseline's layout
    from scpo.train.runner import run_training
import pandas as pd
spec = json.loads(os.environ["BENCH_SPEC"])
# process CPU seconds spent collecting and updating, per iteration (wall time counts the waits for a busy core)
loop = sys.modules[run_training.__module__]
loop = sys.modules.get("scpo.train.rl_loop", loop)
cpu = {"collect": [], "update": []}
def cpu_timed(fn, key):
    def wrapped(*a, **k):
        c0 = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            cpu[key].append(time.process_time() - c0)
    return wrapped
loop.iteration_rollouts = cpu_timed(loop.iteration_rollouts, "collect")
loop.ppo_update = cpu_timed(loop.ppo_update, "update")
cfg = load_config(os.path.join(os.environ["BENCH_CODE"], "params.yaml"), profile="cpu", overrides=spec["overrides"])
profiler = cProfile.Profile() if spec["profile"] else None
c0 = resource.getrusage(resource.RUSAGE_SELF)
if profiler:
    profiler.enable()
run_training(cfg, stage="rl", out_dir=spec["out"])
if profiler:
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
    open(spec["profile"], "w").write(text.getvalue())
c1 = resource.getrusage(resource.RUSAGE_SELF)
hist = pd.read_csv(os.path.join(spec["out"], "history.csv"))
rows = hist.to_dict(orient="records")
for i, row in enumerate(rows):
    row["cpu/collect_s"], row["cpu/update_s"] = cpu["collect"][i], cpu["update"][i]
print("BENCH " + json.dumps({"rows": rows, "cpu_s": (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)}))
"""
SHAPES = {"cpu": None}


def shape_overrides(shape: str) -> dict:
    if shape == "cpu":
        return {}
    n, m = shape.lower().split("x")
    return {"rollout.n_tasks": int(n), "rollout.group_size": int(m)}


def baseline_checkout(commit: str) -> Path:
    """A detached worktree of `commit` under .bench/ (created once)."""
    path = REPO / ".bench" / "rl_iteration" / commit
    if not (path / "scpo").is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit], check=True)
    return path


def run_once(code: Path, env: str, shape: str, iterations: int, init_from: Path | None, profile: Path | None) -> dict:
    out = Path(tempfile.mkdtemp(prefix="rl_iteration_")) / "run"
    start = {"train.init_from": str(init_from)} if init_from else {"train.rl_start": "base"}
    overrides = {
        "env.name": env,
        "credit.method": "gigpo",
        "train.iterations": iterations,
        **start,
        "train.checkpoint_every": 10_000,
        "train.save_rollouts_every": 0,
        "train.skip_zero_advantage": False,  # every step trained: the same update work whoever won
        "data.root": str(REPO / "data"),
        **shape_overrides(shape),
    }
    spec = {"overrides": overrides, "out": str(out), "profile": str(profile) if profile else ""}
    env_vars = {**os.environ, "BENCH_CODE": str(code), "BENCH_SPEC": json.dumps(spec), "TQDM_DISABLE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=code, env=env_vars, capture_output=True, text=True, timeout=7200
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{code} {env} {shape}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(line[6:])


def summarise(runs: list[dict]) -> dict:
    """Medians over the iterations after the first of every run."""
    rows = [r for run in runs for r in run["rows"][1:]] or [r for run in runs for r in run["rows"]]
    per_step = {
        "collect_ms_step": [1e3 * (r["perf/env_s"] + r["perf/gen_s"]) / r["perf/steps"] for r in rows],
        "credit_ms_step": [1e3 * r["perf/credit_s"] / r["perf/steps"] for r in rows],
        "update_ms_step": [1e3 * r["perf/update_s"] / r["perf/steps"] for r in rows],
        "steps_per_s": [r["perf/steps"] / r["perf/iter_s"] for r in rows],
        "collect_cpu_ms_step": [1e3 * r["cpu/collect_s"] / r["perf/steps"] for r in rows],
        "update_cpu_ms_step": [1e3 * r["cpu/update_s"] / r["perf/steps"] for r in rows],
        "steps": [r["perf/steps"] for r in rows],
    }
    out = {k: statistics.median(v) for k, v in per_step.items()}
    out["iterations"] = len(rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", nargs="+", default=["alfworld", "webshop"])
    ap.add_argument("--shapes", nargs="+", default=["cpu"])
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--baseline", default="6326b05", help="the commit to compare with")
    ap.add_argument("--init-from", nargs="*", default=[], help="env=DIR warm starts (default runs/<env>/sft/seed0)")
    ap.add_argument("--profile", action="store_true", help="write a cProfile of one iteration of each checkout")
    ap.add_argument("--out", type=Path, default=None, help="write results.json (and the profiles) here")
    args = ap.parse_args()
    if args.profile and args.out is None:
        ap.error("--profile writes its files under --out: give --out DIR")

    inits = {k: Path(v) for k, v in (item.split("=", 1) for item in args.init_from)}
    baseline = baseline_checkout(args.baseline)
    current = REPO
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    print(f"baseline {args.baseline} ({baseline}) vs this checkout; load average {os.getloadavg()[0]:.1f}")
    results = []
    starts: dict[str, str] = {}  # what each environment's runs started from, as results.json records it
    for env in args.envs:
        init: Path | None = inits.get(env, REPO / "runs" / env / "sft" / "seed0")
        if not (Path(init) / "model").is_dir() and not (Path(init) / "config.json").is_file():
            if env in inits:
                raise SystemExit(f"--init-from {env}={init}: not an SFT run folder or model folder")
            print(f"{env}: no warm start at {init}: both checkouts start RL from the profile's untrained model")
            init = None
        starts[env] = str(init) if init is not None else "the profile's untrained model (train.rl_start: base)"
        if args.profile:
            for name, code in (("baseline", baseline), ("current", current)):
                run_once(code, env, "cpu", 2, init, args.out / f"profile_{env}_{name}.txt")
        for shape in args.shapes:
            runs: dict[str, list[dict]] = {"baseline": [], "current": []}
            for _ in range(args.repeats):
                for name, code in (("baseline", baseline), ("current", current)):
                    runs[name].append(run_once(code, env, shape, args.iterations, init, None))
            old, new = summarise(runs["baseline"]), summarise(runs["current"])
            row = {"env": env, "shape": shape, "baseline": old, "current": new}
            row["ratio"] = {
                "collect": old["collect_ms_step"] / new["collect_ms_step"],
                "update": old["update_ms_step"] / max(new["update_ms_step"], 1e-9),
                "iteration_steps_per_s": new["steps_per_s"] / old["steps_per_s"],
                "collect_cpu": old["collect_cpu_ms_step"] / new["collect_cpu_ms_step"],
                "update_cpu": old["update_cpu_ms_step"] / new["update_cpu_ms_step"],
            }
            results.append(row)
            r = row["ratio"]
            print(
                f"{env:9s} {shape:4s} | collect ms/step {old['collect_ms_step']:7.1f} -> {new['collect_ms_step']:6.1f}"
                f" ({r['collect']:.1f}x) | credit {old['credit_ms_step']:.2f} -> {new['credit_ms_step']:.2f}"
                f" | update {old['update_ms_step']:7.1f} -> {new['update_ms_step']:6.1f} ({r['update']:.1f}x)"
                f" | steps/s {old['steps_per_s']:6.1f} -> {new['steps_per_s']:6.1f} ({r['iteration_steps_per_s']:.1f}x)"
                f" | CPU ms/step collect {old['collect_cpu_ms_step']:.1f} -> {new['collect_cpu_ms_step']:.1f}"
                f" ({r['collect_cpu']:.1f}x), update {old['update_cpu_ms_step']:.1f} -> {new['update_cpu_ms_step']:.1f}"
                f" ({r['update_cpu']:.1f}x)",
                flush=True,
            )
    meta = {
        "baseline": args.baseline,
        "iterations": args.iterations,
        "repeats": args.repeats,
        "warm_start": starts,
        "load": os.getloadavg(),
    }
    if args.out is None:
        return
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
