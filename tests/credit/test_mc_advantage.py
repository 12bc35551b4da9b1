"""The Monte-Carlo advantage estimator (`scpo.credit.mc_advantage`) on hand-computed arrays."""

from __future__ import annotations

import re

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, compute_advantages
from scpo.credit.mc_advantage import compute_mc_advantage, next_values


def _batch(**extra) -> RolloutBatch:
    # trajectory 0: wait, wait, east, east, open (won); trajectory 1 (same group): three steps, lost
    return RolloutBatch.from_columns(
        group_id=[0] * 8,
        traj_id=[0, 0, 0, 0, 0, 1, 1, 1],
        step=[0, 1, 2, 3, 4, 0, 1, 2],
        reward=[0, 0, 0, 0, 10, 0, 0, 0],
        valid=[False, False, True, True, True, True, True, False],
        **extra,
    )


V = [5.0, 2.0, 4.0, 10.0, 10.0, 5.0, 6.0, 1.0]


def test_next_values_follow_each_trajectory_and_end_at_zero():
    b = _batch(policy_value=V)
    assert next_values(b, np.asarray(V)).tolist() == [2.0, 4.0, 10.0, 10.0, 0.0, 6.0, 1.0, 0.0]


def test_hand_computed_deltas_without_scaling():
    b = _batch(policy_value=V)
    res = compute_advantages("mc_advantage", b, CreditConfig(), whiten=False)
    # (r + V_next - V) / 10 - 0.1 * invalid
    expected = [-0.4, 0.1, 0.6, 0.0, 0.0, 0.1, -0.5, -0.2]
    np.testing.assert_allclose(res.advantages, expected, atol=1e-12)
    np.testing.assert_allclose(res.returns, [2, 4, 10, 10, 10, 6, 1, 0])
    # per trajectory the deltas telescope: (R - V(s_0)) / 10 minus its penalties
    assert res.advantages[:5].sum() == pytest.approx((10 - 5) / 10 - 0.2)


def test_whitening_divides_by_the_deltas_spread_without_centring():
    b = _batch(policy_value=V)
    delta = np.array([-0.4, 0.1, 0.6, 0.0, 0.0, 0.1, -0.5, -0.2])
    res = compute_advantages("mc_advantage", b, CreditConfig())
    np.testing.assert_allclose(res.advantages, delta / (delta.std() + 1e-6), atol=1e-12)
    assert res.advantages[3] == 0.0  # a step that changes nothing stays at 0


def test_without_values_one_line_names_the_column():
    with pytest.raises(
        ValueError, match=r"needs the policy's Monte-Carlo state values per step \(the batch's policy_value column"
    ):
        compute_advantages("mc_advantage", _batch(), CreditConfig())
    with pytest.raises(ValueError, match=r"policy_value is not finite at rows \[2\]"):
        compute_advantages("mc_advantage", _batch(policy_value=[0, 0, np.nan, 0, 0, 0, 0, 0]), CreditConfig())


def test_the_missing_column_and_the_first_five_bad_rows_in_one_line():
    msg = (
        "the mc_advantage estimator needs the batch's policy_value column (V^pi(s_t) from Monte-Carlo "
        "continuations); label it with scpo.rollout.branches.policy_values, as the trainer does"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):  # the function itself (the dispatcher checks first)
        compute_mc_advantage(_batch(), CreditConfig())
    v = [np.nan, np.inf, 1.0, -np.inf, np.nan, np.nan, np.inf, 2.0]
    with pytest.raises(ValueError, match=r"^policy_value is not finite at rows \[0, 1, 3, 4, 5\]$"):
        compute_advantages("mc_advantage", _batch(policy_value=v))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64])
def test_next_values_are_float64_whatever_the_values_dtype(dtype):
    # a value head in float32 gives the same next values as float64 ones, in float64
    v = np.asarray([5, 2, 4, 10, 10, 5, 6, 1], dtype=dtype)
    out = next_values(_batch(), v)
    assert out.dtype == np.float64
    assert out.tolist() == [2.0, 4.0, 10.0, 10.0, 0.0, 6.0, 1.0, 0.0]


def test_result_diagnostics_and_statistics():
    from scpo.credit.grpo import group_stats

    b = _batch(policy_value=V)
    res = compute_advantages("mc_advantage", b, whiten=False)
    assert res.method == "mc_advantage"
    assert res.diagnostics["episode_adv"].tolist() == [0.0] * 8
    assert res.diagnostics["step_adv"].tolist() == res.advantages.tolist()
    assert res.diagnostics["anchor_group_size"].tolist() == [8] * 8
    assert (
        res.stats
        == group_stats(b)
        == {
            "frac_all_failed_groups": 0.0,
            "frac_all_success_groups": 0.0,
            "frac_mixed_groups": 1.0,
        }
    )
