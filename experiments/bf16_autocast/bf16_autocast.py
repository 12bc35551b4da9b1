"""Behaviour cloning of the tiny policy in float32 and in bfloat16 autocast, with autocast scoped to each forward pass
(`scpo.policy.placement.autocast_each_forward`, what the trainer does) and held as one block around the whole loop
(the scoping that serves the first forward's weight casts after every optimizer step).

    python experiments/bf16_autocast/bf16_autocast.py [--demos 20] [--epochs 4] [--seed 0]

Data: the 15 ALFWorld games of tests/fixtures (no download). Writes results/loss_curves.csv, results/summary.json and
results/loss_curves.png beside this file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import torch

from scpo.config import load_config
from scpo.envs.demos import expert_demonstrations
from scpo.envs.registry import env_package
from scpo.policy import create_policy
from scpo.policy.placement import autocast_each_forward, compute_precision
from scpo.train.seeding import seed_everything, set_threads
from scpo.train.sft import behaviour_cloning

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RUNS = {
    "float32": ("float32", "each forward"),
    "bfloat16, autocast per forward": ("bfloat16", "each forward"),
    "bfloat16, one autocast block around the loop": ("bfloat16", "one block"),
}


def curve(demos, cfg, dtype: str, scoping: str, seed: int) -> list[float]:
    seed_everything(seed)
    corpus = [d.prompt for d in demos] + [d.response for d in demos]
    policy = create_policy(cfg.policy.model_copy(update={"dtype": "float32"}), corpus=corpus, seed=seed)
    losses: list[float] = []
    kwargs = {
        "epochs": cfg.train.sft.epochs,
        "lr": cfg.train.sft.lr,
        "batch_size": cfg.train.sft.batch_size,
        "max_prompt_tokens": cfg.policy.max_prompt_tokens,
        "seed": seed,
        "progress": False,
        "on_step": losses.append,
    }
    if scoping == "each forward":
        autocast_each_forward(policy.model, torch.device("cpu"), dtype)
        behaviour_cloning(policy, demos, **kwargs)
    else:
        with compute_precision(torch.device("cpu"), dtype):
            behaviour_cloning(policy, demos, **kwargs)
    return losses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demos", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    set_threads(1)
    cfg = load_config(
        REPO / "params.yaml",
        profile="smoke",
        overrides={"train.sft.n_demos": args.demos, "train.sft.epochs": args.epochs},
    )
    pkg = env_package("alfworld")
    root = REPO / "tests" / "fixtures"
    tasks = pkg.list_tasks("train", data_root=root) + pkg.list_tasks("valid_train", data_root=root)
    demos, _ = expert_demonstrations(pkg, tasks[: args.demos], data_root=root, history_length=2, progress=False)
    rows, summary = [], {}
    for label, (dtype, scoping) in RUNS.items():
        losses = curve(demos, cfg, dtype, scoping, args.seed)
        rows += [{"run": label, "update": i + 1, "loss": v} for i, v in enumerate(losses)]
        per_epoch = len(losses) // args.epochs
        first, last = losses[:per_epoch], losses[-per_epoch:]
        summary[label] = {
            "updates": len(losses),
            "loss_first_epoch": sum(first) / len(first),
            "loss_last_epoch": sum(last) / len(last),
            "last_over_first": (sum(last) / len(last)) / (sum(first) / len(first)),
        }
        print(f"{label:48s} last/first epoch loss {summary[label]['last_over_first']:.3f} ({len(losses)} updates)")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / "loss_curves.csv", index=False)
    meta = {"demo_tasks": len(tasks[: args.demos]), "demo_steps": len(demos), "epochs": args.epochs, "seed": args.seed}
    (out / "summary.json").write_text(json.dumps({"setup": meta, "runs": summary}, indent=2) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    styles = {"float32": {"color": "black", "linestyle": "--", "linewidth": 2.5, "zorder": 3}}
    for label, part in df.groupby("run", sort=False):
        ax.plot(part["update"], part["loss"], label=label, **styles.get(label, {}))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("answer-token NLL")
    ax.set_title(
        f"Tiny policy SFT on the CPU: {meta['demo_steps']} demo steps from {meta['demo_tasks']} ALFWorld games, "
        f"{args.epochs} epochs, seed {args.seed}",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "loss_curves.png", dpi=120)


if __name__ == "__main__":
    main()
