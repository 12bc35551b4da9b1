"""The numerics pin's speed cost on the cpu profile, side by side: the same training run with the pin
(scpo/numerics.env: AVX2 kernels, MKL's COMPATIBLE branch, one default thread) and without it (this CPU's own kernels),
in turns, each in its own process. Prints, per stage, the median steps per second of each and the median ratio to the
unpinned run of the same round.

    .venv/bin/python benchmarks/numerics_pin_cost.py [--env alfworld] [--rounds 3] [--iterations 2] [--parts]
    .venv/bin/python benchmarks/numerics_pin_cost.py --quick    # smoke profile on the corridor, one round (no data)

--parts adds the pin less MKL_CBWR and the pin less ATEN_CPU_CAPABILITY, to show which part costs what.
--gemm measures only float32 matrix products instead, in a new process per setting (unpinned, pinned, the pin less
MKL_CBWR, the pin with MKL_CBWR=AVX2): GFLOP/s of torch.mm (MKL) at the tiny policy's shapes (2,136 tokens of a
padded SFT batch through its 64-wide layers, the 2,048-word LM head, a weight gradient) and at 1024^3, beside numpy's
(OpenBLAS) on the same arrays; median of 5 timings of repeated products.

Measured: the RL iterations of the cpu profile (ALFWorld: 2 groups x 8 rollouts, 15 steps at most; environment,
generation and update: steps collected / the iterations' seconds, from history.csv), started from a smoke SFT warm
start made once; the SFT stage of the cpu profile on 100 demonstrations, one epoch (samples / its seconds, from
summary.json). Each also per CPU second of its whole process (user + system, start-up included), which a machine
busy with other work slows less than the wall clock. Needs the prepared data (`make data`); `--quick` needs none: the
smoke profile on the corridor, RL from the untrained model, one round of one iteration.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scpo.numerics import MARKER, pin  # noqa: E402

SCPO = [sys.executable, "-m", "scpo.cli"]


def variants(parts: bool) -> dict[str, dict[str, str]]:
    """name -> the variables set over an environment holding none of the pin's."""
    out = {"unpinned": {}, "pinned": pin()}
    if parts:
        for key in ("MKL_CBWR", "ATEN_CPU_CAPABILITY"):
            out[f"pin less {key}"] = {k: v for k, v in pin().items() if k != key}
    return out


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in pin() and k != MARKER}
    return {**env, **extra}


def _train(args: list[str], extra: dict[str, str]) -> float:
    """Run `scpo train ARGS` with `extra` set; the process's CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([*SCPO, "train", *args], env=_env(extra), capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"scpo train {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


QUICK = ["--set", "rollout.n_tasks=2", "--set", "rollout.group_size=2", "--set", "train.sft.n_demos=4"]


def rl_steps_per_second(
    out: Path, env: str, warm: Path | None, iterations: int, extra: dict[str, str], profile: str = "cpu"
) -> tuple[float, float]:
    """(steps per second of the iterations, steps per CPU second of the whole process); RL from `warm`, or from the
    profile's untrained model when None."""
    start = f"train.init_from={warm}" if warm is not None else "train.rl_start=base"
    cpu = _train(
        ["--profile", profile, "--env", env, "--out", str(out), "--set", start]
        + ["--set", f"train.iterations={iterations}", "--set", f"train.checkpoint_every={iterations}"]
        + (QUICK if profile == "smoke" else []),
        extra,
    )
    rows = list(csv.DictReader((out / "history.csv").open()))
    steps = sum(float(r["perf/steps"]) for r in rows)
    return steps / sum(float(r["perf/iter_s"]) for r in rows), steps / cpu


def sft_samples_per_second(out: Path, env: str, extra: dict[str, str], profile: str = "cpu") -> tuple[float, float]:
    """(samples per second of the SFT epochs, samples per CPU second of the whole process)."""
    cpu = _train(
        ["--stage", "sft", "--profile", profile, "--env", env, "--out", str(out)]
        + ["--set", "train.sft.n_demos=100", "--set", "train.sft.epochs=1"]
        + (QUICK if profile == "smoke" else []),
        extra,
    )
    bc = json.loads((out / "summary.json").read_text())["bc"]
    return bc["n_samples"] / bc["seconds"], bc["n_samples"] / cpu


