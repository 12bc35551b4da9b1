"""CI's smoke run of the pipeline: every notebook executed by Papermill, in pipeline order, on the smoke profile shrunk
further by overrides (one ALFWorld task, two rollouts, four steps, one RL iteration), writing only under tmp_path, on
the data committed under tests/fixtures (15 ALFWorld games, a WebShop sample), so it runs on a fresh clone.

This is the same chain `dvc repro` runs (01 prepare -> 02 sft -> 02 rl -> 03 evaluate -> 04 credit maps -> 05
semantic inconsistency -> 07 credit fidelity -> 06 tables), with the same notebooks and the same config validation; only
the sizes differ.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from helpers import REPO


def _execute(name: str, executed_dir: Path, **parameters) -> Path:
    import papermill as pm

    out = executed_dir / f"{name}.ipynb"
    executed_dir.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(
        str(REPO / "notebooks" / f"{name}.ipynb"),
        str(out),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(REPO),
        progress_bar=False,
    )
    return out


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, alfworld_games_root, webshop_sample_dir):
    root = tmp_path_factory.mktemp("smoke")
    (root / "data").mkdir()
    (root / "data" / "alfworld").symlink_to(alfworld_games_root, target_is_directory=True)  # the 15 committed games
    overrides = "; ".join(
        [
            f"data.root={root / 'data'}",
            f"train.out_dir={root / 'runs'}",
            f"learning.out_dir={root / 'runs' / 'learning'}",
            "data.alfworld_require_all=false",
            f"data.webshop_source={webshop_sample_dir}",
            "rollout.n_tasks=1",
            "rollout.group_size=2",
            "env.alfworld.max_steps=4",
            "train.iterations=1",
            "train.sft.n_demos=4",
            "train.sft.epochs=1",
            "eval.n_episodes=1",
            "env.alfworld.eval_splits=[valid_seen]",
            "policy.max_new_tokens=16",
            "report.methods=[scpo]",
            "report.seeds=[0, 1]",
            "report.envs=[alfworld]",
        ]
    )
    return {
        "root": root,
        "nb": root / "executed",
        "reports": root / "reports",
        "common": {"profile": "smoke", "overrides": overrides},
    }


def test_every_notebook_runs_in_pipeline_order(smoke):
    common, nb, reports, root = smoke["common"], smoke["nb"], smoke["reports"], smoke["root"]

    _execute("01_prepare_data", nb, **common)
    summary = json.loads((root / "data" / "prepare_summary.json").read_text())
    assert summary["alfworld"] == {"train": 6, "valid_seen": 7, "valid_unseen": 1, "valid_train": 1, "total": 15}
    assert summary["webshop"]["products"] == 200 and summary["webshop"]["goals"] == 100

    _execute("02_train", nb / "sft", stage="sft", env="alfworld", seed=0, **common)
    sft = root / "runs" / "alfworld" / "sft" / "seed0"
    assert (sft / "summary.json").exists()

    # as the DVC stages do: every seed of report.seeds, side by side (scpo.train.seed_pool)
    _execute(
        "02_train", nb / "rl", stage="rl", method="scpo", env="alfworld", seeds="report", init_from=str(sft), **common
    )
    for seed in (0, 1):
        run = root / "runs" / "alfworld" / "scpo" / f"seed{seed}"
        assert (run / "rollouts" / "iter_0000.parquet").exists()
        assert len(pd.read_csv(run / "history.csv")) == 1
    assert (root / "runs" / "alfworld" / "scpo" / "manifest.json").exists()

    _execute("03_evaluate", nb, method="scpo", env="alfworld", seeds="report", reports_dir=str(reports), **common)
    for seed in (0, 1):
        eval_dir = reports / "eval" / "alfworld" / "scpo" / f"seed{seed}"
        assert set(pd.read_csv(eval_dir / "eval.csv")["split"]) == {"valid_seen"}

    _execute("04_credit_maps", nb, env="alfworld", reports_dir=str(reports), **common)
    assert (reports / "figures" / "credit_maps_alfworld.png").stat().st_size > 10_000

    _execute("05_semantic_inconsistency", nb, reports_dir=str(reports), **common)
    table = pd.read_csv(reports / "tables" / "semantic_inconsistency.csv")
    assert set(table["estimator"]) == {"scpo"}
    assert (reports / "figures" / "semantic_inconsistency.png").exists()

    _execute(
        "07_credit_fidelity",
        nb,
        reports_dir=str(reports),
        n_tasks=2,
        seeds="0",
        eps="0.5",
        estimators="grpo,gigpo,scpo,hcapo,oracle,shuffled",
        **common,
    )
    fid = pd.read_csv(reports / "tables" / "credit_fidelity.csv")
    assert set(fid["estimator"]) == {"grpo", "gigpo", "scpo", "hcapo", "oracle", "shuffled"}
    assert fid[(fid.estimator == "oracle") & (fid.kind == "all")]["auc_mean"].iloc[0] == 1.0
    trained = pd.read_csv(reports / "tables" / "credit_fidelity_trained.csv")
    assert set(trained["policy_of"]) == {"scpo"}  # the smoke RL run's saved rollouts, labelled by replay
    assert (reports / "figures" / "credit_fidelity.png").exists() and (
        reports / "figures" / "scpo_defaults_sweep.png"
    ).exists()

    _execute(
        "08_learning",
        nb,
        reports_dir=str(reports),
        fidelity_table=str(reports / "tables" / "credit_fidelity.csv"),
        **common,
    )
    fid = pd.read_csv(reports / "tables" / "learning_fidelity.csv")  # the four methods' noisy-optimal fidelity AUCs
    row = fid[fid["fidelity_source"] == "noisy-optimal rollouts (notebook 07)"].iloc[0]
    assert row["n_methods"] == 4 and row["n_seeds"] == 2  # rho: NaN where every AULC ties (smoke runs learn nothing)
    ranking = pd.read_csv(reports / "tables" / "learning_ranking.csv")
    assert set(ranking["method"]) == {"grpo", "gigpo", "oracle", "shuffled"} and (ranking["seeds"] == 2).all()
    diffs = pd.read_csv(reports / "tables" / "learning_differences.csv")
    assert set(diffs["reference"]) == {"grpo", "gigpo"} and {"p", "p_holm", "lo", "hi"} <= set(diffs.columns)
    curves = pd.read_csv(reports / "tables" / "learning_curves.csv")
    assert sorted(set(curves["iteration"])) == [0, 1, 2]
    # within a seed every method starts from the same warm start on the same episode list
    start = curves[curves.iteration == 0].groupby("seed")["success"].nunique()
    assert (start == 1).all()
    assert (reports / "figures" / "learning_curves_alfworld.png").exists()

    _execute("06_paper_tables", nb, reports_dir=str(reports), learning_study="", **common)
    assert "Learning ranking" in (reports / "results.md").read_text()
    results = pd.read_csv(reports / "tables" / "paper" / "results.csv")
    assert results["method"].tolist() == ["scpo"] and "alfworld all" in results.columns
    assert "published" in (reports / "results.md").read_text()
    assert (reports / "figures" / "paper" / "success_curves_alfworld.png").exists()


def test_the_sokoban_notebook_writes_its_tables_on_the_smoke_profile(tmp_path):
    """notebook 09 (DVC stage `sokoban`) on the smoke profile, data-free: its tables name the success metric, every
    trained estimator is compared with GRPO and with the exact advantage, fidelity and wrong-sign credit sit beside
    AULC, and a second execution reuses the finished runs."""
    reports, runs = tmp_path / "reports", tmp_path / "runs"
    overrides = f"sokoban.out_dir={runs}"
    _execute("09_sokoban", tmp_path / "nb", profile="smoke", reports_dir=str(reports), overrides=overrides)
    tables = reports / "tables"
    learning = pd.read_csv(tables / "sokoban_learning.csv")
    assert set(learning["method"]) == {"exact_advantage", "grpo", "shuffled"} and (learning["seeds"] == 6).all()
    assert {"cos_panel_mean", "wrong_given_positive", "wrong_given_negative"} <= set(learning.columns)
    diffs = pd.read_csv(tables / "sokoban_differences.csv")
    assert set(zip(diffs["reference"], diffs["method"])) == {
        ("grpo", "exact_advantage"),
        ("grpo", "shuffled"),
        ("exact_advantage", "grpo"),
        ("exact_advantage", "shuffled"),
    }
    assert {"p", "p_holm", "p_t", "p_t_holm", "mde_80_power", "significant"} <= set(diffs.columns)
    for name in ("learning", "differences", "fidelity", "rank_correlation"):
        assert "Success: sampled success at T = 1, exact" in (tables / f"sokoban_{name}.md").read_text()
    assert (reports / "figures" / "sokoban_learning_curves.png").exists()
    before = {p.name: p.stat().st_mtime_ns for p in (runs / "runs").glob("*.csv")}
    _execute("09_sokoban", tmp_path / "nb", profile="smoke", reports_dir=str(reports), overrides=overrides)
    assert {p.name: p.stat().st_mtime_ns for p in (runs / "runs").glob("*.csv")} == before  # not repeated
