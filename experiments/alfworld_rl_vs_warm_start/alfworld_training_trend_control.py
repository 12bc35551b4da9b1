"""Control for the training-success trend of `alfworld_rl_vs_warm_start.py`: is the rise of success on the training
rollouts from the first to the last third of the RL iterations learning, or just easier tasks drawn late?

Every RL run of a seed draws the same tasks at iteration t (`sample_tasks(pool, n_tasks, seed, t)`), whatever the
method. This script replays those draws with the frozen warm-start policy at the rollout temperature and prints, per
seed, the warm start's success on the first-third and last-third tasks next to each RL run's (its history.csv). If the
warm start rises as much as RL does, the trend is task drift, not learning.

    python experiments/alfworld_rl_vs_warm_start/alfworld_training_trend_control.py \
        --out runs/bench/alfworld_rl_choice_24x8_k4 --seeds 0 1 2 --set train.iterations=24 --set rollout.n_tasks=8 \
        [--rollouts-per-task 4]

This folder's README's figures: this command (24 iterations) and the same on runs/bench/alfworld_rl_choice_48x8_k4 with
--set train.iterations=48, both with --rollouts-per-task 4. Use the --out and --set of the benchmark run being checked;
writes <out>/trend_control.json (and keeps the warm start's replays in <out>/trend_control_warm.json, so a re-run, say
once the RL runs have finished, reuses them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.config import load_config, parse_overrides
from scpo.envs.registry import env_settings
from scpo.policy import load_policy, resolve_model_dir
from scpo.rollout import make_engine
from scpo.train.collect import iteration_rollouts
from scpo.train.seeding import iteration_seed, seed_everything, set_threads


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="the benchmark's --out (holds alfworld/<sft|method>/seed<k>)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=["gigpo", "scpo"])
    ap.add_argument("--rollouts-per-task", type=int, default=None, help="default: rollout.group_size")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    args = ap.parse_args()
    out = Path(args.out)
    cache_path = out / "trend_control_warm.json"  # the replays are the slow part: kept, and reused by a re-run
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    rows = []
    for seed in args.seeds:  # the warm start's replays first, so RL runs still training can finish meanwhile
        cfg = load_config(
            "params.yaml",
            profile="cpu",
            overrides={"env.name": "alfworld", "train.seed": seed, **parse_overrides(args.sets)},
        )
        thirds = dict(zip(("first", "last"), first_and_last_third(cfg.train.iterations)))
        group = args.rollouts_per_task or cfg.rollout.group_size
        keys = {name: f"seed{seed}/iterations{its.start}-{its.stop - 1}/x{group}" for name, its in thirds.items()}
        if any(key not in cache for key in keys.values()):
            replay = WarmReplay(cfg, out / "alfworld" / "sft" / f"seed{seed}")
            for name, its in thirds.items():
                if keys[name] not in cache:
                    cache[keys[name]] = replay.success(its, group)
                    cache_path.write_text(json.dumps(cache, indent=2))
        rows.append(({"seed": seed, **{f"warm_{name}": cache[key] for name, key in keys.items()}}, thirds))
    for row, thirds in rows:
        for m in args.methods:
            hist = pd.read_csv(out / "alfworld" / m / f"seed{row['seed']}" / "history.csv")
            if len(hist) < thirds["last"].stop:
                raise SystemExit(
                    f"{m} seed {row['seed']}: history.csv has {len(hist)} iterations, "
                    f"fewer than train.iterations = {thirds['last'].stop}"
                )
            for name, its in thirds.items():
                row[f"{m}_{name}"] = float(hist["charts/success_rate"].iloc[list(its)].mean())
        print(json.dumps(row), flush=True)
    rows = [row for row, _ in rows]
    (out / "trend_control.json").write_text(json.dumps(rows, indent=2))
    report(rows, args.methods)


def first_and_last_third(n_iterations: int) -> tuple[range, range]:
    """The first and the last third of the iterations (one iteration at least), as compared in the trend."""
    third = max(n_iterations // 3, 1)
    return range(0, third), range(n_iterations - third, n_iterations)


class WarmReplay:
    """The frozen warm start of a seed, replaying the tasks the RL runs drew (`iteration_rollouts`, as the trainer)."""

    def __init__(self, cfg, sft_dir: Path):
        set_threads(cfg.train.torch_threads)
        self.cfg, self.env = cfg, env_settings(cfg)
        model_dir = resolve_model_dir(sft_dir)
        self.engine = make_engine(cfg, load_policy(model_dir, dtype=cfg.policy.dtype), model_dir=model_dir)
        self.pool = self.env.package.list_tasks(self.env.train_split, data_root=self.env.data_root)

    def success(self, iterations: range, group_size: int) -> float:
        """Success on the tasks of `iterations`, `group_size` rollouts per task at the rollout temperature."""
        won = []
        for it in iterations:
            seed_everything(iteration_seed(self.cfg.train.seed, it))
            trajectories, _ = iteration_rollouts(
                self.cfg, self.env, self.engine, self.pool, it, group_size, desc=f"warm start, iteration {it}'s tasks"
            )
            won += [t.won for t in trajectories]
        return float(np.mean(won))


def report(rows: list[dict], methods: list[str]) -> None:
    """Mean +- sample std over seeds of first-third and last-third success, and of the change, per policy."""

    def ms(xs):
        return f"{100 * np.mean(xs):.1f} +- {100 * (np.std(xs, ddof=1) if len(xs) > 1 else 0.0):.1f}"

    print("training-task success (%), first third -> last third of the iterations, mean +- std over seeds")
    for name in ["warm"] + methods:
        first, last = [r[f"{name}_first"] for r in rows], [r[f"{name}_last"] for r in rows]
        change = [b - a for a, b in zip(first, last)]
        label = "warm start (frozen)" if name == "warm" else f"RL {name}"
        print(f"  {label:20s} {ms(first)} -> {ms(last)}   change {ms(change)} points")


if __name__ == "__main__":
    main()
