"""The run decided once: `make_plan` resolves what a run reads (folder and mode, environment, task pool, models,
device, resume, provenance) into a frozen plan, writing nothing; the trainer meets every batch column a credit method
may declare."""

from __future__ import annotations

import dataclasses

import pytest

from scpo.config import load_config
from scpo.run.plan import make_plan

from helpers.runs import CORRIDOR


def _cfg(**overrides):
    return load_config("params.yaml", profile="smoke", overrides={**CORRIDOR, "train.device": "cpu", **overrides})


def test_a_fresh_plan_resolves_everything_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    plan = make_plan(_cfg(), "rl", out)
    assert not out.exists()  # nothing written
    assert (plan.stage, plan.mode, plan.run_dir, plan.resume) == ("rl", "fresh", out, None)
    assert plan.env.name == "corridor" and plan.env.history_length == 2
    split = plan.env.package.list_tasks(plan.env.train_split, data_root=plan.env.data_root)
    assert list(plan.tasks) == split and set(plan.demo_tasks) <= set(split)
    # tiny, no warm start: built once into the run folder, and the KL reference is that same start
    assert (plan.start.path, plan.start.build) == (out / "init_model", "tiny")
    assert plan.reference is plan.start and plan.device.type == "cpu"
    assert plan.record["task_pool"]["count"] == len(split) and plan.record["start_model"]["policy"]["built"]
    assert plan.record["config"]["env"]["name"] == "corridor"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.mode = "resume"


def test_the_plan_says_where_the_policy_and_the_reference_start(tmp_path):
    from transformers import LlamaConfig

    warm = tmp_path / "warm"
    LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=128, num_hidden_layers=1).save_pretrained(warm)
    plan = make_plan(_cfg(**{"train.init_from": str(warm)}), "rl", tmp_path / "a")
    assert plan.warm_start and (plan.start.path, plan.start.build) == (warm, None)
    assert plan.reference is plan.start and "kl_reference" not in plan.record["start_model"]
    base = make_plan(_cfg(**{"train.init_from": str(warm), "train.kl_reference": "base"}), "rl", tmp_path / "b")
    assert base.reference.build == "tiny" and base.reference is not base.start
    assert base.record["start_model"]["kl_reference"]["built"] == "in the run folder"
    assert make_plan(_cfg(**{"train.kl_coef": 0.0}), "rl", tmp_path / "c").reference is None
    panel = make_plan(_cfg(**{"train.panel_size": 3}), "rl", tmp_path / "d")
    assert len(panel.tasks) == 3 and panel.record["task_pool"]["panel"] == {"size": 3, "seed": 0}


def test_the_trainer_adds_every_column_a_method_may_declare():
    from scpo.credit.spec import COLUMNS
    from scpo.train.trainer import COLUMN_PROVIDERS

    assert set(COLUMN_PROVIDERS) == set(COLUMNS)
