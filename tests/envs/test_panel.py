"""Fixed task panels: stratified over task types, deterministic, and what RL draws from."""

from __future__ import annotations

from collections import Counter

import pytest

from scpo.config import load_config
from scpo.envs.panel import task_panel, training_pool
from scpo.envs.registry import env_settings


def _env(data_root, name="alfworld"):
    overrides = {"env.name": name, "data.root": str(data_root), "data.alfworld_require_all": False}
    return env_settings(load_config("params.yaml", profile="smoke", overrides=overrides))


def test_a_panel_takes_every_task_type_round_robin(alfworld_games_root):
    env = _env(alfworld_games_root.parent)
    pool = env.package.list_tasks("train", data_root=env.data_root)
    types = Counter(env.package.task_type(t, data_root=env.data_root) for t in pool)
    panel = task_panel(env, size=len(types))
    assert Counter(env.package.task_type(t, data_root=env.data_root) for t in panel) == dict.fromkeys(types, 1)
    assert panel == sorted(panel) and set(panel) <= set(pool)
    assert task_panel(env, size=len(types)) == panel  # deterministic
    assert task_panel(env, size=len(pool)) == sorted(pool)
    with pytest.raises(ValueError, match=f"train.panel_size={len(pool) + 1} is more than the {len(pool)} tasks"):
        task_panel(env, size=len(pool) + 1)


def test_rl_draws_from_the_panel_or_the_whole_split():
    env = _env("data", name="corridor")
    whole = env.package.list_tasks("train")
    assert training_pool(env, None) == whole
    panel = training_pool(env, 4, panel_seed=3)
    assert len(panel) == 4 and Counter(env.package.task_type(t) for t in panel) == {"walk": 2, "key": 2}
    assert training_pool(env, 4, panel_seed=3) == panel and training_pool(env, 4, panel_seed=4) != panel
