"""Every estimator of the credit registry runs 2 RL iterations end to end (smoke size: the registered corridor test env,
a 1-layer tiny policy warm-started by a few seconds of SFT), writing every artefact of the run-directory contract."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from scpo.batch import RolloutBatch
from scpo.config import load_config
from scpo.credit import available_methods
from scpo.credit.registry import METHODS
from scpo.envs import corridor

SMOKE = {
    "policy.tiny_hidden_size": 32,
    "policy.tiny_layers": 1,
    "policy.tiny_heads": 2,
    "policy.tiny_vocab_size": 300,
    "policy.max_new_tokens": 10,
    "env.name": "corridor",
    "env.corridor.max_steps": 5,
    "rollout.n_tasks": 2,
    "rollout.group_size": 3,
    "train.iterations": 2,
    "train.checkpoint_every": 1,
    "train.sft.n_demos": 12,
    "train.sft.epochs": 8,
    "train.sft.lr": 3e-3,
    "train.lr": 1e-3,
    "eval.n_episodes": 3,
    "train.skip_zero_advantage": False,
}  # every iteration takes optimizer steps, whatever the groups' rewards


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    from scpo.train.run import run_training

    root = tmp_path_factory.mktemp("runs")
    cfg = load_config("params.yaml", profile="smoke", overrides={**SMOKE, "train.out_dir": str(root)})
    summary = run_training(cfg, stage="sft")
    return root, summary


def test_sft_writes_a_loadable_model_and_lowers_the_loss(sft_run):
    from scpo.policy import load_policy

    root, summary = sft_run
    assert summary["demos"]["n_won"] == summary["demos"]["n_tasks"] == 12
    assert summary["bc"]["loss_last_epoch"] < summary["bc"]["loss_first_epoch"]
    policy = load_policy(summary["run_dir"])
    assert policy.profile == "tiny"
    assert json.loads((root / "corridor/sft/seed0/summary.json").read_text())["stage"] == "sft"


PLANNER_METHODS = [m for m in available_methods() if METHODS[m].oracle]


def _train_two_iterations(env: str, method: str, sft: dict, out, data_root=None) -> dict:
    from scpo.train.run import run_training

    overrides = {
        **SMOKE,
        "env.name": env,
        "env.alfworld.max_steps": 5,
        "credit.method": method,
        "train.init_from": sft["run_dir"],
        "train.out_dir": str(out),
    }
    if data_root is not None:
        overrides["data.root"] = str(data_root)
    return run_training(load_config("params.yaml", profile="smoke", overrides=overrides), stage="rl")


@pytest.mark.parametrize("method", available_methods())
def test_every_estimator_runs_two_iterations(method, sft_run, tmp_path):
    """On the corridor env, whose exact planner serves the oracle too."""
    _check_run(tmp_path, "corridor", method, _train_two_iterations("corridor", method, sft_run[1], tmp_path))


@pytest.mark.parametrize("method", PLANNER_METHODS)
def test_the_oracle_runs_two_iterations_on_alfworld_games(method, sft_run, tmp_path, alfworld_data_root):
    """The methods that read a planner's progress, on real ALFWorld games (its planner, replaying each trajectory)."""
    summary = _train_two_iterations("alfworld", method, sft_run[1], tmp_path, data_root=alfworld_data_root.parent)
    _check_run(tmp_path, "alfworld", method, summary)


def _check_run(tmp_path, env: str, method: str, summary: dict) -> None:
    run = tmp_path / env / method / "seed0"
    assert summary["iterations"] == 2 and summary["method"] == method
    hist = pd.read_csv(run / "history.csv")
    assert hist["iteration"].tolist() == [0, 1]
    for col in (
        "charts/success_rate",
        "credit/frac_all_failed_groups",
        "losses/clipfrac",
        "losses/kl",
        "perf/env_s",
        "perf/gen_s",
        "perf/credit_s",
        "perf/update_s",
    ):
        assert col in hist and hist[col].notna().all(), col
    assert np.isfinite(hist["losses/pg"]).all() and (hist["losses/n_updates"] >= 1).all()
    batch = RolloutBatch.read(run / "rollouts" / "iter_0001.parquet")
    assert batch.n_rows == hist["perf/steps"].iloc[1] and batch.n_groups == 2 and batch.n_trajectories == 6
    assert (run / "checkpoints" / "iter_0002" / "optimizer.safetensors").exists()
    assert (run / "model" / "model.safetensors").exists() and (run / "dvclive" / "metrics.json").exists()
    if method == "scpo":
        assert "credit/scpo_credit_mean" in hist and "credit/scpo_frac_steps_credited" in hist
    if method in PLANNER_METHODS:  # the saved rollouts carry the planner's q
        assert batch.oracle_progress is not None and np.all(batch.oracle_progress <= 1)
    if METHODS[method].exact_values:  # the saved rollouts carry the policy's exact success values
        v = batch.exact_value
        assert v is not None and np.all((v >= 0) & (v <= 1)) and "perf/exact_values_s" in hist


