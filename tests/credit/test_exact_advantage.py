"""The exact on-policy advantage estimator (`scpo.credit.exact_advantage`) on hand-computed arrays."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, compute_advantages, estimate
from scpo.credit.exact_advantage import success_q


def _batch(**extra) -> RolloutBatch:
    # one group: trajectory 0 wins at its third step, trajectory 1 runs out of steps after two; rewards shaped
    # (-0.1 a step, +1 for a box) as on Sokoban, which the success objective does not read
    return RolloutBatch.from_columns(
        group_id=[0] * 5,
        traj_id=[0, 0, 0, 1, 1],
        step=[0, 1, 2, 0, 1],
        reward=[-0.1, 0.9, 9.9, -0.1, -0.1],
        won=[True, True, True, False, False],
        **extra,
    )


V = [0.5, 0.8, 0.9, 0.5, 0.2]
DELTA = np.array([0.8 - 0.5, 0.9 - 0.8, 1.0 - 0.9, 0.2 - 0.5, 0.0 - 0.2])


def test_q_is_the_next_value_then_the_outcome():
    assert success_q(_batch(), np.asarray(V)).tolist() == [0.8, 0.9, 1.0, 0.2, 0.0]


def test_hand_computed_advantages_in_success_units_ignore_the_rewards():
    res = compute_advantages("exact_advantage", _batch(exact_value=V), CreditConfig(), whiten=False)
    np.testing.assert_allclose(res.advantages, DELTA, atol=1e-15)
    np.testing.assert_allclose(res.returns, [0.8, 0.9, 1.0, 0.2, 0.0])
    # per trajectory they telescope to the outcome minus the value at the start
    assert res.advantages[:3].sum() == pytest.approx(1.0 - 0.5) and res.advantages[3:].sum() == pytest.approx(-0.5)


def test_whitening_divides_by_the_batch_spread_without_centring():
    res = compute_advantages("exact_advantage", _batch(exact_value=V), CreditConfig())
    # DELTA: mean 0, variance (0.09 + 0.01 + 0.01 + 0.09 + 0.04) / 5 = 0.048
    np.testing.assert_allclose(res.advantages, DELTA / (np.sqrt(0.048) + 1e-6), atol=1e-12)
    shifted = _batch(exact_value=[0.4, 0.8, 0.9, 0.5, 0.2])  # first delta 0.4: the mean is no longer 0
    d = np.array([0.4, 0.1, 0.1, -0.3, -0.2])
    res = compute_advantages("exact_advantage", shifted, CreditConfig())
    np.testing.assert_allclose(res.advantages, d / (d.std() + 1e-6), atol=1e-12)
    assert np.all(np.sign(res.advantages) == np.sign(d))


def test_an_invalid_step_pays_the_penalty():
    b = _batch(exact_value=V, valid=[True, True, True, False, True])
    res = compute_advantages("exact_advantage", b, CreditConfig(), whiten=False, lambda_invalid=0.25)
    np.testing.assert_allclose(res.advantages, DELTA - [0, 0, 0, 0.25, 0], atol=1e-15)


def test_equal_to_mc_advantage_given_the_same_values_where_the_only_reward_is_the_win():
    b = RolloutBatch.from_columns(
        group_id=[0] * 5, traj_id=[0, 0, 0, 1, 1], step=[0, 1, 2, 0, 1], reward=[0, 0, 10, 0, 0]
    )
    b = b.with_column("exact_value", V).with_column("policy_value", 10 * np.asarray(V))
    for whiten in (True, False):
        exact = compute_advantages("exact_advantage", b, whiten=whiten).advantages
        np.testing.assert_allclose(exact, compute_advantages("mc_advantage", b, whiten=whiten).advantages, atol=1e-12)


def test_result_diagnostics_and_statistics():
    from scpo.credit.grpo import group_stats

    b = _batch(exact_value=V)
    res = compute_advantages("exact_advantage", b, whiten=False)
    assert res.method == "exact_advantage"
    assert res.diagnostics["episode_adv"].tolist() == [0.0] * 5
    assert res.diagnostics["step_adv"].tolist() == res.advantages.tolist()
    assert res.diagnostics["anchor_group_size"].tolist() == [5] * 5
    assert res.stats == group_stats(b)


def test_without_values_the_need_is_named_and_estimate_can_skip_it():
    from scpo.credit.exact_advantage import compute_exact_advantage

    with pytest.raises(
        ValueError,
        match=r"^credit method 'exact_advantage' needs the policy's exact success values per step \(the batch's "
        r"exact_value column: scpo.rollout.exact_values\)$",
    ):
        compute_advantages("exact_advantage", _batch(), CreditConfig())
    with pytest.raises(  # the function itself, called without the dispatcher's check
        ValueError,
        match=r"^the exact_advantage estimator needs the batch's exact_value column \(V\^pi_t\(s_t\), the policy's "
        r"exact success values\); label it with scpo.rollout.exact_values.exact_values \(environments with a "
        r"tabular model\)$",
    ):
        compute_exact_advantage(_batch(), CreditConfig())
    many = RolloutBatch.from_columns(
        group_id=[0] * 7, traj_id=[0] * 7, step=list(range(7)), reward=[0] * 7, exact_value=[2.0] * 7
    )
    with pytest.raises(
        ValueError, match=r"^exact_value must be a probability in \[0, 1\]; it is not at rows \[0, 1, 2, 3, 4\]$"
    ):
        compute_advantages("exact_advantage", many)
    with pytest.raises(ValueError, match=r"exact_value must be a probability in \[0, 1\]; it is not at rows \[1, 4\]"):
        compute_advantages("exact_advantage", _batch(exact_value=[0.5, 1.2, 0.9, 0.5, np.nan]), CreditConfig())
    with pytest.raises(ValueError, match=r"it is not at rows \[3\]"):
        compute_advantages("exact_advantage", _batch(exact_value=[0.0, 1.0, 1.0, -0.01, 0.0]), CreditConfig())
    edges = compute_advantages("exact_advantage", _batch(exact_value=[0.0, 1.0, 1.0, 0.0, 0.0]), whiten=False)
    assert edges.advantages.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]  # 0 and 1 are probabilities
    with pytest.raises(ValueError, match="needs the policy's exact success values per step"):
        estimate(_batch(), ["exact_advantage"])
    assert list(estimate(_batch(), ["grpo", "exact_advantage"], unmet="skip")) == ["grpo"]
    assert list(estimate(_batch(exact_value=V), ["grpo", "exact_advantage"])) == ["grpo", "exact_advantage"]


def test_q_of_a_one_step_trajectory_is_its_outcome():
    # the smallest batch: no row has a next row, so Q is the outcome alone
    for won in (True, False):
        one = RolloutBatch.from_columns(group_id=[0], traj_id=[0], step=[0], reward=[0], won=[won])
        assert success_q(one, np.asarray([0.3])).tolist() == [float(won)]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.longdouble])
def test_q_is_float64_whatever_the_values_dtype(dtype):
    v = np.asarray([0.5, 0.75, 0.25, 0.5, 0.0] if dtype != np.int64 else [0, 1, 1, 0, 0], dtype=dtype)
    q = success_q(_batch(), v)
    assert q.dtype == np.float64
    assert q.tolist() == [float(v[1]), float(v[2]), 1.0, float(v[4]), 0.0]
