"""RLOO (verl's row-level leave-one-out and its per-trajectory option) against groups worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import compute_advantages


def batch() -> RolloutBatch:
    # group 0: x won in 2 steps (10), y failed in 1 invalid step ; group 1: one row, won ; group 2: z, w failed
    return RolloutBatch.from_columns(
        group_id=[0, 0, 0, 1, 2, 2, 2],
        traj_id=[0, 0, 1, 2, 3, 3, 4],
        step=[0, 1, 0, 0, 0, 1, 0],
        reward=[0, 10, 0, 10, 0, 0, 0],
        valid=[True, True, False, True, False, True, True],
    )


def test_rloo_over_step_rows_by_hand():
    res = compute_advantages("rloo", batch())
    # group 0: row scores 10, 10, -0.1 (N = 3 rows, mean 19.9 / 3) ; group 1: N = 1 keeps 10 ; group 2: -0.1, 0, 0
    m0, m2 = 19.9 / 3, -0.1 / 3
    expected = [1.5 * (10 - m0), 1.5 * (10 - m0), 1.5 * (-0.1 - m0), 10.0, 1.5 * (-0.1 - m2), 1.5 * -m2, 1.5 * -m2]
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-12)
    np.testing.assert_array_equal(res.diagnostics["step_adv"], 0.0)
    np.testing.assert_array_equal(res.returns, [10, 10, 0, 10, 0, 0, 0])


def test_rloo_over_trajectories_uses_each_trajectorys_first_row():
    res = compute_advantages("rloo", batch(), baseline_over="trajectories")
    # group 0: first rows 10 and -0.1 (N = 2) ; group 2: z's first row is invalid (-0.1), w's 0 (N = 2)
    m0, m2 = 9.9 / 2, -0.1 / 2
    expected = [2 * (10 - m0), 2 * (10 - m0), 2 * (-0.1 - m0), 10.0, 2 * (-0.1 - m2), 2 * -m2, 2 * -m2]
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-12)


def test_rloo_penalty_and_errors():
    res = compute_advantages("rloo", batch(), lambda_invalid=0.0)
    np.testing.assert_allclose(res.advantages[4:], 0.0)
    np.testing.assert_allclose(res.advantages[:3], [1.5 * (10 - 20 / 3)] * 2 + [1.5 * -20 / 3], rtol=1e-12)
    with pytest.raises(ValueError, match="baseline_over"):
        compute_advantages("rloo", batch(), baseline_over="tokens")


def test_rloo_result_fields():
    res = compute_advantages("rloo", batch())
    assert res.method == "rloo" and set(res.diagnostics) == {"episode_adv", "step_adv", "anchor_group_size"}
    np.testing.assert_array_equal(res.diagnostics["episode_adv"], res.advantages)
    np.testing.assert_array_equal(res.diagnostics["anchor_group_size"], [3, 3, 3, 1, 3, 3, 3])
    assert res.stats == {"frac_all_failed_groups": 1 / 3, "frac_all_success_groups": 1 / 3, "frac_mixed_groups": 1 / 3}
