"""Acceptance figures of the trainer: ALFWorld (fast engine), tiny policy, CPU profile, several seeds.

    python experiments/alfworld_rl_vs_warm_start/alfworld_rl_vs_warm_start.py --seeds 0 1 2 --methods gigpo scpo \
        [--set key=value ...]                      # from the repository root (it reads params.yaml)

The figures of this folder's README ran the cpu profile with 24 iterations of 8 tasks x 8 rollouts at lr 5e-4 on the
whole valid_unseen split (134 games), one process per seed (run side by side, reusing each seed's warm start), then
aggregated (X = experiments/alfworld_rl_vs_warm_start/alfworld_rl_vs_warm_start.py):

    for s in 0 1 2; do python X --seeds $s --reuse-sft \
        --out runs/bench/alfworld_rl_choice_24x8 --set train.iterations=24 --set rollout.n_tasks=8 \
        --set train.lr=5e-4 --set eval.n_episodes=134 & done; wait
    python X --report-only --out runs/bench/alfworld_rl_choice_24x8

Re-evaluation with 4 episodes per game (536 per seed; `choice_24x8_k4`): a copy of that --out, run again with
`--resume` (nothing left to train) and `--set eval.episodes_per_task=4`. Twice the training (`choice_48x8_k4`): another
copy, `--resume --set train.iterations=48`, which continues each run from its iteration-24 checkpoint exactly as an
uninterrupted 48-iteration run would; and `choice_72x8_k4`, a copy of the 48-iteration --out run with
`--resume --set train.iterations=72 --set eval.episodes_per_task=4`. At the sampling temperature
(`choice_48x8_k4_t1`): a copy of the 48-iteration --out, `--resume --set eval.temperature=1.0`.
`choice_24x8_k4/eval_temperature1.json` holds the same evaluation of the 24-iteration models, made by a loop over
`run_evaluation` (its warm-start figures equal the benchmark's to the last digit).

Their outputs (and those of the other settings its README lists) are kept under results/ beside this script.

Per seed: SFT warm start -> eval (valid_unseen) -> RL per method from that warm start -> eval. Prints success on
valid_unseen as mean +- std over seeds (warm start and after RL) and the mean wall seconds per RL iteration split into
env / generation / credit / update; writes the raw numbers to <out>/results_seed<k>.json. Seeds can run as parallel
processes (one --seeds each) and be aggregated with --report-only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from alfworld_training_trend_control import first_and_last_third  # this folder: the script's own sys.path[0]

from scpo.config import load_config, parse_overrides
from scpo.train.evaluate import run_evaluation
from scpo.train.run import run_training


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=["gigpo", "scpo"])
    ap.add_argument("--split", default="valid_unseen")
    ap.add_argument("--out", default="runs/bench/alfworld_rl")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--report-only", action="store_true", help="only aggregate the results_seed*.json under --out")
    ap.add_argument("--reuse-sft", action="store_true", help="keep an existing SFT run of a seed instead of retraining")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue each RL run from its last checkpoint (a finished run with a larger "
        "train.iterations trains on, exactly as an uninterrupted longer run; with the same "
        "iterations it is only re-evaluated)",
    )
    args = ap.parse_args()
    if args.report_only:
        return report(Path(args.out), args.methods, args.split)
    out = Path(args.out)
    base = {
        "env.name": "alfworld",
        "env.alfworld.eval_splits": [args.split],
        "train.out_dir": str(out),
        **parse_overrides(args.sets),
    }
    for seed in args.seeds:
        cfg = load_config("params.yaml", profile="cpu", overrides={**base, "train.seed": seed})
        sft_dir = Path(cfg.train.out_dir) / "alfworld" / "sft" / f"seed{seed}"
        if args.reuse_sft and (sft_dir / "summary.json").exists():
            sft = json.loads((sft_dir / "summary.json").read_text())
            sft["run_dir"] = str(sft_dir)  # not the path recorded at training time: --out may be a copy
        else:
            sft = run_training(cfg, stage="sft")
        row = {
            "sft_wall_s": sft["wall_s"],
            "warm": run_evaluation(cfg, sft["run_dir"], Path(sft["run_dir"]) / "eval")["splits"][args.split],
        }
        for method in args.methods:
            cfg_rl = load_config(
                "params.yaml",
                profile="cpu",
                overrides={**base, "train.seed": seed, "credit.method": method, "train.init_from": sft["run_dir"]},
            )
            rl = run_training(cfg_rl, stage="rl", resume=args.resume)
            ev = run_evaluation(cfg_rl, rl["run_dir"], Path(rl["run_dir"]) / "eval")
            row[method] = {
                "eval": ev["splits"][args.split],
                "seconds_per_iteration": rl["seconds_per_iteration"],
                "train_success_mean": rl["success_rate_mean"],
                "rl_wall_s": rl["wall_s"],
                "rl_resumed": args.resume,
                "eval_wall_s": ev["wall_s"],
            }
        (out / f"results_seed{seed}.json").write_text(json.dumps({"config": base, "seed": seed, **row}, indent=2))
    report(out, args.methods, args.split)


def report(out: Path, methods: list[str], split: str) -> None:
    """Mean +- sample std (ddof=1) over every results_seed*.json under `out` (seeds may run as separate processes)."""
    files = sorted(out.glob("results_seed*.json"))
    seeds = [json.loads(f.read_text()) for f in files]
    seed_ids = [s["seed"] for s in seeds]

    def sd(xs):
        return float(np.std(xs, ddof=1)) if len(xs) > 1 else 0.0

    def ms(xs):
        return f"{100 * np.mean(xs):.1f} +- {100 * sd(xs):.1f} %"

    print(
        f"{split} success over seeds {seed_ids} (episodes per seed: {seeds[0]['warm']['n']}, "
        f"{seeds[0]['config'].get('eval.episodes_per_task', 1)} per game)"
    )
    print(f"  warm start (SFT): {ms([s['warm']['success'] for s in seeds])}")
    for method in methods:
        print(
            f"  after RL {method:6s}: {ms([s[method]['eval']['success'] for s in seeds])}"
            f"   (per seed: {[round(s[method]['eval']['success'], 3) for s in seeds]})"
        )
        gain = [s[method]["eval"]["success"] - s["warm"]["success"] for s in seeds]
        print(
            f"  {method} gain over the warm start (same seed): {100 * np.mean(gain):+.1f} +- {100 * sd(gain):.1f} "
            f"points"
        )
        timing = {
            k: np.mean([s[method]["seconds_per_iteration"][k] for s in seeds])
            for k in ("env_s", "gen_s", "credit_s", "update_s", "iter_s")
        }
        print(f"  {method} s/iteration: " + ", ".join(f"{k} {v:.2f}" for k, v in timing.items()))
        trend = training_trend(out, method, seed_ids)
        if trend:
            print(
                f"  {method} training success (rollouts at the sampling temperature), first -> last third of the "
                f"iterations: {ms([a for a, _ in trend])} -> {ms([b for _, b in trend])} (every method draws the "
                f"same tasks; alfworld_training_trend_control.py replays them with the frozen warm start)"
            )
    print(f"  warm-start per seed: {[round(s['warm']['success'], 3) for s in seeds]}")
    print(per_task_type(seeds, methods).to_string(float_format=lambda v: f"{v:+.1f}" if v < 0 else f"{v:.1f}"))
    plot(out, seeds, methods, split)


def per_task_type(seeds: list[dict], methods: list[str]):
    """Success (%) per task type, mean over seeds, of the warm start and after each method; `<method> up` counts the
    seeds where the method beat the warm start on that type."""
    import pandas as pd

    types = sorted(seeds[0]["warm"]["per_task_type"])
    table = {"warm": [np.mean([100 * s["warm"]["per_task_type"][t]["success"] for s in seeds]) for t in types]}
    for m in methods:
        table[m] = [np.mean([100 * s[m]["eval"]["per_task_type"][t]["success"] for s in seeds]) for t in types]
        table[f"{m} up"] = [
            sum(s[m]["eval"]["per_task_type"][t]["success"] > s["warm"]["per_task_type"][t]["success"] for s in seeds)
            for t in types
        ]
    return pd.DataFrame(table, index=pd.Index(types, name="task type (success %, mean over seeds)"))


def training_trend(out: Path, method: str, seeds: list[int]) -> list[tuple[float, float]]:
    """Per seed, mean training success over the first and the last third of the RL iterations (history.csv)."""
    import pandas as pd

    trend = []
    for seed in seeds:
        path = out / "alfworld" / method / f"seed{seed}" / "history.csv"
        if path.exists():
            success = pd.read_csv(path)["charts/success_rate"].to_numpy()
            first, last = first_and_last_third(len(success))
            trend.append((float(success[first].mean()), float(success[last].mean())))
    return trend


def plot(out: Path, seeds: list[dict], methods: list[str], split: str) -> Path:
    """Bars: success of the warm start and after RL with each method, per seed and their mean; saved beside the runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = ["warm start"] + [f"RL: {m}" for m in methods]
    values = np.array([[s["warm"]["success"]] + [s[m]["eval"]["success"] for m in methods] for s in seeds]) * 100
    rows = [f"seed {s['seed']}" for s in seeds] + ["mean"]
    values = np.vstack([values, values.mean(0)])
    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.8 / len(columns)
    for j, col in enumerate(columns):
        ax.bar(np.arange(len(rows)) + j * width, values[:, j], width, label=col)
    ax.set_xticks(np.arange(len(rows)) + width * (len(columns) - 1) / 2, rows)
    ax.set_ylabel(f"{split} success (%)")
    ax.set_title(f"ALFWorld {split} ({seeds[0]['warm']['n']} episodes per bar), tiny policy", fontsize=10)
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = out / "rl_vs_warm_start.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"  figure: {path}")
    return path


if __name__ == "__main__":
    main()
