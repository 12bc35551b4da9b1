"""Credit-fidelity metrics worked by hand, and the oracle estimator."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scpo.analysis.fidelity_metrics import group_fidelity, group_view, summarize
from scpo.batch import RolloutBatch
from scpo.credit import available_methods, compute_advantages


def _batch(seed_of_group=(0, 0, 0)):
    # group 0: trajectory 0 failed (q 1, 0, 1), trajectory 1 won (q 1, -1); group 1: one won trajectory (q 1, 1);
    # group 2: a tie between a q = 1 and a q = 0 step
    group = [0, 0, 0, 0, 0, 1, 1, 2, 2]
    return RolloutBatch.from_columns(
        group_id=group,
        traj_id=[0, 0, 0, 1, 1, 2, 2, 3, 3],
        step=[0, 1, 2, 0, 1, 0, 1, 0, 1],
        reward=[0, 0, 0, 0, 10, 0, 10, 0, 0],
        oracle_progress=[1, 0, 1, 1, -1, 1, 1, 1, 0],
        seed=[seed_of_group[g] for g in group],
        task_type=["heat"] * 9,
    )


ADV = np.array([0.5, 0.2, -0.1, 1.0, 0.3, 0.0, 0.0, 0.3, 0.3])


def test_group_counts_by_hand():
    t = group_fidelity(_batch(), ADV).set_index("group")
    # group 0: positives 0.5, -0.1, 1.0 vs negatives 0.2, 0.3 -> 4 of 6 pairs ordered
    assert (t.loc[0, "auc_u"], t.loc[0, "auc_pairs"]) == (4.0, 6)
    assert (t.loc[0, "rec_hits"], t.loc[0, "rec_total"]) == (1, 2)  # q = 1 of the failed trajectory: 0.5, -0.1
    assert (t.loc[0, "fc_hits"], t.loc[0, "fc_total"]) == (2, 2)  # q <= 0: 0.2, 0.3
    assert t.loc[0, "rank_corr"] == pytest.approx(stats.spearmanr(ADV[:5], [1, 0, 1, 1, -1])[0])
    assert t.loc[0, "rank_corr"] == pytest.approx(2 / np.sqrt(80))
    assert list(t["kind"]) == ["mixed", "all_won", "all_failed"]
    assert t.loc[1, "auc_pairs"] == 0 and np.isnan(t.loc[1, "rank_corr"])
    assert (t.loc[2, "auc_u"], t.loc[2, "auc_pairs"]) == (0.5, 1)  # a tie counts one half


def test_summary_pools_groups_and_gives_a_t_interval_over_seeds():
    one = group_fidelity(_batch((0, 0, 0)), ADV)
    two = group_fidelity(_batch((1, 1, 1)), np.where(np.arange(9) == 1, -1.0, ADV))  # seed 1: the 0.2 becomes -1
    s = summarize(pd.concat([one.assign(estimator="x"), two.assign(estimator="x")]))
    row = s[s.kind == "all"].iloc[0]
    auc = np.array([4.5 / 7, 5.5 / 7])  # pooled over groups 0 and 2, per seed
    assert row["auc_mean"] == pytest.approx(auc.mean()) and row["auc_std"] == pytest.approx(auc.std(ddof=1))
    lo, hi = stats.t.interval(0.95, 1, loc=auc.mean(), scale=auc.std(ddof=1) / np.sqrt(2))
    assert (row["auc_lo"], row["auc_hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert row["false_credit_mean"] == pytest.approx((3 / 3 + 2 / 3) / 2)  # q <= 0 steps of groups 0 and 2
    assert row["recovered_progress_mean"] == pytest.approx(2 / 3)  # failed q = 1: rows 0, 2, 7 (0.5, -0.1, 0.3)
    mixed = s[s.kind == "mixed"].iloc[0]
    assert mixed["auc_mean"] == pytest.approx(np.mean([4 / 6, 5 / 6])) and mixed["n_groups"] == 2


def test_group_view_lists_q_beside_each_estimator():
    v = group_view(_batch(), {"x": ADV, "y": -ADV}, group=0)
    assert list(v.columns) == ["trajectory", "won", "step", "action", "q", "x", "y"]
    assert v["q"].tolist() == [1, 0, 1, 1, -1] and v["y"].tolist() == [-0.5, -0.2, 0.1, -1.0, -0.3]
    with pytest.raises(ValueError, match="out of range"):
        group_view(_batch(), {"x": ADV}, group=7)


def test_oracle_estimator_by_hand():
    b = RolloutBatch.from_columns(
        group_id=[0] * 4,
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0, 10, 0, 0],
        valid=[True, True, False, True],
        oracle_progress=[1, 1, 0, -np.inf],
    )
    assert "oracle" in available_methods()
    res = compute_advantages("oracle", b)
    np.testing.assert_allclose(res.advantages, [1, 1, -0.1, -10])
    res = compute_advantages("oracle", b, omega=2.0, dead_end=3.0, episode_weight=1.0)
    ep = compute_advantages("grpo", b).advantages
    np.testing.assert_allclose(res.advantages, ep + 2 * np.array([1, 1, -0.1, -3]))
    with pytest.raises(ValueError, match="oracle_progress"):
        compute_advantages("oracle", RolloutBatch.from_columns(group_id=[0], traj_id=[0], step=[0], reward=[0]))


def test_benchmark_on_two_tasks_puts_the_oracle_on_top(alfworld_data_root, tmp_path):
    """noisy_fidelity end to end (2 games, 2 seeds, eps 0.5): the oracle separates q perfectly and never credits a
    q <= 0 step; the sweep returns one summary per option set."""
    from scpo.config import load_config
    from scpo.testbeds.fidelity import noisy_fidelity, scpo_sweep
    from scpo.testbeds.fidelity_tables import inconsistency_view

    cfg = load_config("params.yaml", overrides={"data.root": str(alfworld_data_root.parent)})
    tasks = [
        "valid_unseen/pick_heat_then_place_in_recep-Apple-None-Fridge-10/trial_T20190906_182259_116320",
        "valid_unseen/pick_two_obj_and_place-CD-None-Safe-308/trial_T20190907_050942_897916",
    ]
    res = noisy_fidelity(
        cfg, eps=[0.5], task_ids=tasks, seeds=[0, 1], methods=["grpo", "gigpo", "scpo", "oracle"], progress=False
    )
    s = res.summary.set_index(["estimator", "kind"])
    assert s.loc[("oracle", "all"), "auc_mean"] == 1.0 and s.loc[("oracle", "all"), "false_credit_mean"] == 0.0
    assert s.loc[("grpo", "all"), "n_groups"] == 4 and s.loc[("grpo", "all"), "n_seeds"] == 2
    assert s.loc[("gigpo", "all"), "auc_mean"] < 1.0
    inc = inconsistency_view(res.inconsistency, "eps").set_index("estimator")
    # the control (same observation, different actions) is ordered like q by construction; same-step pairs can still
    # disagree a little: an identical observation and action can come from different hidden states (what is held,
    # where the other objects are), whose q differ
    assert inc.loc["oracle", "control_ordered"] == 1.0 and inc.loc["oracle", "disagree_all"] < 0.05
    assert inc.loc["oracle", "disagree_all"] < inc.loc["gigpo", "disagree_all"]
    assert 0 < res.planner["cache_hit_rate"] < 1
    sweep = scpo_sweep(
        cfg, res.batches, [{"tau": 0.6, "match": "first"}, {"tau": 0.9, "match": "argmax"}], progress=False
    )
    assert set(sweep["tau"]) == {0.6, 0.9} and set(sweep["match"]) == {"first", "argmax"}


def test_report_names_run_folders_relative_to_the_repository(tmp_path, monkeypatch):
    """The timing JSON lists the trained runs without the absolute paths of the machine that made the report."""
    from scpo.testbeds.fidelity_tables import _shown

    (tmp_path / "runs" / "alfworld" / "scpo" / "seed0").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert _shown(tmp_path / "runs" / "alfworld" / "scpo" / "seed0") == "runs/alfworld/scpo/seed0"
    assert _shown("runs/alfworld/scpo/seed0") == "runs/alfworld/scpo/seed0"
    assert _shown("/elsewhere/run") == "/elsewhere/run"


def test_oracle_group_mean_baseline_by_hand():
    """baseline group_mean: the step term minus its mean over the group's rows (group 0: q 1, 0, -1 and an invalid
    step's 0 - 0.1; group 1: q 1, 1)."""
    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 1, 1],
        traj_id=[0, 0, 1, 1, 2, 2],
        step=[0, 1, 0, 1, 0, 1],
        reward=[0, 10, 0, 0, 0, 10],
        valid=[True, True, False, True, True, True],
        oracle_progress=[1, 0, 0, -1, 1, 1],
    )
    plain = compute_advantages("oracle", b).advantages
    np.testing.assert_allclose(plain, [1, 0, -0.1, -1, 1, 1])
    res = compute_advantages("oracle", b, baseline="group_mean", omega=2.0)
    g0 = 2 * np.array([1, 0, -0.1, -1])
    np.testing.assert_allclose(res.advantages, np.concatenate([g0 - g0.mean(), [0.0, 0.0]]))
    assert res.advantages[:4].sum() == pytest.approx(0.0)
    with pytest.raises(ValueError, match="baseline"):
        compute_advantages("oracle", b, baseline="batch")


