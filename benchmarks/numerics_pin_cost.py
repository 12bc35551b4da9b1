"""The numerics pin's speed cost on the cpu profile, side by side: the same training run with the pin
(scpo/numerics.env: AVX2 kernels, MKL's COMPATIBLE branch, one default thread) and without it (this CPU's own kernels),
alternating, each in its own process. Prints, per stage, the median steps per second of each and their ratio (pinned /
unpinned) over the pairs.

    .venv/bin/python benchmarks/numerics_pin_cost.py [--env alfworld] [--pairs 3] [--iterations 2]

Measured: the RL iterations of the cpu profile (ALFWorld: 2 groups x 8 rollouts, 15 steps at most; environment,
generation and update: steps collected / the iterations' seconds, from history.csv), started from a smoke SFT warm
start made once; the SFT stage of the cpu profile on 100 demonstrations, one epoch (samples / its seconds, from
summary.json). Needs the prepared data (`make data`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scpo.numerics import MARKER, pin  # noqa: E402

SCPO = [sys.executable, "-m", "scpo.cli"]


def _env(pinned: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in pin() and k != MARKER}
    return {**env, **pin()} if pinned else env


def _train(args: list[str], pinned: bool) -> None:
    done = subprocess.run([*SCPO, "train", *args], env=_env(pinned), capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"scpo train {' '.join(args)} failed:\n{done.stderr[-2000:]}")


def rl_steps_per_second(out: Path, env: str, warm: Path, iterations: int, pinned: bool) -> float:
    _train(
        ["--profile", "cpu", "--env", env, "--out", str(out), "--set", f"train.init_from={warm}"]
        + ["--set", f"train.iterations={iterations}", "--set", f"train.checkpoint_every={iterations}"],
        pinned,
    )
    rows = list(csv.DictReader((out / "history.csv").open()))
    return sum(float(r["perf/steps"]) for r in rows) / sum(float(r["perf/iter_s"]) for r in rows)


def sft_samples_per_second(out: Path, env: str, pinned: bool) -> float:
    _train(
        ["--stage", "sft", "--profile", "cpu", "--env", env, "--out", str(out)]
        + ["--set", "train.sft.n_demos=100", "--set", "train.sft.epochs=1"],
        pinned,
    )
    bc = json.loads((out / "summary.json").read_text())["bc"]
    return bc["n_samples"] / bc["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="alfworld")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        warm = tmp / "warm"
        _train(["--stage", "sft", "--profile", "smoke", "--env", args.env, "--out", str(warm)], pinned=False)
        stages = {"rl steps/s": {}, "sft samples/s": {}}
        for i in range(args.pairs):
            for pinned in (True, False) if i % 2 == 0 else (False, True):
                tag = f"{i}-{'pin' if pinned else 'own'}"
                rl = rl_steps_per_second(tmp / f"rl-{tag}", args.env, warm, args.iterations, pinned)
                sft = sft_samples_per_second(tmp / f"sft-{tag}", args.env, pinned)
                stages["rl steps/s"].setdefault(pinned, []).append(rl)
                stages["sft samples/s"].setdefault(pinned, []).append(sft)
                print(f"pair {i} {'pinned  ' if pinned else 'unpinned'}: rl {rl:.1f} steps/s, sft {sft:.1f} samples/s")
    print(f"cpu profile, {args.env}, {args.pairs} pairs (median; ratio = pinned / unpinned, median over pairs):")
    for stage, runs in stages.items():
        ratio = statistics.median(p / u for p, u in zip(runs[True], runs[False]))
        pinned, own = statistics.median(runs[True]), statistics.median(runs[False])
        print(f"  {stage:14s} pinned {pinned:7.1f}   unpinned {own:7.1f}   ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
