"""Can the tiny CPU policy shop? The warm start's WebShop success on the test goals, and how often RL groups are mixed.

Per seed s (cpu profile; the catalogue of `scpo prepare-data --only webshop`):

    scpo train --stage sft --env webshop --profile cpu --seed s --out runs/ws_sft_s<s>
    scpo eval --profile cpu --set env.name=webshop --set eval.n_episodes=null --set train.seed=s \\
        --checkpoint runs/ws_sft_s<s> --out runs/ws_eval_sft_s<s>
    scpo train --stage rl --env webshop --profile cpu --method gigpo --seed s --set train.init_from=runs/ws_sft_s<s> \\
        --set train.iterations=8 --set rollout.n_tasks=4 --out runs/ws_rl_gigpo_s<s>

(an RL seed may start from another seed's warm start: `--set train.init_from=runs/ws_sft_s0`), then
`python benchmarks/webshop_cpu_policy.py --runs runs --sft-seeds 0 1 2 --rl-seeds 0 1 2` prints, per seed and as
mean ± sample std: the warm start's success and mean score on every test goal (temperature eval.temperature), and from
each RL run's history.csv the share of groups with mixed outcomes (some rollouts won, some not), of all-failed groups,
and the training success rate (temperature rollout.temperature), over all its iterations. With its defaults and none of
those runs (as `make bench` runs it) it says so and exits 0. `--quick` (what the test suite runs) reads seed 0's runs
only: it needs them too (they take an SFT, an evaluation and an RL run on the WebShop data), and says so when missing.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path


def _mean_std(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    std = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{100 * statistics.mean(xs):.1f} ± {100 * std:.1f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=None, help="the folder holding the runs (default: runs)")
    ap.add_argument("--sft-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--rl-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--method", default="gigpo")
    ap.add_argument("--quick", action="store_true", help="seed 0's runs only")
    args = ap.parse_args()
    if args.quick:
        args.sft_seeds, args.rl_seeds = [0], [0]
    runs = args.runs or Path("runs")
    needed = [runs / f"ws_eval_sft_s{s}" / "eval.json" for s in args.sft_seeds]
    needed += [runs / f"ws_rl_{args.method}_s{s}" / "history.csv" for s in args.rl_seeds]
    missing = [p for p in needed if not p.is_file()]
    if missing:
        message = (
            f"no {missing[0]} ({len(missing)} of the {len(needed)} run files missing); make them with the commands"
        )
        if args.runs is None:  # the defaults, as `make bench` runs it: nothing to read yet
            print(f"webshop_cpu_policy: skipped, {message} of this file's docstring")
            return
        sys.exit(f"{message} of benchmarks/webshop_cpu_policy.py's docstring")
    args.runs = runs

    success, score = [], []
    for s in args.sft_seeds:
        ev = json.loads((args.runs / f"ws_eval_sft_s{s}" / "eval.json").read_text())["splits"]["test"]
        success.append(ev["success"])
        score.append(ev["task_score"])
        print(
            f"warm start seed {s}: success {100 * ev['success']:.1f} % ({round(ev['success'] * ev['n'])}/{ev['n']} "
            f"test goals), mean score {ev['task_score']:.3f}"
        )
    mixed, failed, train_success = [], [], []
    for s in args.rl_seeds:
        run = args.runs / f"ws_rl_{args.method}_s{s}"
        with open(run / "history.csv") as fh:
            rows = list(csv.DictReader(fh))
        init = (
            json.loads((run / "summary.json").read_text()).get("init_from", "?")
            if (run / "summary.json").is_file()
            else "?"
        )
        mixed.append(statistics.mean(float(r["credit/frac_mixed_groups"]) for r in rows))
        failed.append(statistics.mean(float(r["credit/frac_all_failed_groups"]) for r in rows))
        train_success.append(statistics.mean(float(r["charts/success_rate"]) for r in rows))
        per_iter = " ".join(f"{float(r['credit/frac_mixed_groups']):.2f}" for r in rows)
        print(
            f"RL seed {s} (from {init}): {len(rows)} iterations, mixed groups {100 * mixed[-1]:.1f} % (per iteration: "
            f"{per_iter}), all-failed {100 * failed[-1]:.1f} %, training success {100 * train_success[-1]:.1f} %"
        )
    print(
        f"warm start success {_mean_std(success)} (seeds {args.sft_seeds}), mean score {statistics.mean(score):.3f}; "
        f"RL: mixed groups {_mean_std(mixed)}, all-failed groups {_mean_std(failed)}, training success "
        f"{_mean_std(train_success)} (seeds {args.rl_seeds})"
    )


if __name__ == "__main__":
    main()
