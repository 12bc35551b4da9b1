"""What PPO's learned critic costs on the CPU: RL iterations of the trainer with `ppo` (a critic trained beside the
policy: `scpo.train.critic`) and with `grpo` (no critic), same config and seeds, run side by side in alternating rounds;
per method the median seconds per iteration and per collected step, and for `ppo` the critic's own seconds (its values
of the batch, its update) from the run's history. Memory: the critic's files in the run's last checkpoint (float32
weights, AdamW moments) beside the memory plan's critic terms (`scpo.policy.memory_plan`, which the preflight prints).

    python benchmarks/critic_cost.py            # the cpu profile's tiny policy on the corridor, 6 iterations x 2 rounds
    python benchmarks/critic_cost.py --quick    # the smoke profile's, 2 iterations x 1 round (the test suite's run)

Rollouts differ between the two methods after the first iteration (the policies learn differently), so the ratio per
collected step is the fairer one; the critic's own seconds are measured inside the `ppo` run and need no pairing.

Measured (benchmarks/results/critic_cost.txt, the numerics pin, 2 cores shared with other jobs): the cpu profile's
ppo iteration 14.3 s against grpo's 2.6 s (5.5x; 5.0x per collected step), the critic 81 % of it (its values 8 %, its
3 epochs of updates 73 %); its checkpoint files 1.03x the memory plan's weights + AdamW terms.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scpo.config import load_config  # noqa: E402
from scpo.policy.memory_plan import model_shape, plan_memory  # noqa: E402
from scpo.run.plan import make_plan  # noqa: E402
from scpo.train.critic import CRITIC_DIR, CRITIC_OPTIMIZER, CRITIC_WEIGHTS  # noqa: E402
from scpo.train.run import run_training  # noqa: E402
from scpo.train.seeding import set_threads  # noqa: E402

METHODS = ("grpo", "ppo")
MIB = 2**20


def config(profile: str, method: str, iterations: int, seed: int):
    overrides = {"env.name": "corridor", "credit.method": method, "train.iterations": iterations, "train.seed": seed}
    return load_config(REPO / "params.yaml", profile=profile, overrides=overrides)


def one_run(profile: str, method: str, iterations: int, seed: int, root: Path) -> pd.DataFrame:
    out = root / f"{method}_seed{seed}"
    t0 = time.perf_counter()
    run_training(config(profile, method, iterations, seed), stage="rl", out_dir=out)
    hist = pd.read_csv(out / "history.csv").assign(method=method, seed=seed, wall_s=time.perf_counter() - t0)
    if method == "ppo":
        ckpt = out / "checkpoints" / f"iter_{iterations:04d}" / CRITIC_DIR
        hist["critic_weights_bytes"] = (ckpt / CRITIC_WEIGHTS).stat().st_size
        hist["critic_optimizer_bytes"] = (ckpt / CRITIC_OPTIMIZER).stat().st_size
    return hist


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the smoke profile, 2 iterations x 1 round")
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds (round r: seed r, grpo then ppo)")
    args = ap.parse_args()
    profile, iterations, rounds = ("smoke", 2, 1) if args.quick else ("cpu", args.iterations, args.rounds)
    set_threads(config(profile, "ppo", iterations, 0).train.torch_threads)
    label = "--quick: the smoke profile's policy" if args.quick else "the cpu profile's policy"
    print(f"critic_cost: {label} on the corridor, {iterations} iterations x {rounds} round(s), grpo and ppo")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        frames = [one_run(profile, m, iterations, r, Path(tmp)) for r in range(rounds) for m in METHODS]
        from transformers import AutoConfig

        cfg = config(profile, "ppo", iterations, 0)
        plan = make_plan(cfg, "rl", Path(tmp) / "plan")  # its notes: what the preflight prints
        memory = plan_memory(cfg, model_shape(AutoConfig.from_pretrained(Path(tmp) / "ppo_seed0" / "model")))
        notes = [n for n in plan.notes if n.startswith("critic")]
    hist = pd.concat(frames, ignore_index=True)
    hist["ms_per_step"] = 1000 * hist["perf/iter_s"] / hist["perf/steps"]
    print(f"\n{'method':<8}{'iter s (median)':>17}{'ms / step':>11}{'steps / iter':>14}{'critic s / iter':>17}")
    med = {}
    for m in METHODS:
        h = hist[hist["method"] == m]
        critic = (h["perf/critic_values_s"] + h["perf/critic_update_s"]) if m == "ppo" else pd.Series([0.0])
        med[m] = (float(h["perf/iter_s"].median()), float(h["ms_per_step"].median()), float(critic.median()))
        print(f"{m:<8}{med[m][0]:>17.2f}{med[m][1]:>11.1f}{h['perf/steps'].median():>14.0f}{med[m][2]:>17.2f}")
    ppo = hist[hist["method"] == "ppo"]
    share = float(np.median((ppo["perf/critic_values_s"] + ppo["perf/critic_update_s"]) / ppo["perf/iter_s"]))
    values = float(np.median(ppo["perf/critic_values_s"] / ppo["perf/iter_s"]))
    print(
        f"\nratio ppo / grpo: time per iteration {med['ppo'][0] / med['grpo'][0]:.2f}x, per collected step "
        f"{med['ppo'][1] / med['grpo'][1]:.2f}x; the critic's share of a ppo iteration {100 * share:.0f} % "
        f"(its values {100 * values:.0f} %, its update {100 * (share - values):.0f} %)"
    )
    weights, adam = int(ppo["critic_weights_bytes"].iloc[0]), int(ppo["critic_optimizer_bytes"].iloc[0])
    print(
        f"critic memory: checkpoint files {weights / MIB:.3f} MiB weights + {adam / MIB:.3f} MiB AdamW; memory plan "
        f"{memory.trainer['critic_weights'] / MIB:.3f} MiB weights + {memory.trainer['critic_adamw'] / MIB:.3f} MiB "
        f"AdamW (+ {memory.trainer['critic_grads'] / MIB:.3f} MiB grads); ratio files / plan "
        f"{(weights + adam) / (memory.trainer['critic_weights'] + memory.trainer['critic_adamw']):.2f}"
    )
    print(*notes, sep="\n")


if __name__ == "__main__":
    main()
