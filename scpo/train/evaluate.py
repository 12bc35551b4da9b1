"""`run_evaluation(cfg, checkpoint, out_dir)`: `cfg.eval.episodes_per_task` episodes (default one) per task on each
evaluation split of the environment (`env.<name>.eval_splits`: ALFWorld valid_seen and valid_unseen, WebShop test) at
`cfg.eval.temperature`; success overall and per task type, written as `eval.json` and `eval.csv` (split, task_type, n,
success; task_type "all" is the split's overall row; `n` counts episodes, so games x episodes_per_task).

`eval.n_episodes` tasks are taken evenly spaced over the split's sorted task list (ALFWorld's ids sort by task type, so
the first n would cover only one or two types).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from scpo.config import Config
from scpo.policy import load_policy, resolve_model_dir
from scpo.policy.placement import resolve_device
from scpo.envs.registry import env_settings
from scpo.rollout import collect_rollouts, make_engine
from scpo.train.seeding import iteration_seed, seed_everything, set_threads

__all__ = ["run_evaluation", "evaluation_tasks"]


def evaluation_tasks(all_tasks: list[str], n: int | None) -> list[str]:
    """All tasks, or `n` evenly spaced ones (deterministic)."""
    if n is None or n >= len(all_tasks):
        return list(all_tasks)
    idx = np.unique(np.linspace(0, len(all_tasks) - 1, n).round().astype(int))
    return [all_tasks[i] for i in idx]


def run_evaluation(cfg: Config, checkpoint: Path, out_dir: Path) -> dict:
    """Evaluate the policy at `checkpoint` (model / run / checkpoint dir); returns the eval.json dict."""
    t_start = time.perf_counter()
    set_threads(cfg.train.torch_threads)
    env = env_settings(cfg)
    model_dir = resolve_model_dir(checkpoint)
    policy = load_policy(model_dir, dtype=cfg.policy.dtype, device=resolve_device(cfg.train.device))
    engine = make_engine(cfg, policy, model_dir=model_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {"checkpoint": str(model_dir), "env": cfg.env.name, "temperature": cfg.eval.temperature,
                    "splits": {}}
    rows = []
    for split in env.eval_splits:
        seed_everything(iteration_seed(cfg.train.seed, -1))
        tasks = evaluation_tasks(env.package.list_tasks(split, data_root=env.data_root), cfg.eval.n_episodes)
        trajectories, timing = collect_rollouts(
            env.package, tasks, cfg.eval.episodes_per_task, engine, env_name=env.name, seed=cfg.train.seed,
            data_root=env.data_root, max_steps=env.max_steps, history_length=cfg.env.history_length,
            temperature=cfg.eval.temperature, top_p=1.0, env_options=env.options, desc=f"eval {split}")
        won = np.array([t.won for t in trajectories], dtype=float)
        per_type = {}
        for tt in sorted({t.task_type for t in trajectories}):
            sel = np.array([t.task_type == tt for t in trajectories])
            per_type[tt] = {"n": int(sel.sum()), "success": float(won[sel].mean())}
            rows.append({"split": split, "task_type": tt, "n": int(sel.sum()), "success": float(won[sel].mean())})
        rows.append({"split": split, "task_type": "all", "n": len(trajectories), "success": float(won.mean())})
        result["splits"][split] = {
            "n": len(trajectories), "success": float(won.mean()),
            "task_score": float(np.mean([t.task_score for t in trajectories])),
            "episode_length": float(np.mean([len(t) for t in trajectories])),
            "invalid_rate": float(np.mean([not s.valid for t in trajectories for s in t.steps])),
            "per_task_type": per_type, "env_s": timing.env_s, "gen_s": timing.gen_s}
    result["wall_s"] = time.perf_counter() - t_start
    (out_dir / "eval.json").write_text(json.dumps(result, indent=2))
    import pandas as pd

    pd.DataFrame(rows, columns=["split", "task_type", "n", "success"]).to_csv(out_dir / "eval.csv", index=False)
    return result
