"""Fixed task panels: a stratified set of training tasks that RL draws from (`train.panel_size`), so that a learning
curve measures how fast an agent learns what it practises, on the same games for every estimator.

    panel = task_panel(env, size=12, seed=0)    # ALFWorld: 2 games of each of the 6 task types

The panel takes tasks round-robin over the task types of the training split (types in sorted order, each type's
tasks shuffled by `seed`), so every type is represented while there are tasks of it; the result is sorted.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from scpo.envs.registry import EnvSettings

__all__ = ["task_panel", "training_pool"]


def task_panel(env: EnvSettings, size: int, seed: int = 0, split: str | None = None) -> list[str]:
    """`size` tasks of `split` (default: the training split), stratified over task types (module docstring)."""
    split = split or env.train_split
    pool = env.package.list_tasks(split, data_root=env.data_root)
    if size < 1:
        raise ValueError(f"train.panel_size must be >= 1, got {size}")
    if size > len(pool):
        raise ValueError(f"train.panel_size={size} is more than the {len(pool)} tasks of {env.name}'s {split} split")
    by_type: dict[str, list[str]] = defaultdict(list)
    for task in pool:
        by_type[env.package.task_type(task, data_root=env.data_root)].append(task)
    rng = np.random.default_rng([int(seed), 11])
    queues = {t: [tasks[i] for i in rng.permutation(len(tasks))] for t, tasks in sorted(by_type.items())}
    chosen: list[str] = []
    while len(chosen) < size:
        for tasks in queues.values():
            if tasks and len(chosen) < size:
                chosen.append(tasks.pop(0))
    return sorted(chosen)


def training_pool(env: EnvSettings, panel_size: int | None, panel_seed: int = 0) -> list[str]:
    """The tasks RL draws from: the whole training split, or its panel of `panel_size` tasks."""
    if panel_size is None:
        return env.package.list_tasks(env.train_split, data_root=env.data_root)
    return task_panel(env, panel_size, panel_seed)
