"""The oracle estimator (`scpo.credit.oracle`) on hand-computed arrays: the step term at each baseline, the outcome
term with GRPO's options, the trajectory level, its diagnostics and its refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, available_methods, compute_advantages
from scpo.credit.grpo import group_stats
from scpo.credit.oracle import compute_oracle

SQ50 = np.sqrt(50)


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


def _two_groups(**extra) -> RolloutBatch:
    """Group 0: trajectory 0 wins in three steps (q 1, 0, 1; its second step invalid), trajectory 1 fails in one
    (q -1); group 1: trajectory 2 wins in two (q 1, 1)."""
    return RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 1, 1],
        traj_id=[0, 0, 0, 1, 2, 2],
        step=[0, 1, 2, 0, 0, 1],
        reward=[0, 0, 10, 0, 0, 10],
        valid=[True, False, True, True, True, True],
        oracle_progress=[1, 0, 1, -1, 1, 1],
        **extra,
    )


STEP = np.array([1, -0.1, 1, -1, 1, 1])  # omega (q - pen) with omega 1 and lambda_invalid 0.1


def test_the_outcome_term_takes_grpo_statistics_scale_and_epsilon():
    """w_E A^E with stats over trajectories: group 0's R_i are 10 and 0 (mean 5, std sqrt(50)), applied to R_i - pen_t;
    group 1 has one trajectory, so 0. Over steps the mean would be (10 + 9.9 + 10 + 0) / 4 instead."""
    b = _two_groups()
    res = compute_advantages("oracle", b, episode_weight=2.0, stats_over="trajectories", epsilon=1.0)
    outcome = 2 * np.array([5, 4.9, 5, -5, 0, 0]) / (SQ50 + 1.0)
    np.testing.assert_allclose(res.advantages, outcome + STEP, atol=1e-12)
    np.testing.assert_allclose(res.diagnostics["episode_adv"], outcome, atol=1e-12)
    np.testing.assert_allclose(res.diagnostics["step_adv"], STEP, atol=1e-12)
    unscaled = compute_advantages("oracle", b, episode_weight=2.0, stats_over="trajectories", scale="none")
    np.testing.assert_allclose(unscaled.advantages, 2 * np.array([5, 4.9, 5, -5, 0, 0]) + STEP, atol=1e-12)
    steps = compute_advantages("oracle", b, episode_weight=1.0, scale="none")
    np.testing.assert_allclose(steps.advantages, np.array([2.525, 2.425, 2.525, -7.475, 0, 0]) + STEP, atol=1e-12)


def test_the_trajectory_level_takes_grpo_statistics_scale_and_epsilon():
    """level trajectory, omega 0.5: shaped returns 10 + 0.5 * 2 = 11, 0 + 0.5 * (-1) = -0.5 and 11 (group 1, alone);
    over trajectories group 0's mean is 5.25 and its std 11.5 / sqrt(2), applied to the shaped return minus pen_t."""
    b = _two_groups()
    res = compute_advantages("oracle", b, level="trajectory", omega=0.5, stats_over="trajectories", epsilon=1.0)
    adv = np.array([5.75, 5.65, 5.75, -5.75, 0, 0]) / (11.5 / np.sqrt(2) + 1.0)
    np.testing.assert_allclose(res.advantages, adv, atol=1e-12)
    unscaled = compute_advantages("oracle", b, level="trajectory", omega=0.5, stats_over="trajectories", scale="none")
    np.testing.assert_allclose(unscaled.advantages, [5.75, 5.65, 5.75, -5.75, 0, 0], atol=1e-12)


@pytest.mark.parametrize("level", ["step", "trajectory"])
def test_result_diagnostics_and_statistics(level):
    b = _two_groups()
    res = compute_advantages("oracle", b, level=level)
    assert res.method == "oracle"
    assert res.returns.dtype == np.float64 and res.returns.tolist() == [1, 0, 1, -1, 1, 1]  # q itself
    assert res.diagnostics["anchor_group_size"].tolist() == [4, 4, 4, 4, 2, 2]
    assert (
        res.stats
        == group_stats(b)
        == {
            "frac_all_failed_groups": 0.0,
            "frac_all_success_groups": 0.5,
            "frac_mixed_groups": 0.5,
        }
    )
    if level == "step":  # no outcome term by default
        assert res.diagnostics["episode_adv"].tolist() == [0.0] * 6
        np.testing.assert_allclose(res.diagnostics["step_adv"], STEP, atol=1e-15)
    else:  # every step of a trajectory alike: all of it is the outcome term
        assert res.diagnostics["step_adv"].tolist() == [0.0] * 6
        assert res.diagnostics["episode_adv"].tolist() == res.advantages.tolist()
        assert res.advantages[0] == res.advantages[2] != res.advantages[1]  # the invalid step pays its penalty


def test_without_progress_or_with_nan_or_plus_inf_one_line_names_the_rows():
    missing = RolloutBatch.from_columns(group_id=[0], traj_id=[0], step=[0], reward=[0])
    msg = (
        "the oracle estimator needs the batch's oracle_progress column (q_t = V*(s_t) - V*(s_t+1)); "
        "label ALFWorld rollouts with scpo.envs.alfworld.oracle_rollouts.label_progress"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):  # the function itself (the dispatcher checks first)
        compute_oracle(missing, CreditConfig())
    with pytest.raises(ValueError, match=r"^credit method 'oracle' needs the planner's oracle progress per step"):
        compute_advantages("oracle", missing, CreditConfig())
    n = 9
    many = {"group_id": [0] * n, "traj_id": [0] * n, "step": list(range(n)), "reward": [0] * n}
    # -inf is a dead end (credited -dead_end); NaN and +inf are not progress: the first five such rows are named
    q = [np.nan, 1, np.inf, -np.inf, np.nan, np.nan, np.inf, 0, np.nan]
    with pytest.raises(
        ValueError, match=r"^oracle_progress is NaN or \+inf at rows \[0, 2, 4, 5, 6\]; q_t is at most 1$"
    ):
        compute_advantages("oracle", RolloutBatch.from_columns(**many, oracle_progress=q))
    for bad in (np.nan, np.inf):
        q = [1.0] * n
        q[3] = bad
        with pytest.raises(ValueError, match=r"^oracle_progress is NaN or \+inf at rows \[3\]; q_t is at most 1$"):
            compute_advantages("oracle", RolloutBatch.from_columns(**many, oracle_progress=q))
    q = [1.0] * n
    q[3] = -np.inf
    assert compute_advantages("oracle", RolloutBatch.from_columns(**many, oracle_progress=q)).advantages[3] == -10.0
