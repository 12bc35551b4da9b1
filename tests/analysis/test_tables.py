"""Report tables: pooled success per run, mean ± std over seeds, hard types, ours beside the published figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scpo.config import load_config
from scpo.tables.curves import load_histories, wide_curves
from scpo.tables.published import published_by_method, published_table
from scpo.tables.success import (
    comparison_table,
    format_mean_std,
    load_eval_runs,
    mean_std_over_seeds,
    our_scale_label,
    pooled_success,
    results_table,
    task_type_table,
    write_table,
)


def _write_eval(root, env, method, seed, rows):
    path = root / env / method / f"seed{seed}" / "eval.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows, columns=["split", "task_type", "n", "success"]).to_csv(path, index=False)


@pytest.fixture
def evals(tmp_path):
    # seed 0: easy 2/4 won, pick_two 0/2 won (+ an aggregate row that must not be double counted); seed 1: 4/4, 1/2
    _write_eval(
        tmp_path,
        "alfworld",
        "grpo",
        0,
        [
            ("valid_seen", "look_at_obj", 4, 0.5),
            ("valid_seen", "pick_two_obj", 2, 0.0),
            ("valid_seen", "all", 6, 1 / 3),
        ],
    )
    _write_eval(
        tmp_path, "alfworld", "grpo", 1, [("valid_seen", "look_at_obj", 4, 1.0), ("valid_seen", "pick_two_obj", 2, 0.5)]
    )
    return load_eval_runs(tmp_path, ["alfworld"], ["grpo"], [0, 1])


def test_pooled_success_weights_by_episodes_and_drops_aggregates(evals):
    per_run = pooled_success(evals, ["method", "seed"]).set_index("seed")
    assert per_run.loc[0, "success"] == pytest.approx(2 / 6)  # (2 + 0) / 6, not including the 'all' row
    assert per_run.loc[1, "success"] == pytest.approx(5 / 6)
    assert per_run.loc[0, "n"] == 6


def test_mean_and_sample_std_over_seeds(evals):
    stats = mean_std_over_seeds(pooled_success(evals, ["method", "seed"]), ["method"]).iloc[0]
    assert stats["mean"] == pytest.approx((2 / 6 + 5 / 6) / 2)
    assert stats["std"] == pytest.approx(np.std([2 / 6, 5 / 6], ddof=1))
    assert stats["n_seeds"] == 2


def test_format_mean_std():
    assert format_mean_std(0.728, 0.036) == "72.8 ± 3.6"
    assert format_mean_std(0.5, float("nan")) == "50.0"
    assert format_mean_std(float("nan"), 0.1) == "n/a"


def test_results_table_all_and_hard_columns(evals):
    table = results_table(evals, ["grpo", "scpo"], hard_types=["pick_two"]).set_index("method")
    std_all = np.std([2 / 6, 5 / 6], ddof=1) * 100
    assert table.loc["grpo", "alfworld all"] == f"58.3 ± {std_all:.1f}"  # mean of 2/6 and 5/6
    assert table.loc["grpo", "alfworld hard"] == "25.0 ± 35.4"  # 0 and 50 % on pick_two
    assert table.loc["grpo", "alfworld seeds"] == 2
    assert table.loc["scpo", "alfworld all"] == "n/a"  # no runs: shown, not dropped


def test_task_type_table_marks_hard_types_last(evals):
    table = task_type_table(evals, "alfworld", ["grpo"], hard_types=["pick_two"])
    assert list(table.columns) == ["method", "look_at_obj", "pick_two_obj †"]
    assert table.iloc[0]["look_at_obj"] == "75.0 ± 35.4"


def test_missing_runs_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="webshop/scpo/seed2"):
        load_eval_runs(tmp_path, ["webshop"], ["scpo"], [2])


def test_comparison_keeps_ours_and_published_in_labelled_columns(evals):
    results = results_table(evals, ["grpo", "progpo_c"], hard_types=[])
    table = comparison_table(results, published_by_method(), ["alfworld"], "ours", "published").set_index("method")
    assert table.loc["grpo", "alfworld · published"] == "72.8 ± 3.6"
    assert table.loc["progpo_c", "alfworld · published"] == "—"
    assert table.loc["grpo", "alfworld · ours"] == "58.3 ± 35.4"


def test_published_figures_match_algorithms_md():
    pub = published_by_method()
    assert pub["gigpo"]["webshop"] == "65.0 ± 3.2 (scale std) / 67.4 ± 4.5 (scale none)"
    assert pub["hgpo"] == {"alfworld": "92.8 (in-domain)", "webshop": "71.5"}
    assert pub["scpo"] == {"alfworld": "93.7 ± 4.1", "webshop": "74.8 ± 2.0"}
    table = published_table().set_index(["model", "method", "source"])
    assert table.loc[("Qwen2.5-7B-Instruct", "gigpo", "GiGPO paper"), "webshop"] == "72.8-75.2"
    assert table.loc[("Qwen2.5-7B-Instruct", "grpo", "GiGPO paper"), "alfworld"] == "77.6"
    assert "90.8" not in pub["gigpo"]["alfworld"]  # 7B figures never enter the 1.5B comparison
    assert pub["graphgpo"] == {"alfworld": "92.71", "webshop": "78.65"}
    assert pub["rloo"] == {"alfworld": "69.7 ± 2.5", "webshop": "n/a"}
    assert pub["ppo"] == {"alfworld": "54.4 ± 3.1", "webshop": "51.5 ± 2.9"}
    ppo_7b = table.loc[("Qwen2.5-7B-Instruct", "ppo", "GiGPO paper (secondary sources)")]
    assert (ppo_7b["alfworld"], ppo_7b["webshop"]) == ("80.4 ± 2.7", "68.7 ± 5.1")
    assert table.loc[("Qwen2.5-7B-Instruct", "graphgpo", "GraphGPO paper (secondary sources)"), "webshop"] == "80.31"
    assert table.loc[("Qwen2.5-7B-Instruct", "rloo", "GiGPO paper"), "alfworld"] == "75.5"
    dynamic = table.loc[("Qwen2.5-1.5B-Instruct", "gigpo", "GiGPO paper App. E.4, dynamic sampling")]
    assert (dynamic["alfworld"], dynamic["webshop"]) == ("n/a", "75.0 ± 3.5")
    assert table.loc[("Qwen2.5-1.5B-Instruct", "dapo", "GiGPO paper App. E.4, DAPO"), "webshop"] == "66.1 ± 3.2"
    assert "75.0" not in pub["gigpo"]["webshop"] and "dapo" not in pub  # trained with dynamic sampling: not beside ours


def test_scale_label_names_model_and_scale(repo_root):
    cfg = load_config(
        repo_root / "params.yaml",
        profile="smoke",
        overrides={
            "policy.profile": "tiny",
            "policy.tiny_layers": 3,
            "policy.tiny_hidden_size": 96,
            "rollout.n_tasks": 5,
            "rollout.group_size": 6,
            "train.iterations": 7,
            "eval.n_episodes": None,
        },
    )
    label = our_scale_label(cfg)
    assert label.startswith("tiny Llama (3 layers x 96 hidden")
    assert "5 tasks x 6 rollouts, 7 iterations" in label and "eval all episodes" in label
    assert "profile 'smoke'" in label


def test_write_table_csv_and_markdown(tmp_path):
    df = pd.DataFrame({"method": ["grpo"], "alfworld all": ["50.0 ± 1.0"]})
    csv, md = write_table(df, tmp_path / "t.csv", tmp_path / "t.md", "Title", "a note")
    assert pd.read_csv(csv).equals(df)
    assert md.read_text().startswith("## Title\n\na note\n\n| method")


def test_write_table_shows_a_column_in_its_own_format(tmp_path):
    """p-values such as the 5-seed sign-flip floor 0.0625 are shown whole, other floats at 3 decimals."""
    df = pd.DataFrame({"p": [0.0625, np.nan], "mean": [0.12345, 0.5]})
    csv, md = write_table(df, tmp_path / "t.csv", tmp_path / "t.md", "T", formats={"p": ".4f"})
    assert "| 0.0625 | 0.123  |" in md.read_text() and "| n/a    | 0.500  |" in md.read_text()
    assert pd.read_csv(csv)["p"].iloc[0] == 0.0625


def test_histories_to_wide_seed_mean(tmp_path):
    for seed, values in [(0, [0.0, 0.5]), (1, [0.2, 0.7])]:
        path = tmp_path / "alfworld" / "grpo" / f"seed{seed}" / "history.csv"
        path.parent.mkdir(parents=True)
        pd.DataFrame({"iteration": [0, 1], "charts/success_rate": values}).to_csv(path, index=False)
    wide = wide_curves(load_histories(tmp_path, "alfworld", ["grpo"], [0, 1]))
    assert wide.columns.tolist() == ["iteration", "grpo"]
    np.testing.assert_allclose(wide["grpo"], [0.1, 0.6])
    with pytest.raises(KeyError, match="losses/kl"):
        load_histories(tmp_path, "alfworld", ["grpo"], [0], metrics=["losses/kl"])
