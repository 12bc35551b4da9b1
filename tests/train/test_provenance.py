"""Provenance: every run folder and checkpoint records the resolved config, the overrides, the version and the git
commit; --resume refuses a config that differs from the run's (unless --force); `scpo eval` takes the environment and
the policy settings from the run it evaluates."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from helpers import REPO
from helpers.runs import CORRIDOR, cli, fingerprint, one_line, train_cli


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    """A corridor run stopped after 1 of its iterations (as if killed), trained with lr 2e-3 and seed 5."""
    out = tmp_path_factory.mktemp("prov") / "run"
    result = train_cli(out, "--set", "train.lr=0.002", "--set", "train.seed=5", iterations=1)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def run(stopped, tmp_path) -> Path:
    return Path(shutil.copytree(stopped, tmp_path / "run"))


def _git_head() -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_run_folder_and_checkpoints_record_config_overrides_version_and_commit(stopped):
    import scpo

    for record in (
        json.loads((stopped / "provenance.json").read_text()),
        json.loads((stopped / "checkpoints" / "iter_0001" / "state.json").read_text())["provenance"],
    ):
        assert record["overrides"]["train.lr"] == 0.002 and record["overrides"]["train.seed"] == 5
        assert record["config"]["train"]["lr"] == 0.002 and record["config"]["env"]["name"] == "corridor"
        assert record["config"]["policy"]["tiny_hidden_size"] == 32  # every key, resolved
        assert record["config"]["rollout"]["temperature"] == 1.0  # defaults too
        assert Path(record["config"]["train"]["out_dir"]).is_absolute()  # paths made absolute
        assert record["profile"] == "smoke" and record["scpo_version"] == scpo.__version__
        assert record["git"]["commit"] == _git_head() and isinstance(record["git"]["dirty"], bool)
    summary = json.loads((stopped / "summary.json").read_text())
    # `profile` is the config's profile; the policy is under its own name
    assert summary["profile"] == "smoke" and summary["policy"] == "tiny"
    assert summary["overrides"]["train.lr"] == 0.002 and summary["git"]["commit"] == _git_head()


def test_config_differences_leave_out_what_a_resume_may_change():
    from scpo.run.provenance import RESUME_MAY_CHANGE, config_differences

    saved = {
        "train": {"lr": 1e-3, "iterations": 3, "seed": 0},
        "credit": {"method": "gigpo"},
        "eval": {"n": 4},
        "profile": "smoke",
    }
    now = {
        "train": {"lr": 1e-2, "iterations": 9, "seed": 0},
        "credit": {"method": "scpo"},
        "eval": {"n": 8},
        "profile": "cpu",
    }
    assert config_differences(saved, now) == [("credit.method", "gigpo", "scpo"), ("train.lr", 1e-3, 1e-2)]
    assert config_differences(saved, saved) == []
    assert config_differences({"a": {"b": 1}}, {"a": {"c": 1}}, ()) == [("a.b", 1, "<absent>"), ("a.c", "<absent>", 1)]
    assert "train.iterations" in RESUME_MAY_CHANGE and "train.lr" not in RESUME_MAY_CHANGE


def test_resume_refuses_another_method_seed_or_lr_unless_forced(run):
    """`--resume` with another method, seed and lr is refused in one line naming each difference (the summary would
    claim the new ones for a run made with the old), and accepted with --force."""
    before = fingerprint(run)
    result = train_cli(run, "--resume", "--set", "credit.method=scpo", "--set", "train.seed=6", iterations=2)
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert "credit.method: 'gigpo' in the run, 'scpo' now" in line and "train.seed: 5 in the run, 6 now" in line
    assert "train.lr: 0.002 in the run, 0.001 now" in line and "--force" in line
    assert fingerprint(run) == before

    result = train_cli(
        run,
        "--resume",
        "--set",
        "credit.method=scpo",
        "--set",
        "train.seed=6",
        "--set",
        "train.lr=0.002",
        "--force",
        iterations=2,
    )
    assert result.exit_code == 0, result.output
    record = json.loads((run / "provenance.json").read_text())
    assert record["config"]["credit"]["method"] == "gigpo"  # the run's first record is kept
    (resumed,) = record["resumes"]
    assert resumed["from_checkpoint"] == "iter_0001"
    assert ["credit.method", "gigpo", "scpo"] in resumed["forced_differences"]


def test_resume_with_more_iterations_only_is_accepted(run):
    result = train_cli(run, "--resume", "--set", "train.lr=0.002", "--set", "train.seed=5", iterations=2)
    assert result.exit_code == 0, result.output
    assert pd.read_csv(run / "history.csv")["iteration"].tolist() == [0, 1]


# ---- eval reads the run


def test_eval_takes_env_and_policy_settings_from_the_run(stopped, tmp_path):
    """`scpo eval` evaluates on the run's environment, not on params.yaml's env.name: a
    corridor run with a 4-step limit is evaluated with no env option at all: on the corridor, at most 4 steps."""
    out = tmp_path / "eval"
    result = cli("eval", "--profile", "smoke", "--checkpoint", stopped, "--out", out)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "eval.json").read_text())
    assert report["env"] == "corridor"
    assert set(report["splits"]) == {"valid_seen", "valid_unseen"}
    assert all(s["episode_length"] <= CORRIDOR["env.corridor.max_steps"] for s in report["splits"].values())
    assert f"wrote {out}/eval.json" in result.stdout.strip().splitlines()[-1]

    contradicting = cli(
        "eval",
        "--profile",
        "smoke",
        "--checkpoint",
        stopped,
        "--out",
        tmp_path / "e2",
        "--set",
        "env.corridor.max_steps=9",
    )
    assert contradicting.exit_code == 2
    assert "env.corridor.max_steps=9 (the run: 4)" in one_line(contradicting.stderr)
    assert not (tmp_path / "e2").exists()

    again = cli("eval", "--profile", "smoke", "--checkpoint", stopped, "--out", out)
    assert again.exit_code == 1 and "exists (an earlier evaluation)" in one_line(again.stderr)


def test_an_option_added_after_the_run_was_saved_is_no_difference_at_its_default():
    """A run saved before `credit.mc_advantage` existed resumes when the new option is left at its default; set to
    anything else, it is a difference like any other."""
    from scpo.config import Config
    from scpo.run.provenance import config_differences

    now = Config().model_dump(mode="json")
    saved = Config().model_dump(mode="json")
    del saved["credit"]["mc_advantage"]
    assert config_differences(saved, now) == []
    now["credit"]["mc_advantage"]["rollouts"] = 4
    assert config_differences(saved, now) == [("credit.mc_advantage.rollouts", "<absent>", 4)]
    assert config_differences({"a": 1}, {"a": 1, "b": 2}, (), defaults={"b": 2}) == []
    assert config_differences({"a": 1}, {"a": 1, "b": 3}, (), defaults={"b": 2}) == [("b", "<absent>", 3)]
