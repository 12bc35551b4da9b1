"""Sokoban learning comparison with exact success: a small MLP softmax policy (`scpo.testbeds.tabular_policy`) trained
by each estimator on a panel of Sokoban 6x6 one-box rooms whose optimal plan takes at least 4 moves, its success
computed exactly by dynamic programming; gradient fidelity of every estimator on the same policy; the rank
correlation between the two. A command line over `scpo.testbeds.sokoban_benchmark` (the runs) and
`scpo.testbeds.sokoban_summary` (its tables); the pipeline's stage `sokoban` (notebooks/09_sokoban.ipynb) runs the same
runs with params.yaml's `sokoban` section, whose defaults are this script's.

Settings (README.md): the cpu profile's credit options for Sokoban, 15 steps, the panel of
experiments/gradient_fidelity (16 `train` rooms with V* >= 4, panel seed 0), learning.n_tasks tasks x
rollout.group_size episodes per iteration at temperature 1, one Adam step per iteration. Two starts per seed:
`random` (the MLP's initialisation drawn from the seed; lr --cold-lr) and `imitation` (the same, then behaviour
cloning on the optimal plans of --demo-rooms `train` rooms outside the panel for --imitation-epochs full-batch Adam
steps at lr 1e-3; RL with a fresh Adam at --warm-lr). PPO trains a critic of its own (scpo.testbeds.tabular_critic:
Adam at --critic-lr-ratio times the policy's lr, --critic-epochs steps per iteration) and its runs score their own
batches beside GRPO and the exact advantage every --eval-every iterations (ppo_critic.csv, ppo_probes.csv,
ppo_summary.csv, ppo_critic.png).

    env $(python -m scpo.numerics env) python experiments/sokoban_learning/sokoban_learning.py \
        --out experiments/sokoban_learning/results
    python experiments/sokoban_learning/sokoban_learning.py --quick --out /tmp/sokoban_learning_quick

Finished runs are kept under OUT/runs/ (one CSV per start, seed and method) and not repeated; a folder made with
other settings is refused.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import pandas as pd

from scpo.testbeds.sokoban_benchmark import (
    check_settings,
    critic_records,
    fidelity_runs,
    learning_runs,
    run_settings,
    setup,
)
from scpo.testbeds.sokoban_summary import comparisons, critic_figure, critic_markdown, critic_summary, figure, markdown

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> None:
    from scpo.analysis.learning_stats import rank_correlation
    from scpo.config import SOKOBAN_STARTS, SokobanConfig, load_config
    from scpo.errors import ExpectedError
    from scpo.testbeds.gradient_fidelity import summarize_cosines

    d = SokobanConfig()  # every default: params.yaml's `sokoban` section (the full study), checked against this model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=len(d.seeds))
    ap.add_argument("--methods", nargs="+", default=list(d.methods))
    ap.add_argument("--starts", nargs="+", choices=SOKOBAN_STARTS, default=list(d.starts))
    ap.add_argument("--cold-iterations", type=int, default=d.cold_iterations)
    ap.add_argument("--warm-iterations", type=int, default=d.warm_iterations)
    ap.add_argument("--cold-lr", type=float, default=d.cold_lr)
    ap.add_argument("--warm-lr", type=float, default=d.warm_lr)
    ap.add_argument("--eval-every", type=int, default=d.eval_every)
    ap.add_argument("--fidelity-batches", type=int, default=d.fidelity_batches)
    ap.add_argument("--panel-size", type=int, default=d.panel_size)
    ap.add_argument("--min-v-star", type=float, default=d.min_v_star)
    ap.add_argument("--demo-rooms", type=int, default=d.demo_rooms)
    ap.add_argument("--imitation-epochs", type=int, default=d.imitation_epochs)
    ap.add_argument("--hidden", type=int, default=d.hidden)
    ap.add_argument(
        "--critic-lr-ratio",
        type=float,
        default=d.critic_lr_ratio,
        help="PPO critic's Adam lr / the policy's (verl-agent: 1e-5 / 1e-6)",
    )
    ap.add_argument(
        "--critic-epochs",
        type=int,
        default=d.critic_epochs,
        help="PPO critic's Adam steps per iteration (the policy's)",
    )
    ap.add_argument("--workers", type=int, default=d.workers)
    ap.add_argument("--quick", action="store_true", help="2 seeds, 4 methods, 6 / 4 iterations, 2 fidelity batches")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.methods, args.cold_iterations, args.warm_iterations = (
            2,
            ["exact_advantage", "grpo", "shuffled", "ppo"],
            6,
            4,
        )
        args.eval_every, args.fidelity_batches, args.panel_size, args.demo_rooms, args.imitation_epochs = 2, 2, 4, 10, 5
        args.workers = 1
    if "grpo" not in args.methods:
        raise ExpectedError(f"--methods {' '.join(args.methods)}: the comparisons are made against grpo, include it")
    args.n_tasks, args.group_size, args.panel_seed = d.n_tasks, d.group_size, d.panel_seed
    s = run_settings(args)
    args.out.mkdir(parents=True, exist_ok=True)
    check_settings(args.out, s)

    t0 = time.perf_counter()
    cfg = load_config(ROOT / "params.yaml", profile="cpu", overrides={"env.name": "sokoban", "env.history_length": 0})
    env = setup(cfg, s)
    fid_path = args.out / "fidelity_per_batch.csv"
    if fid_path.exists():
        per_batch = pd.read_csv(fid_path)
    else:
        per_batch = fidelity_runs(s, env, args.fidelity_batches, list(SOKOBAN_STARTS))
        per_batch.to_csv(fid_path, index=False)
    fid = pd.concat(
        [
            summarize_cosines(p.drop(columns="start")).assign(start=st, panel_success=p["success"].iloc[0])
            for st, p in per_batch.groupby("start", sort=False)
        ]
    )
    fid.to_csv(args.out / "fidelity_summary.csv", index=False)
    fidelity_script = _sibling_script("gradient_fidelity")  # its table and figure, for the same summary columns
    (args.out / "fidelity.md").write_text(fidelity_script.table(fid) + "\n")
    fidelity_script.figure(fid, args.out / "gradient_fidelity.png", "Sokoban 6x6 (1 box), the MLP policy")
    t_fid = time.perf_counter() - t0

    curves = learning_runs(s, env, args.starts, range(args.seeds), args.methods, args.out, args.workers)
    curves.to_csv(args.out / "curves.csv", index=False)
    table, diffs, per_run = comparisons(curves)
    table.to_csv(args.out / "learning.csv", index=False)
    diffs.to_csv(args.out / "differences.csv", index=False)
    per_run.to_csv(args.out / "aulc_per_seed.csv", index=False)
    corr = []
    for start in args.starts:
        runs = per_run[per_run["start"] == start]
        per_seed = {m: p.sort_values("seed")["aulc"].tolist() for m, p in runs.groupby("method")}
        for col in ("cos_panel", "cos_tasks"):
            cos = fid[fid["start"] == start].set_index("method")[f"{col}_mean"].to_dict()
            if len(set(cos) & set(per_seed)) >= 3:
                fixed = {m: cos[m] for m in per_seed if m in cos}
                corr.append({"start": start, "fidelity": col, **rank_correlation(fixed, per_seed)})
    pd.DataFrame(corr).to_csv(args.out / "rank_correlation.csv", index=False)
    success = per_batch.groupby("start")["success"].first().to_dict()
    room_cos = per_batch.groupby("start")[["room_cos_mean", "room_cos_median"]].first().to_dict("index")
    info = {
        "settings": s,
        "seeds": args.seeds,
        "methods": args.methods,
        "panel": env["panel"],
        "nodes": env["world"].graph.n_nodes,
        "states": int(env["world"].features.shape[0]),
        "demonstration_steps": len(env["demos"]),
        "fidelity_policy_success": success,
        "fidelity_policy_room_gradient_cosines": room_cos,
        "seconds": {"fidelity": round(t_fid, 1), "total": round(time.perf_counter() - t0, 1)},
        "run_seconds_mean": float(curves.groupby(["start", "seed", "method"])["seconds"].first().mean()),
        "cpu": _cpu(),
    }
    (args.out / "runs.json").write_text(json.dumps(info, indent=2) + "\n")
    text = markdown(table, diffs, fid, corr)
    critic = critic_records(args.out, args.starts, range(args.seeds), "critic")
    if len(critic):
        probes = critic_records(args.out, args.starts, range(args.seeds), "probes")
        critic.to_csv(args.out / "ppo_critic.csv", index=False)
        probes.to_csv(args.out / "ppo_probes.csv", index=False)
        summary = critic_summary(critic, probes, curves, every=2 * args.eval_every)
        summary.to_csv(args.out / "ppo_summary.csv", index=False)
        critic_figure(summary, args.out / "ppo_critic.png")
        text += "\n" + critic_markdown(summary)
    (args.out / "summary.md").write_text(text + "\n")
    figure(curves, args.out / "learning_curves.png")
    print(text)
    print(f"fidelity policies' exact success: {success}; {info['seconds']}")


def _sibling_script(name: str):
    """experiments/<name>/<name>.py as a module."""
    import importlib.util
    import sys

    if name not in sys.modules:  # registered before it runs: its dataclasses look their module up
        spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / name / f"{name}.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
