"""One RL iteration of the tiny policy, this checkout against a baseline commit, run side by side: per-step cost of
collection (environments + generation), credit and update, and steps per second of the whole iteration.

    python benchmarks/rl_iteration.py [--envs alfworld webshop] [--shapes cpu] [--iterations 2] [--repeats 1]
        [--baseline 6326b05] [--init-from alfworld=DIR webshop=DIR] [--profile] [--out DIR]

The newest committed figures (benchmarks/results/rl_iteration_prefix_tree/; older checkouts' runs beside it, each
described in benchmarks/results/README.md) come from
    python benchmarks/rl_iteration.py --envs alfworld webshop --shapes cpu 8x8 --iterations 3 --repeats 1 --flops \
        --init-from alfworld=runs/alfworld/sft/seed0 webshop=runs/webshop/sft/seed0 \
        --out benchmarks/results/rl_iteration_prefix_tree
the defaults are the short run `make bench` does (it prints and writes nothing unless `--out` is given). `--quick`
(what the test suite runs): the data-free corridor, 2 tasks x 2 rollouts, 2 iterations, this checkout on both sides (no
baseline worktree), so its ratios are 1 up to noise: a check that the benchmark runs.

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

`--ops` writes torch.profiler's table of this checkout's operators over a run of two iterations at the cpu shape (its
setup included), by self CPU time (`ops_<env>_current.txt`): which kernels the time is spent in.
`--flops` adds one untimed run of this checkout per (env, shape) with `torch.utils.flop_counter` around collection and
update: the floating-point operations per step of the matrix products (`aten.mm`, `addmm`, `bmm`: the linear layers
and the LM head) and of attention (the CPU flash-attention kernel: 4 d per (query, key) pair that the mask or the
causal order allows, 8 d in the backward pass; masked pairs left out), and the single-thread rate of a 1024 x 1024 x
1024 float32 product in the same process (MKL, this environment's branch). At that rate the counted operations take
`floor ms/step` (`mm alone`: the products only): a lower bound on one thread for these passes as they are batched
(padding included), since it leaves out every elementwise operation and the environments and gives the model's
64-wide products the rate of a large one.
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
import torch
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
# process CPU seconds spent collecting and updating, per iteration (wall time counts the waits for a busy core); the
# module that calls them: the trainer, or an older checkout's loop
loop = sys.modules[run_training.__module__]
for name in ("scpo.train.trainer", "scpo.train.rl_loop"):
    if hasattr(sys.modules.get(name), "ppo_update"):
        loop = sys.modules[name]
        break
collect = sys.modules.get("scpo.train.collect", loop)  # where iteration_rollouts lives (and is called from)
cpu = {"collect": [], "update": []}
def cpu_timed(fn, key):
    def wrapped(*a, **k):
        c0 = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            cpu[key].append(time.process_time() - c0)
    return wrapped
collect.iteration_rollouts = cpu_timed(collect.iteration_rollouts, "collect")
loop.ppo_update = cpu_timed(loop.ppo_update, "update")
flops = {"collect": [], "update": []}
if spec.get("flops"):
    from torch.utils.flop_counter import FlopCounterMode, register_flop_formula
    aten = torch.ops.aten
    def pairs(q, k, is_causal, mask):  # (query, key) pairs attention must compute: the mask's, or the causal triangle
        b, h, lq, lk = *q.shape[:3], k.shape[-2]
        if mask is not None:
            allowed = mask if mask.dtype == torch.bool else mask > float("-inf")
            return int(allowed.expand(b, h, lq, lk).sum())
        return b * h * (lq * (lq + 1) // 2 if is_causal else lq * lk)
    def attention(q, k, v, dropout_p=0.0, is_causal=False, *a, attn_mask=None, out_val=None, **kw):
        return 4 * q.shape[-1] * pairs(q, k, is_causal, attn_mask)  # Q K^T and P V, 2 d each per pair
    def attention_backward(g, q, k, v, out, lse, dropout_p=0.0, is_causal=False, *a, attn_mask=None, out_val=None,
                           **kw):
        return 8 * q.shape[-1] * pairs(q, k, is_causal, attn_mask)  # dV, dP, dQ, dK
    try:  # the CPU flash-attention kernel has no formula of its own in torch.utils.flop_counter
        register_flop_formula(aten._scaled_dot_product_flash_attention_for_cpu, get_raw=True)(attention)
        register_flop_formula(aten._scaled_dot_product_flash_attention_for_cpu_backward, get_raw=True)(
            attention_backward)
    except RuntimeError:
        pass
    def counted(fn, key):
        def wrapped(*a, **k):
            with FlopCounterMode(display=False) as fc:
                out = fn(*a, **k)
            by_op = {str(op): n for op, n in fc.get_flop_counts()["Global"].items()}
            mm = sum(n for op, n in by_op.items() if "mm" in op)
            flops[key].append({"mm": mm, "attention": fc.get_total_flops() - mm})
            return out
        return wrapped
    collect.iteration_rollouts = counted(collect.iteration_rollouts, "collect")
    loop.ppo_update = counted(loop.ppo_update, "update")
cfg = load_config(os.path.join(os.environ["BENCH_CODE"], "params.yaml"), profile="cpu", overrides=spec["overrides"])
profiler = cProfile.Profile() if spec["profile"] else None
ops = None
if spec.get("ops"):
    from torch.profiler import ProfilerActivity, profile as torch_profile
    ops = torch_profile(activities=[ProfilerActivity.CPU])
    ops.__enter__()
c0 = resource.getrusage(resource.RUSAGE_SELF)
if profiler:
    profiler.enable()
run_training(cfg, stage="rl", out_dir=spec["out"])
if ops is not None:
    ops.__exit__(None, None, None)
    table = ops.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60)
    open(spec["ops"], "w").write(table)
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
gemm = None
if spec.get("flops"):
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    torch.mm(a, b)
    t = time.perf_counter()
    for _ in range(10):
        torch.mm(a, b)
    gemm = 10 * 2 * 1024**3 / (time.perf_counter() - t) / 1e9
    for i, row in enumerate(rows):
        for key in ("collect", "update"):
            row[f"flops/{key}_mm"], row[f"flops/{key}_attention"] = flops[key][i]["mm"], flops[key][i]["attention"]
cpu_s = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
print("BENCH " + json.dumps({"rows": rows, "cpu_s": cpu_s, "gemm_gflops": gemm, "threads": torch.get_num_threads()}))
"""
SHAPES = {"cpu": None}


