"""The trainer on Sokoban: a behaviour-cloning warm start on the solver's expert plans, then 2 RL iterations of the
oracle estimator (the planner's q through the registry) with `env.history_length: 0`, where the policy's prompt is a
function of the grid, then an evaluation (smoke size, seconds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scpo.batch import RolloutBatch
from scpo.config import load_config

SMOKE = {
    "policy.tiny_hidden_size": 32,
    "policy.tiny_layers": 1,
    "policy.tiny_heads": 2,
    "policy.tiny_vocab_size": 300,
    "policy.max_new_tokens": 10,
    "env.name": "sokoban",
    "env.sokoban.max_steps": 6,
    "env.history_length": 0,
    "rollout.n_tasks": 2,
    "rollout.group_size": 3,
    "train.iterations": 2,
    "train.checkpoint_every": 1,
    "train.sft.n_demos": 12,
    "train.sft.epochs": 4,
    "eval.n_episodes": 3,
    "train.skip_zero_advantage": False,
}


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    from scpo.train.run import run_training

    root = tmp_path_factory.mktemp("runs")
    cfg = load_config("params.yaml", profile="smoke", overrides={**SMOKE, "train.out_dir": str(root)})
    return run_training(cfg, stage="sft")


def test_the_warm_start_learns_from_expert_plans_that_all_win(sft_run):
    assert sft_run["demos"]["n_won"] == sft_run["demos"]["n_tasks"] == 12
    assert sft_run["bc"]["loss_last_epoch"] < sft_run["bc"]["loss_first_epoch"]


def test_the_oracle_trains_two_iterations_on_prompts_that_are_functions_of_the_grid(sft_run, tmp_path):
    from scpo.train.evaluate import run_evaluation
    from scpo.train.run import run_training

    overrides = {
        **SMOKE,
        "credit.method": "oracle",
        "train.init_from": sft_run["run_dir"],
        "train.out_dir": str(tmp_path),
    }
    summary = run_training(load_config("params.yaml", profile="smoke", overrides=overrides), stage="rl")
    run = tmp_path / "sokoban" / "oracle" / "seed0"
    hist = pd.read_csv(run / "history.csv")
    assert summary["iterations"] == 2 and hist["iteration"].tolist() == [0, 1]
    assert np.isfinite(hist["losses/pg"]).all() and (hist["losses/n_updates"] >= 1).all()
    batch = RolloutBatch.read(run / "rollouts" / "iter_0001.parquet")
    assert batch.oracle_progress is not None and np.all(batch.oracle_progress <= 1)
    by_grid: dict[str, set[str]] = {}
    for obs, prompt in zip(batch.observation, batch.prompt):
        by_grid.setdefault(obs, set()).add(prompt)
    assert all(len(p) == 1 for p in by_grid.values()) and batch.n_rows > len(by_grid)
    result = run_evaluation(
        load_config("params.yaml", profile="smoke", overrides=SMOKE), checkpoint=run, out_dir=tmp_path / "eval"
    )
    assert set(result["splits"]) == {"valid_seen", "valid_unseen"}
    assert all(split["n"] == 3 for split in result["splits"].values())
