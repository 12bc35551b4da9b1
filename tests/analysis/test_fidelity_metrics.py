"""Credit-fidelity metrics worked by hand (the oracle estimator itself: tests/credit/test_oracle.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from scpo.analysis.fidelity_metrics import (
    credit_sign,
    group_fidelity,
    group_view,
    summarize,
    wrong_sign_counts,
    wrong_sign_shares,
)
from scpo.batch import RolloutBatch


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


def test_wrong_sign_counts_by_hand():
    """q = (1, 0, 1, 1, -1 | 1, 1 | 1, 0), A = (0.5, 0.2, -0.1, 1.0, 0.3 | 0, 0 | 0.3, 0.3): credited up six steps, one
    of them a step away (q -1); credited down one step, a step of progress; A = 0 carries no sign."""
    q = _batch().oracle_progress
    c = wrong_sign_counts(ADV, q)
    assert c == {"n_pos": 6, "n_pos_wrong": 1, "n_neg": 1, "n_neg_wrong": 1, "n_label_pos": 6, "n_label_neg": 1}
    s = wrong_sign_shares(ADV, q)
    assert (s["wrong_sign"], s["wrong_sign_pos"], s["wrong_sign_neg"]) == (2 / 7, 1 / 6, 1.0)
    assert (s["rewarded_mistakes"], s["punished_progress"]) == (1.0, 1 / 6)
    failed = ~_batch().won  # trajectories 0 and 3: rows 0-2, 7-8, none with q < 0
    f = wrong_sign_shares(ADV, q, mask=failed)
    assert (f["n_pos"], f["n_pos_wrong"], f["n_neg_wrong"]) == (4, 0, 1) and np.isnan(f["rewarded_mistakes"])
    # any label array: a step without a label (NaN) is left out, a dead end (-inf) is a negative label
    other = np.array([np.nan, -np.inf, 2.0, 0.5, -0.5, 0, 0, 1, 0])
    assert wrong_sign_counts(ADV, other) == {
        "n_pos": 5,
        "n_pos_wrong": 2,
        "n_neg": 1,
        "n_neg_wrong": 1,
        "n_label_pos": 3,
        "n_label_neg": 2,
    }
    np.testing.assert_array_equal(credit_sign(ADV, q), [0, 0, -1, 0, 1, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="one length"):
        wrong_sign_counts(ADV, q[:3])


def test_group_counts_of_wrong_sign_credit():
    t = group_fidelity(_batch(), ADV).set_index("group")
    assert (t.loc[0, "ws_pos_hits"], t.loc[0, "ws_pos_total"]) == (1, 4)  # up: 0.5, 0.2, 1.0, 0.3 (q -1)
    assert (t.loc[0, "ws_neg_hits"], t.loc[0, "ws_neg_total"]) == (1, 1)  # down: -0.1 (q 1)
    assert t.loc[1, "ws_pos_total"] == 0 and t.loc[1, "ws_neg_total"] == 0
    assert (t.loc[2, "ws_pos_hits"], t.loc[2, "ws_pos_total"]) == (0, 2)


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
    # seed 0: up 6 (1 wrong), down 1 (1 wrong); seed 1: the 0.2 (q 0) goes down: up 5 (1 wrong), down 2 (1 wrong)
    assert row["wrong_sign_pos_mean"] == pytest.approx((1 / 6 + 1 / 5) / 2)
    assert row["wrong_sign_neg_mean"] == pytest.approx((1 / 1 + 1 / 2) / 2)
    assert row["wrong_sign_mean"] == pytest.approx((2 / 7 + 2 / 7) / 2)
    assert (row["n_credited_up"], row["n_credited_down"]) == (11, 3)
    mixed = s[s.kind == "mixed"].iloc[0]
    assert mixed["auc_mean"] == pytest.approx(np.mean([4 / 6, 5 / 6])) and mixed["n_groups"] == 2


def test_group_view_lists_q_beside_each_estimator():
    v = group_view(_batch(), {"x": ADV, "y": -ADV}, group=0)
    assert list(v.columns) == ["trajectory", "won", "step", "action", "q", "x", "y"]
    assert v["q"].tolist() == [1, 0, 1, 1, -1] and v["y"].tolist() == [-0.5, -0.2, 0.1, -1.0, -0.3]
    with pytest.raises(ValueError, match="out of range"):
        group_view(_batch(), {"x": ADV}, group=7)


def test_benchmark_on_two_tasks_puts_the_oracle_on_top(alfworld_data_root, tmp_path):
    """noisy_fidelity end to end (2 games, 2 seeds, eps 0.5): the oracle separates q perfectly and never credits a
    q <= 0 step (no wrong-sign credit); the sweep returns one summary per option set, and its tau calibration a row
    per (scorer, step text, match)."""
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
    assert s.loc[("oracle", "all"), "wrong_sign_mean"] == 0.0 < s.loc[("gigpo", "all"), "wrong_sign_mean"]
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
    from scpo.testbeds.fidelity import calibrate_tau

    cal = calibrate_tau(sweep, cfg.credit.scpo)  # one tau per (scorer, step text, match): each is its own least
    assert len(cal) == 2 and set(cal["tau_least_wrong_sign"]) == {0.6, 0.9}
    assert cal.set_index("match").loc["argmax", "calibrated"] and cal["wrong_sign_at_least"].between(0, 1).all()


def test_report_names_run_folders_relative_to_the_repository(tmp_path, monkeypatch):
    """The timing JSON lists the trained runs without the absolute paths of the machine that made the report."""
    from scpo.testbeds.fidelity_tables import _shown

    (tmp_path / "runs" / "alfworld" / "scpo" / "seed0").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert _shown(tmp_path / "runs" / "alfworld" / "scpo" / "seed0") == "runs/alfworld/scpo/seed0"
    assert _shown("runs/alfworld/scpo/seed0") == "runs/alfworld/scpo/seed0"
    assert _shown("/elsewhere/run") == "/elsewhere/run"


def _sweep_rows(tau, source, wrong_sign, auc, kind="mixed", step_text="action_next_obs"):
    return {
        "scorer": "lexical",
        "step_text": step_text,
        "match": "argmax",
        "tau": tau,
        "source": source,
        "kind": kind,
        "wrong_sign_mean": wrong_sign,
        "wrong_sign_pos_mean": wrong_sign / 2,
        "wrong_sign_neg_mean": wrong_sign / 2,
        "auc_mean": auc,
        "wrong_sign_std": 0.1,
        "n_seeds": 4,
    }


def test_calibrate_tau_picks_the_least_wrong_sign_tau_per_option_set():
    from types import SimpleNamespace

    from scpo.testbeds.fidelity import calibrate_tau

    # mean over the two sources: tau 0.8 -> wrong sign 0.20, AUC 0.7; 0.9 -> 0.25, 0.75; 1.0 -> 0.20, 0.72
    rows = [
        _sweep_rows(0.8, "eps=0.2", 0.1, 0.7),
        _sweep_rows(0.8, "eps=0.4", 0.3, 0.7),
        _sweep_rows(0.9, "eps=0.2", 0.2, 0.8),
        _sweep_rows(0.9, "eps=0.4", 0.3, 0.7),
        _sweep_rows(1.0, "eps=0.2", 0.2, 0.74),
        _sweep_rows(1.0, "eps=0.4", 0.2, 0.70),
        _sweep_rows(0.8, "eps=0.2", 0.0, 1.0, kind="all"),  # another kind: not read
        _sweep_rows(0.9, "eps=0.2", 0.3, 0.6, step_text="action"),
    ]
    defaults = SimpleNamespace(tau=0.9, step_text="action_next_obs", match="argmax")
    cal = calibrate_tau(pd.DataFrame(rows), defaults).set_index("step_text")
    row = cal.loc["action_next_obs"]
    assert row["tau_least_wrong_sign"] == 1.0  # tied with 0.8 at 0.20; the higher AUC wins
    assert row["wrong_sign_at_least"] == pytest.approx(0.2) and row["auc_at_least"] == pytest.approx(0.72)
    assert row["tau_best_auc"] == 0.9 and row["auc_at_best"] == pytest.approx(0.75)
    assert row["wrong_sign_at_default"] == pytest.approx(0.25) and not row["calibrated"] and row["is_default"]
    assert row["wrong_sign_se_at_default"] == pytest.approx(0.05)  # 0.1 / sqrt(4)
    assert row["taus"] == "0.8, 0.9, 1"
    one = cal.loc["action"]
    assert one["tau_least_wrong_sign"] == 0.9 and one["calibrated"] and not one["is_default"]
    with pytest.raises(ValueError, match="sweep over tau"):
        calibrate_tau(pd.DataFrame(rows).query("kind == 'all'"), defaults)