def shape_overrides(shape: str) -> dict:
    if shape == "cpu":
        return {}
    n, m = shape.lower().split("x")
    return {"rollout.n_tasks": int(n), "rollout.group_size": int(m)}


def baseline_checkout(commit: str, bench: str = "rl_iteration") -> Path:
    """A detached worktree of `commit` under .bench/<bench>/ (created once)."""
    path = REPO / ".bench" / bench / commit
    if not (path / "scpo").is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit], check=True)
    return path


def run_once(
    code: Path,
    env: str,
    shape: str,
    iterations: int,
    init_from: Path | None,
    profile: Path | None,
    flops: bool = False,
    ops: Path | None = None,
) -> dict:
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
    spec = {
        "overrides": overrides,
        "out": str(out),
        "profile": str(profile) if profile else "",
        "flops": flops,
        "ops": str(ops) if ops else "",
    }
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


def flop_summary(run: dict) -> dict:
    """FLOPs per step over the counted run's iterations (sum over iterations / steps), the product rate, and the time
    the matrix products alone take at that rate."""
    rows = run["rows"]
    steps = sum(r["perf/steps"] for r in rows)
    out = {
        f"{key}_{kind}_mflop_step": sum(r[f"flops/{key}_{kind}"] for r in rows) / steps / 1e6
        for key in ("collect", "update")
        for kind in ("mm", "attention")
    }
    out["gemm_gflops"], out["threads"] = run["gemm_gflops"], run["threads"]
    out["mm_floor_ms_step"] = (out["collect_mm_mflop_step"] + out["update_mm_mflop_step"]) / run["gemm_gflops"]
    counted = sum(v for k, v in out.items() if k.endswith("_mflop_step"))
    out["floor_ms_step"] = counted / run["gemm_gflops"]
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
    ap.add_argument("--flops", action="store_true", help="count this checkout's FLOPs per step (one untimed run)")
    ap.add_argument("--ops", action="store_true", help="write torch.profiler's operator table of this checkout (--out)")
    ap.add_argument("--quick", action="store_true", help="the corridor, 2x2, this checkout on both sides: seconds")
    args = ap.parse_args()
    if args.quick:
        args.envs, args.shapes, args.iterations, args.repeats = ["corridor"], ["2x2"], 2, 1
    if (args.profile or args.ops) and args.out is None:
        ap.error("--profile and --ops write their files under --out: give --out DIR")

    # absolute: the baseline's runs start in its worktree, where a relative path would name another folder
    inits = {k: Path(v).resolve() for k, v in (item.split("=", 1) for item in args.init_from)}
    baseline = REPO if args.quick else baseline_checkout(args.baseline)
    current = REPO
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    label = "--quick: this checkout" if args.quick else f"baseline {args.baseline} ({baseline})"
    print(f"{label} vs this checkout; load average {os.getloadavg()[0]:.1f}")
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
        if args.ops:
            run_once(current, env, "cpu", 2, init, None, ops=args.out / f"ops_{env}_current.txt")
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
            if args.flops:
                row["flops"] = flop_summary(run_once(current, env, shape, args.iterations, init, None, flops=True))
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
            if args.flops:
                f = row["flops"]
                target = 1e3 / (10 * old["steps_per_s"])
                print(
                    f"{'':14s} | MFLOP/step collect {f['collect_mm_mflop_step']:.0f} mm + "
                    f"{f['collect_attention_mflop_step']:.0f} attention, update {f['update_mm_mflop_step']:.0f} mm + "
                    f"{f['update_attention_mflop_step']:.0f} attention | 1024^3 product {f['gemm_gflops']:.1f} GFLOP/s"
                    f" on {f['threads']} thread(s): floor {f['floor_ms_step']:.1f} ms/step, mm alone"
                    f" {f['mm_floor_ms_step']:.1f}"
                    f" (now {new['collect_ms_step'] + new['update_ms_step']:.1f}; 10x the baseline: {target:.1f})",
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