GEMM_SHAPES = [(2136, 64, 64), (2136, 64, 256), (2136, 256, 64), (3000, 64, 2048), (64, 2136, 64), (1024, 1024, 1024)]
GEMM_CHILD = r"""
import json, statistics, sys, time
import numpy as np, torch
out = {}
for m, k, n in json.loads(sys.argv[1]):
    a, b = torch.randn(m, k), torch.randn(k, n)
    an, bn = a.numpy(), b.numpy()
    reps = max(3, int(1e9 / (2 * m * k * n)))
    rates = {}
    for name, f in (("torch", lambda: torch.mm(a, b)), ("numpy", lambda: an @ bn)):
        f()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(reps):
                f()
            times.append((time.perf_counter() - t) / reps)
        rates[name] = 2 * m * k * n / statistics.median(times) / 1e9
    out[f"{m}x{k} @ {k}x{n}"] = rates
print("GEMM " + json.dumps({"rates": out, "threads": torch.get_num_threads()}))
"""


def gemm_rates() -> None:
    """--gemm: the products' GFLOP/s under each setting, each in its own process."""
    cases = {**variants(True), "pin with MKL_CBWR=AVX2": {**pin(), "MKL_CBWR": "AVX2"}}
    cases.pop("pin less ATEN_CPU_CAPABILITY")
    results = {}
    for name, extra in cases.items():
        done = subprocess.run(
            [sys.executable, "-c", GEMM_CHILD, json.dumps(GEMM_SHAPES)], env=_env(extra), capture_output=True, text=True
        )
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("GEMM ")), None)
        if done.returncode != 0 or line is None:
            raise SystemExit(f"the product timing failed under {name}:\n{done.stderr[-2000:]}")
        results[name] = json.loads(line[5:])
    print("float32 matrix products, GFLOP/s (torch.mm: MKL; numpy: OpenBLAS), median of 5:")
    print(f"  {'shape':24s}" + "".join(f"{name:>26s}" for name in results))
    for shape in results["unpinned"]["rates"]:
        cells = "".join(
            f"{r['rates'][shape]['torch']:11.1f} ({r['rates'][shape]['numpy']:5.1f} numpy)" for r in results.values()
        )
        print(f"  {shape:24s}{cells}")
    print("  torch threads: " + ", ".join(f"{name} {r['threads']}" for name, r in results.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--parts", action="store_true", help="also the pin less MKL_CBWR, less ATEN_CPU_CAPABILITY")
    ap.add_argument("--gemm", action="store_true", help="only the float32 matrix products' GFLOP/s per setting")
    ap.add_argument(
        "--quick", action="store_true", help="the smoke profile on the corridor, one round of one iteration"
    )
    args = ap.parse_args()
    profile = "smoke" if args.quick else "cpu"
    if args.quick:
        args.env, args.rounds, args.iterations = "corridor", 1, 1
    if args.gemm:
        gemm_rates()
        return
    cases = variants(args.parts)
    names = list(cases)
    speeds: dict[str, dict[str, list[float]]] = {
        "rl steps/s": {},
        "rl steps/cpu-s": {},
        "sft samples/s": {},
        "sft samples/cpu-s": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        warm = None if args.quick else tmp / "warm"
        if args.quick:
            print(
                "--quick: the smoke profile's policy on the corridor (no data, RL from the untrained model), one round"
            )
        else:
            _train(["--stage", "sft", "--profile", "smoke", "--env", args.env, "--out", str(warm)], {})
        for i in range(args.rounds):
            for name in names[i % len(names) :] + names[: i % len(names)]:  # each round starts with the next one
                tag = f"{i}-{names.index(name)}"
                rl = rl_steps_per_second(tmp / f"rl-{tag}", args.env, warm, args.iterations, cases[name], profile)
                sft = sft_samples_per_second(tmp / f"sft-{tag}", args.env, cases[name], profile)
                for stage, value in zip(speeds, (*rl, *sft)):
                    speeds[stage].setdefault(name, []).append(value)
                print(f"round {i} {name:30s} rl {rl[0]:6.1f} steps/s, sft {sft[0]:6.1f} samples/s", flush=True)
    print(f"{profile} profile, {args.env}, {args.rounds} rounds (median; ratio: to the unpinned run of the same round;")
    print("  /s: the stage's own seconds; /cpu-s: the whole process's CPU seconds, start-up included):")
    for stage, runs in speeds.items():
        for name in names:
            ratio = statistics.median(x / u for x, u in zip(runs[name], runs["unpinned"]))
            print(f"  {stage:18s} {name:30s} {statistics.median(runs[name]):7.1f}   ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