@pytest.mark.parametrize("skip", [True, False])
def test_steps_without_signal_move_the_policy_only_when_not_skipped(skip, sft_run, tmp_path):
    """One step cannot finish a corridor, so every rollout fails and every GiGPO advantage is 0. With
    `train.skip_zero_advantage` no step enters the update and the weights stay the warm start's; without it the KL and
    entropy terms alone move them."""
    import torch
    from safetensors.torch import load_file

    from scpo.train.run import run_training

    _, sft = sft_run
    cfg = load_config(
        "params.yaml",
        profile="smoke",
        overrides={
            **SMOKE,
            "env.corridor.max_steps": 1,
            "train.iterations": 1,
            "credit.method": "gigpo",
            "train.skip_zero_advantage": skip,
            "train.init_from": sft["run_dir"],
            "train.out_dir": str(tmp_path),
        },
    )
    run_training(cfg, stage="rl")
    run = tmp_path / "corridor" / "gigpo" / "seed0"
    hist = pd.read_csv(run / "history.csv")
    assert hist["credit/frac_all_failed_groups"].iloc[0] == 1.0
    assert hist["losses/frac_steps_updated"].iloc[0] == (0.0 if skip else 1.0)
    before = load_file(f"{sft['run_dir']}/model/model.safetensors")
    after = load_file(run / "model" / "model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before) == skip


def test_evaluation_writes_success_per_split_and_task_type(sft_run, tmp_path):
    from scpo.train.evaluate import evaluation_tasks, run_evaluation

    _, sft = sft_run
    cfg = load_config("params.yaml", profile="smoke", overrides={**SMOKE, "eval.n_episodes": 4})
    result = run_evaluation(cfg, checkpoint=sft["run_dir"], out_dir=tmp_path)
    table = pd.read_csv(tmp_path / "eval.csv")
    assert list(table.columns) == ["split", "task_type", "n", "success"]
    assert json.loads((tmp_path / "eval.json").read_text()) == result
    for split in ("valid_seen", "valid_unseen"):
        rows = table[table["split"] == split]
        overall = rows[rows["task_type"] == "all"].iloc[0]
        per_type = rows[rows["task_type"] != "all"]
        assert overall["n"] == 4 == per_type["n"].sum() == result["splits"][split]["n"]
        assert overall["success"] == pytest.approx((per_type["n"] * per_type["success"]).sum() / 4)
    assert evaluation_tasks(list("abcdefghij"), 4) == ["a", "d", "g", "j"]


def test_evaluation_repeats_each_game_with_independent_episodes(sft_run, tmp_path, monkeypatch):
    """episodes_per_task = k plays every game k times; the success is the mean over all k x games episodes."""
    from scpo.train.evaluate import run_evaluation

    played: list[str] = []
    real_make_env = corridor.make_env

    def counting_make_env(task_id, *args, **kwargs):
        played.append(task_id)
        return real_make_env(task_id, *args, **kwargs)

    monkeypatch.setattr(corridor, "make_env", counting_make_env)
    _, sft = sft_run
    cfg = load_config(
        "params.yaml",
        profile="smoke",
        overrides={
            **SMOKE,
            "eval.n_episodes": 4,
            "eval.episodes_per_task": 3,
            "env.corridor.eval_splits": ["valid_unseen"],
        },
    )
    result = run_evaluation(cfg, checkpoint=sft["run_dir"], out_dir=tmp_path)
    split = result["splits"]["valid_unseen"]
    assert split["n"] == 12 == sum(t["n"] for t in split["per_task_type"].values())
    assert len(played) == 12 and all(played.count(g) == 3 for g in set(played)) and len(set(played)) == 4


def test_rl_start_base_ignores_the_warm_start_and_sft_is_skipped(sft_run, tmp_path, monkeypatch):
    """verl-agent's start (gpu profile, train.rl_start: base): RL starts from the profile's model even when the pipeline
    passes the SFT run as init_from, and the SFT stage writes only a summary saying it was skipped. 0 iterations: the
    saved model is the start."""
    from safetensors.torch import load_file

    from scpo.train.run import run_training

    _, sft = sft_run
    base = {**SMOKE, "train.iterations": 0, "train.init_from": sft["run_dir"], "train.out_dir": str(tmp_path)}
    warm = load_file(f"{sft['run_dir']}/model/model.safetensors")
    for start in ("warm_start", "base"):
        cfg = load_config("params.yaml", profile="smoke", overrides={**base, "train.rl_start": start})
        summary = run_training(cfg, stage="rl", out_dir=tmp_path / start)
        saved = load_file(tmp_path / start / "model" / "model.safetensors")
        same = all(torch.equal(saved[k], warm[k]) for k in warm)
        assert same == (start == "warm_start") and summary["rl_start"] == start
        assert summary["init_from"].endswith("init_model") == (start == "base")
    skipped = run_training(
        load_config("params.yaml", profile="smoke", overrides={**base, "train.rl_start": "base"}),
        stage="sft",
        out_dir=tmp_path / "sft",
    )
    assert skipped["skipped"].startswith("train.rl_start=base") and not (tmp_path / "sft" / "model").exists()
    assert json.loads((tmp_path / "sft" / "summary.json").read_text())["stage"] == "sft"


def test_kl_reference_base_measures_kl_to_the_profile_model(sft_run, tmp_path, monkeypatch):
    """From the warm start, the KL to the start is 0 at the first minibatch and small after; the KL to the profile's
    (untrained) model is that of two different policies (train.kl_reference: base)."""
    from scpo.train.run import run_training

    _, sft = sft_run
    kl = {}
    for ref in ("start", "base"):
        cfg = load_config(
            "params.yaml",
            profile="smoke",
            overrides={
                **SMOKE,
                "train.iterations": 1,
                "credit.method": "gigpo",
                "train.kl_reference": ref,
                "train.init_from": sft["run_dir"],
                "train.out_dir": str(tmp_path / ref),
            },
        )
        run_training(cfg, stage="rl")
        kl[ref] = pd.read_csv(tmp_path / ref / "corridor" / "gigpo" / "seed0" / "history.csv")["losses/kl"].iloc[0]
    assert kl["start"] < 0.05 < kl["base"]
