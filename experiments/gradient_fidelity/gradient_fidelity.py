"""Gradient fidelity of every estimator on an environment whose states can be enumerated: per warm start, the cosine
between each estimator's update on a training batch and the exact gradient of the panel's success, over `--batches`
batches of the policy's own rollouts (`scpo.testbeds.gradient_fidelity`).

`--env corridor` (default): the learning benchmark's positive control (experiments/learning_benchmark/
corridor_control.sh): the cpu profile, the corridor's long split with 12 steps per episode, the learning benchmark's
panel (learning.panel_size tasks of train_long, learning.panel_seed), env.history_length. The warm starts are that
script's (an SFT of 8 demonstrations for one epoch; random: at lr 1e-6).

`--env sokoban`: the cpu profile, Sokoban 6x6 with one box and 15 steps (verl-agent's), `env.history_length: 0` (the
grid is the whole state: the exact programme's nodes are (step, grid)), a panel of 16 `train` rooms whose optimal
plan takes at least 4 moves (V* >= 4: about half of the split's rooms take 1-3 moves, which a random policy wins in
15 steps more often than not), drawn as the learning benchmark draws its panel (`--panel-size`, `--min-v-star`).

Both: the learning benchmark's task draws (learning.n_tasks per batch), rollout.group_size rollouts per task at
rollout.temperature.

    env $(python -m scpo.numerics env) python experiments/gradient_fidelity/gradient_fidelity.py \
        --warm-start random=/tmp/scpo_corridor_control/sft_random \
        --warm-start weak=/tmp/scpo_corridor_control/sft_weak \
        --batches 64 --out experiments/gradient_fidelity/results/corridor
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Setting:
    """What an environment's measurement overrides in the cpu profile, and its panel: `panel_size` tasks of the
    training split (None: learning.panel_size), only those whose V* is at least `min_v_star` (None: all)."""

    title: str
    overrides: dict = field(default_factory=dict)
    panel_size: int | None = None
    min_v_star: float | None = None


SETTINGS = {
    "corridor": Setting(
        "the corridor",
        {
            "env.name": "corridor",
            "env.corridor.max_steps": 12,
            "env.corridor.train_split": "train_long",
            "env.corridor.eval_splits": ["valid_long"],
        },
    ),
    "sokoban": Setting(
        "Sokoban 6x6 (1 box)", {"env.name": "sokoban", "env.history_length": 0}, panel_size=16, min_v_star=4
    ),
}


def panel_of(env_name: str, cfg, panel_size: int | None, min_v_star: float | None) -> list[str]:
    """The measurement's panel (the `Setting`'s, or the command line's size and V* threshold)."""
    from scpo.envs.panel import task_panel
    from scpo.envs.registry import env_settings

    size = panel_size or cfg.learning.panel_size
    if min_v_star:
        if env_name != "sokoban":
            raise ValueError(f"--min-v-star needs Sokoban's solver; {env_name} has none here")
        from scpo.testbeds.tabular_policy import sokoban_panel

        return sokoban_panel(size, cfg.learning.panel_seed, min_v_star, env_settings(cfg).train_split)
    return task_panel(env_settings(cfg), size, cfg.learning.panel_seed)


def measure(
    label: str,
    warm_start: Path,
    batches: int,
    seed: int,
    reference_episodes: int = 0,
    progress: bool = True,
    env_name: str = "corridor",
    panel_size: int | None = None,
    min_v_star: float | None = None,
) -> tuple[pd.DataFrame, dict]:
    import torch

    from scpo.config import load_config
    from scpo.envs.registry import env_settings
    from scpo.policy import load_policy
    from scpo.testbeds.gradient_fidelity import gradient_fidelity

    torch.set_num_threads(1)
    setting = SETTINGS[env_name]
    cfg = load_config(Path(__file__).parents[2] / "params.yaml", profile="cpu", overrides=setting.overrides)
    env = env_settings(cfg)
    panel = panel_of(env_name, cfg, panel_size or setting.panel_size, min_v_star or setting.min_v_star)
    policy = load_policy(Path(warm_start) / "model")
    t0 = time.perf_counter()
    res = gradient_fidelity(
        policy,
        panel,
        env_name=env_name,
        max_steps=env.max_steps,
        history_length=cfg.env.history_length,
        n_batches=batches,
        n_tasks=cfg.learning.n_tasks,
        group_size=cfg.rollout.group_size,
        temperature=cfg.rollout.temperature,
        credit=cfg.credit.for_env(env_name),
        data_root=cfg.data.root,
        env_options=env.options,
        max_prompt_tokens=cfg.policy.max_prompt_tokens,
        prompt_overflow=cfg.policy.prompt_overflow,
        seed=seed,
        reference_episodes=reference_episodes,
        progress=progress,
    )
    info = {
        "env": env_name,
        "history_length": cfg.env.history_length,
        "max_steps": env.max_steps,
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


def figure(summary: pd.DataFrame, path: Path, title: str = "the corridor") -> Path:
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
    fig.suptitle(f"Gradient fidelity on {title}: mean over {n} batches, 95% t-interval", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    from scpo.testbeds.gradient_fidelity import summarize_cosines

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", choices=sorted(SETTINGS), default="corridor")
    ap.add_argument("--warm-start", action="append", required=True, help="LABEL=DIR of an SFT run (repeatable)")
    ap.add_argument("--panel-size", type=int, default=None, help="default: the environment's setting")
    ap.add_argument("--min-v-star", type=float, default=None, help="Sokoban: rooms with V* at least this")
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
        per_batch, info = measure(
            label,
            Path(path),
            args.batches,
            args.seed,
            args.reference_episodes,
            env_name=args.env,
            panel_size=args.panel_size,
            min_v_star=args.min_v_star,
        )
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
    figure(summary, args.out / "gradient_fidelity.png", SETTINGS[args.env].title)
    print(table(summary))


if __name__ == "__main__":
    main()