def test_oracle_optimal_baseline_is_the_optimal_advantage():
    """baseline optimal: omega (q - 1 - pen), A* = Q* - V* in steps: 0 on optimal steps, -1 on a step that changes
    nothing, -2 on a step away, -dead_end - 1 into a dead end."""
    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0],
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0, 10, 0, 0],
        valid=[True, True, False, True],
        oracle_progress=[1, 0, -1, -np.inf],
    )
    res = compute_advantages("oracle", b, baseline="optimal", omega=0.5, dead_end=4.0)
    np.testing.assert_allclose(res.advantages, 0.5 * np.array([0, -1, -2.1, -5]))


def test_oracle_trajectory_level_is_grpo_on_the_shaped_return():
    """level trajectory: every row of trajectory i gets norm(R_i + omega sum_t max(q_t, -dead_end) - pen_t) over its
    group's rows (group 0: a win with progress 2, a failure with 1, a failure into a dead end after an invalid step;
    group 1: one row, so 0)."""
    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 0, 0, 0, 1],
        traj_id=[0, 0, 1, 1, 1, 2, 2, 3],
        step=[0, 1, 0, 1, 2, 0, 1, 0],
        reward=[0, 10, 0, 0, 0, 0, 0, 10],
        valid=[True, True, True, True, True, False, True, True],
        oracle_progress=[1, 1, 1, -1, 1, 0, -np.inf, 1],
    )
    res = compute_advantages("oracle", b, level="trajectory", omega=0.5, dead_end=4.0)
    # shaped returns: 10 + 0.5 * 2 = 11, 0 + 0.5 * 1 = 0.5, 0 + 0.5 * (0 - 4) = -2; the invalid row -2 - 0.1
    score = np.array([11, 11, 0.5, 0.5, 0.5, -2.1, -2])
    np.testing.assert_allclose(res.advantages[:7], (score - score.mean()) / (score.std(ddof=1) + 1e-6))
    assert res.advantages[7] == 0.0
    assert np.all(res.advantages[:2] == res.advantages[0]) and np.all(res.advantages[2:5] == res.advantages[2])
    with pytest.raises(ValueError, match="level=trajectory .* baseline=none and episode_weight=0"):
        compute_advantages("oracle", b, level="trajectory", baseline="group_mean")
    with pytest.raises(ValueError, match="level=trajectory"):
        compute_advantages("oracle", b, level="trajectory", episode_weight=1.0)
