"""Gradient fidelity of every estimator on the corridor (the learning benchmark's positive control): per warm start,
the cosine between each estimator's update on a training batch and the exact gradient of the panel's success, over
`--batches` batches of the policy's own rollouts (`scpo.testbeds.gradient_fidelity`).

The settings are the positive control's (experiments/learning_benchmark/corridor_control.sh): the cpu profile, the
corridor's long split with 12 steps per episode, the learning benchmark's panel (learning.panel_size tasks of
train_long, learning.panel_seed) and task draws (learning.n_tasks per batch), rollout.group_size rollouts per task at
rollout.temperature, env.history_length. The warm starts are that script's (an SFT of 8 demonstrations for one epoch;
random: at lr 1e-6).

    env $(python -m scpo.numerics env) python experiments/gradient_fidelity/gradient_fidelity.py \
        --warm-start random=/tmp/scpo_corridor_control/sft_random \
        --warm-start weak=/tmp/scpo_corridor_control/sft_weak \
        --batches 64 --out experiments/gradient_fidelity/results
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

CORRIDOR = {
    "env.name": "corridor",
    "env.corridor.max_steps": 12,
    "env.corridor.train_split": "train_long",
    "env.corridor.eval_splits": ["valid_long"],
}


def measure(
    label: str, warm_start: Path, batches: int, seed: int, reference_episodes: int = 0, progress: bool = True
) -> tuple[pd.DataFrame, dict]:
    import torch

    from scpo.config import load_config
    from scpo.envs.panel import task_panel
    from scpo.envs.registry import env_settings
    from scpo.policy import load_policy
    from scpo.testbeds.gradient_fidelity import gradient_fidelity

    torch.set_num_threads(1)
    cfg = load_config(Path(__file__).parents[2] / "params.yaml", profile="cpu", overrides=CORRIDOR)
    env = env_settings(cfg)
    panel = task_panel(env, cfg.learning.panel_size, cfg.learning.panel_seed)
    policy = load_policy(Path(warm_start) / "model")
    t0 = time.perf_counter()
    res = gradient_fidelity(
        policy,
        panel,
        env_name="corridor",
        max_steps=env.max_steps,
        history_length=cfg.env.history_length,
        n_batches=batches,
        n_tasks=cfg.learning.n_tasks,
        group_size=cfg.rollout.group_size,
        temperature=cfg.rollout.temperature,
        credit=cfg.credit.for_env("corridor"),
        data_root=cfg.data.root,
        env_options=env.options,
        max_prompt_tokens=cfg.policy.max_prompt_tokens,
        prompt_overflow=cfg.policy.prompt_overflow,
        seed=seed,
        reference_episodes=reference_episodes,
        progress=progress,
    )
    info = {
        "start": label,
        "warm_start": str(warm_start),
        "batches": batches,
        "panel": panel,
        "panel_success_exact": sum(res.success.values()) / len(res.success),
        "success_per_task": res.success,
        "exact_gradient_norm": res.exact_gradient_norm,
        "reference_episodes_per_task": reference_episodes,
        "reference_reliability": res.reference_reliability,
        "seconds": {**res.seconds, "total_s": time.perf_counter() - t0},
    }
    return res.per_batch.assign(start=label), info


def table(summary: pd.DataFrame) -> str:
    """One markdown row per estimator: the share of batches where its update is zero (counted as cosine 0), its
    cosines and its paired difference from GRPO, each with its interval."""
    names = {
        "cos_panel": "cos(update, grad J panel)",
        "cos_tasks": "cos(update, grad J batch tasks)",
        "cos_sampled": "corrected cos with the sampled reference",
    }
    cols = [c for c in names if f"{c}_mean" in summary]

    def ci(r, col):
        return f"{r[f'{col}_mean']:+.3f} [{r[f'{col}_lo']:+.3f}, {r[f'{col}_hi']:+.3f}]"

    head = ["start", "estimator", "no update", *(names[c] for c in cols), f"{cols[0]} - GRPO's", "p"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in summary.sort_values(["start", f"{cols[0]}_mean"], ascending=[True, False]).iterrows():
        diff = "" if pd.isna(r.get("diff_mean")) else ci(r, "diff")
        p = "" if pd.isna(r.get("diff_p")) else f"{r['diff_p']:.2g}"
        cells = [r["start"], r["method"], f"{r['no_update']:.2f}", *(ci(r, c) for c in cols), diff, p]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(summary: pd.DataFrame, path: Path) -> Path:
    """Per warm start, each estimator's mean cosine with grad J of the panel and of the batch's tasks (95% intervals
    over batches), estimators ordered by the first start's panel cosine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    starts = list(dict.fromkeys(summary["start"]))
    order = summary[summary["start"] == starts[0]].sort_values("cos_panel_mean")["method"].tolist()
    fig, axes = plt.subplots(1, len(starts), figsize=(6 * len(starts), 0.38 * len(order) + 1.5), sharey=True)
    for ax, start in zip(np.atleast_1d(axes), starts):
        part = summary[summary["start"] == start].set_index("method").loc[order]
        y = np.arange(len(order))
        for dy, col, label in (
            (0.17, "cos_panel", "grad J of the panel"),
            (-0.17, "cos_tasks", "of the batch's tasks"),
        ):
            mean = part[f"{col}_mean"].to_numpy(float)
            err = np.vstack([mean - part[f"{col}_lo"].to_numpy(float), part[f"{col}_hi"].to_numpy(float) - mean])
            ax.errorbar(mean, y + dy, xerr=err, fmt="o", capsize=2, label=label)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(y, order)
        ax.set_xlim(-0.3, 1.0)
        ax.set_title(f"{start} start: panel success {part['panel_success'].iloc[0]:.2f} (exact)", fontsize=10)
        ax.set_xlabel("cosine of the update with the exact gradient")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=8, loc="upper left")
    n = int(summary["cos_panel_n"].max())
    fig.suptitle(f"Gradient fidelity on the corridor: mean over {n} batches, 95% t-interval", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    from scpo.testbeds.gradient_fidelity import summarize_cosines

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm-start", action="append", required=True, help="LABEL=DIR of an SFT run (repeatable)")
    ap.add_argument("--batches", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--reference-episodes", type=int, default=0, help="also the corrected cosine with a sampled reference"
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    frames, infos = [], []
    for item in args.warm_start:
        label, _, path = item.partition("=")
        per_batch, info = measure(label, Path(path), args.batches, args.seed, args.reference_episodes)
        frames.append(per_batch)
        infos.append(info)
        print(f"{label}: exact panel success {info['panel_success_exact']:.3f}, {info['seconds']['total_s']:.0f} s")
    per_batch = pd.concat(frames, ignore_index=True)
    success = {info["start"]: info["panel_success_exact"] for info in infos}
    summary = pd.concat(
        [
            summarize_cosines(part).assign(start=start, panel_success=success[start])
            for start, part in per_batch.groupby("start", sort=False)
        ],
        ignore_index=True,
    )
    per_batch.to_csv(args.out / "per_batch.csv", index=False)
    summary.to_csv(args.out / "summary.csv", index=False)
    (args.out / "runs.json").write_text(json.dumps(infos, indent=2) + "\n")
    (args.out / "summary.md").write_text(table(summary) + "\n")
    figure(summary, args.out / "gradient_fidelity.png")
    print(table(summary))


if __name__ == "__main__":
    main()
