"""Shared helpers, GRPO, GiGPO and the registry, against numbers worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, available_methods, compute_advantages
from scpo.credit.grouping import check_rows, combine_codes, discounted_returns, segment_norm

from helpers.credit import EPS, norm

SQ2 = 1 / np.sqrt(2)


def two_traj_group(invalid_last_fail: bool = True) -> RolloutBatch:
    """Group 0: W (won) sees s0 -> s1 and earns 10 at its last step; F (failed) sees s0 -> s2, last step invalid."""
    return RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0],
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0, 10, 0, 0],
        observation=["s0", "s1", "s0", "s2"],
        action=["a", "b", "a", "c"],
        valid=[True, True, True, not invalid_last_fail],
    )


def test_discounted_returns_by_hand():
    r = np.array([1.0, 0.0, 2.0, 5.0, 3.0])
    traj = np.array([0, 0, 0, 1, 1])
    step = np.array([0, 1, 2, 0, 1])
    # traj 0: G2 = 2, G1 = 0 + 0.5*2 = 1, G0 = 1 + 0.5*1 = 1.5; traj 1: G1 = 3, G0 = 5 + 1.5 = 6.5
    np.testing.assert_allclose(discounted_returns(r, traj, step, 0.5), [1.5, 1.0, 2.0, 6.5, 3.0])


def test_segment_norm_by_hand():
    x = np.array([1.0, 3.0, 7.0, 4.0, 4.0])
    seg = np.array([0, 0, 1, 2, 2])
    # seg 0: mean 2, unbiased std sqrt(2) -> -+1/sqrt2 ; seg 1 singleton -> 0 ; seg 2 equal values -> 0
    np.testing.assert_allclose(segment_norm(x, seg, epsilon=0.0), [-SQ2, SQ2, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(segment_norm(x, seg, scale="none"), [-1.0, 1.0, 0.0, 0.0, 0.0])
    # population std (HGPO): std = 1 -> -+1
    np.testing.assert_allclose(segment_norm(x, seg, epsilon=0.0, ddof=0), [-1.0, 1.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="scale='max'"):
        segment_norm(x, seg, scale="max")


def test_combine_codes_groups_equal_tuples_only():
    codes = combine_codes(np.array([0, 0, 1, 0]), np.array([5, 5, 5, -1]))
    assert codes[0] == codes[1] and len(set(codes.tolist())) == 3


def test_check_rows_rejects_unordered_steps():
    with pytest.raises(ValueError, match="row 1 .* step 2, expected 1"):
        check_rows(np.array([0, 0]), np.array([0, 2]))
    with pytest.raises(ValueError, match="contiguous"):
        check_rows(np.array([0, 1, 0]), np.array([0, 0, 1]))


def test_grpo_gives_zero_to_a_group_with_equal_returns():
    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 1, 1], traj_id=[0, 0, 1, 2, 3], step=[0, 1, 0, 0, 0], reward=[0, 10, 10, 0, 10]
    )
    res = compute_advantages("grpo", b)
    np.testing.assert_array_equal(res.advantages[:3], 0.0)
    # group 1: scores 0, 10 -> mean 5, unbiased std 7.0711 -> -+0.7071
    np.testing.assert_allclose(res.advantages[3:], [-5 / (np.sqrt(50) + EPS), 5 / (np.sqrt(50) + EPS)])


def test_grpo_stats_over_trajectories_by_hand():
    # traj 0 (R=10) has 3 rows, traj 1 (R=0) has 1 row. steps: mean 7.5 ; trajectories: mean 5, std sqrt(50)
    b = RolloutBatch.from_columns(group_id=[0, 0, 0, 0], traj_id=[0, 0, 0, 1], step=[0, 1, 2, 0], reward=[0, 0, 10, 0])
    res = compute_advantages("grpo", b, stats_over="trajectories")
    np.testing.assert_allclose(res.advantages, [5 / (np.sqrt(50) + EPS)] * 3 + [-5 / (np.sqrt(50) + EPS)])
    steps = compute_advantages("grpo", b)
    assert steps.advantages[0] == pytest.approx(2.5 / (np.std([10, 10, 10, 0], ddof=1) + EPS))


def test_gigpo_by_hand():
    res = compute_advantages("gigpo", two_traj_group())
    # episode scores R - pen: 10, 10, 0, -0.1 over the 4 rows (unbiased std)
    s = np.array([10, 10, 0, -0.1])
    ep = norm(s)
    # step returns: W: 9.5, 10 ; F: 0, 0 - 0.1 ; anchor s0 = {W0, F0} -> +-1/sqrt2 ; s1, s2 singletons -> 0
    step = np.array([4.75 / (np.sqrt(2 * 4.75**2) + EPS), 0.0, -4.75 / (np.sqrt(2 * 4.75**2) + EPS), 0.0])
    np.testing.assert_allclose(res.diagnostics["episode_adv"], ep)
    np.testing.assert_allclose(res.diagnostics["step_adv"], step)
    np.testing.assert_allclose(res.advantages, ep + step)
    np.testing.assert_array_equal(res.diagnostics["anchor_group_size"], [2, 1, 2, 1])
    np.testing.assert_allclose(res.returns, [9.5, 10, 0, 0])


def test_gigpo_singleton_anchor_groups_get_zero_step_advantage():
    res = compute_advantages("gigpo", two_traj_group())
    single = res.diagnostics["anchor_group_size"] == 1
    assert single.sum() == 2
    np.testing.assert_array_equal(res.diagnostics["step_adv"][single], 0.0)


def test_invalid_penalty_does_not_leak_to_earlier_steps():
    valid, invalid = (compute_advantages("gigpo", two_traj_group(flag)) for flag in (False, True))
    # F's first step shares its anchor with W's first step: its step return is 0 either way
    assert invalid.diagnostics["step_adv"][2] == valid.diagnostics["step_adv"][2]
    np.testing.assert_array_equal(invalid.returns, valid.returns)
    # the penalised step itself is lower in the episode term
    assert invalid.diagnostics["episode_adv"][3] < valid.diagnostics["episode_adv"][3]


def test_gigpo_scale_none_and_omega():
    res = compute_advantages("gigpo", two_traj_group(False), scale="none", step_advantage_w=0.5)
    # episode: 10,10,0,0 - 5 ; step: anchor s0 returns 9.5, 0 -> +-4.75
    np.testing.assert_allclose(res.advantages, [5 + 0.5 * 4.75, 5, -5 - 0.5 * 4.75, -5])


def test_gigpo_similarity_anchors_merge_near_identical_observations():
    b = RolloutBatch.from_columns(
        group_id=[0, 0],
        traj_id=[0, 1],
        step=[0, 0],
        reward=[10, 0],
        observation=["You are in the kitchen 1.", "You are in the kitchen 2."],
    )
    exact = compute_advantages("gigpo", b)
    merged = compute_advantages("gigpo", b, enable_similarity=True, similarity_thresh=0.9)
    np.testing.assert_array_equal(exact.diagnostics["anchor_group_size"], [1, 1])
    np.testing.assert_array_equal(merged.diagnostics["anchor_group_size"], [2, 2])
    assert merged.diagnostics["step_adv"][0] > 0 > merged.diagnostics["step_adv"][1]


def test_registry_errors_name_the_bad_value():
    b = two_traj_group()
    with pytest.raises(
        KeyError, match="unknown credit method 'trpo'; available: exact_advantage, g2po, gigpo, graphgpo, grpo, hcapo"
    ):
        compute_advantages("trpo", b)
    with pytest.raises(ValueError, match="unknown option 'taux'.*allowed:.*tau"):
        compute_advantages("scpo", b, taux=0.3)
    with pytest.raises(ValueError, match="tau"):
        compute_advantages("scpo", b, tau=1.5)
    assert set(available_methods()) == {
        "grpo",
        "gigpo",
        "scpo",
        "progpo_c",
        "progpo_r",
        "g2po",
        "hgpo",
        "hcapo",
        "oracle",
        "graphgpo",
        "rloo",
        "shuffled",
        "mc_advantage",
        "exact_advantage",
        "ppo",
    }


def test_options_override_does_not_mutate_the_config():
    cfg = CreditConfig()
    compute_advantages("gigpo", two_traj_group(), cfg, gamma=0.5)
    assert cfg.gigpo.gamma == 0.95
    res = compute_advantages("gigpo", two_traj_group(), cfg, gamma=0.5)
    assert res.returns[0] == pytest.approx(5.0)


@pytest.mark.parametrize("method", ["grpo", "gigpo", "scpo", "progpo_c", "progpo_r", "g2po", "hgpo", "hcapo"])
def test_every_method_returns_one_finite_advantage_per_row(method):
    from scpo.credit.synthetic import synthetic_batch

    b = synthetic_batch(n_groups=4, group_size=4, max_steps=12, seed=1)
    extra = {"hindsight_logprob": -np.linspace(0.1, 2.0, b.n_rows)} if method == "hcapo" else {}
    res = compute_advantages(method, b, **extra)
    assert res.advantages.shape == (b.n_rows,) and res.advantages.dtype == np.float64
    assert np.all(np.isfinite(res.advantages))
    for key in ("episode_adv", "step_adv", "anchor_group_size"):
        assert len(res.diagnostics[key]) == b.n_rows
    assert 0.0 <= res.stats["frac_all_failed_groups"] <= 1.0


@pytest.mark.parametrize("method", available_methods())
@pytest.mark.parametrize("column, bad", [("reward", np.nan), ("reward", np.inf), ("episode_return", -np.inf)])
def test_every_method_refuses_a_non_finite_reward_or_return_naming_the_rows(method, column, bad):
    """A NaN or infinite reward or return is a ValueError naming its rows, for every registered method (a group
    statistic over it would give every row of the group advantage 0)."""
    from scpo.credit.synthetic import synthetic_batch

    b = synthetic_batch(n_groups=3, group_size=3, max_steps=6, seed=2)
    values = getattr(b, column).copy()
    rows = np.flatnonzero(b.traj_id == 4)
    values[rows] = bad
    setattr(b, column, values)
    if method == "oracle":
        b.oracle_progress = np.zeros(b.n_rows)
    extra = {"hindsight_logprob": -np.linspace(0.1, 2.0, b.n_rows)} if method == "hcapo" else {}
    with pytest.raises(ValueError, match=rf"^non-finite credit input: {column} at row") as err:
        compute_advantages(method, b, **extra)
    assert f"{rows[0]} (traj_id 4, {bad})" in str(err.value)


# ------------------------------------------------------------------ helpers at their edges
def test_check_rows_messages_in_full():
    with pytest.raises(ValueError, match=r"^the rollout batch has no rows$"):
        check_rows(np.array([], dtype=int), np.array([], dtype=int))
    with pytest.raises(
        ValueError,
        match=r"^traj_id 0 has rows in 2 separate runs \(from rows 0, 2\): rows of a trajectory must be contiguous "
        r"\(sort the batch by trajectory, then step\), and a traj_id names one trajectory of the whole batch \(ids "
        r"that restart in every group name several\)$",
    ):
        check_rows(np.array([0, 1, 0]), np.array([0, 0, 1]))
    # trajectory ids counted from 0 in every group: the second group's 1 is the first id met twice
    with pytest.raises(ValueError, match=r"^traj_id 1 has rows in 2 separate runs \(from rows 0, 4\)"):
        check_rows(np.array([1, 0, 0, 2, 1, 0, 2]), np.array([0, 0, 1, 0, 0, 0, 0]))
    with pytest.raises(
        ValueError,
        match=r"^row 1 \(traj_id 0\) has step 2, expected 1: rows must be ordered by step "
        r"0, 1, 2, \.\.\. within each trajectory$",
    ):
        check_rows(np.array([0, 0]), np.array([0, 2]))


def test_combine_codes_of_empty_narrow_and_wide_columns():
    from scpo.credit.grouping import combine_codes

    assert combine_codes(np.array([], dtype=int), np.array([], dtype=int)).tolist() == []
    # int8 codes (pandas categoricals use them) must not overflow in the mixed-radix fold: 21 x 21 = 441 distinct
    # tuples cannot fit 256 int8 values, so an int8 fold would merge some of them
    a, b = np.meshgrid(np.arange(21, dtype=np.int8), np.arange(21, dtype=np.int8))
    assert len(set(combine_codes(a.ravel(), b.ravel()).tolist())) == 441
    # five columns of radix 2^16: (1, 0, 0, 0, 0) folds to 2^64, which wraps to (0, 0, 0, 0, 0)'s 0 unless the fold
    # re-densifies before it overflows
    big = np.array([[0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 65535, 65535, 65535, 65535]], dtype=np.int64)
    assert len(set(combine_codes(*big.T).tolist())) == 3
    # six columns of 5,000 values each: 5000^6 > 2^63, so the fold must re-densify on the way; the result is still
    # the partition of the row tuples
    rng = np.random.default_rng(1)
    cols = [rng.integers(0, 5000, 300) for _ in range(6)]
    cols[0][150:] = cols[0][:150]
    for c in cols[1:]:
        c[150:] = c[:150]  # rows r and r + 150 are equal tuples
    codes = combine_codes(*cols)
    tuples = list(zip(*(c.tolist() for c in cols)))
    assert codes[:150].tolist() == codes[150:].tolist()
    assert len(set(codes.tolist())) == len(set(tuples)) == 150
    assert sorted(set(codes.tolist())) == list(range(150))
    # an int8 second column shifted by its minimum overflows int8 (34 + 80 > 127): the shift must happen in int64
    assert len(set(combine_codes(np.array([2, 2, 0, 0]), np.array([60, -78, -80, 34], dtype=np.int8)).tolist())) == 4
    # (0, 1) and (2, 0) with radix 2: 0 * 2 + 1 != 2 * 2 + 0
    assert len(set(combine_codes(np.array([0, 1, 1, 2]), np.array([1, 0, 1, 0])).tolist())) == 4


def test_factorize_lists_keep_types_and_shared_codes_cache_by_identity():
    from scpo.credit.grouping import factorize, shared_codes

    np.testing.assert_array_equal(factorize(["b", "a", "b"]), [0, 1, 0])
    np.testing.assert_array_equal(factorize([1, "1", 1]), [0, 1, 0])  # 1 and "1" are different values
    obs = np.array(["x", "y", "x"], dtype=object)
    with shared_codes():
        first = factorize(obs)
        assert factorize(obs) is first  # computed once per block
        assert factorize(obs.copy()) is not first
    assert factorize(obs) is not factorize(obs)  # no cache outside a block


def test_discounted_returns_of_integer_rewards_are_floats():
    r = np.array([0, 0, 10, 1, 1])
    np.testing.assert_allclose(
        discounted_returns(r, np.array([0, 0, 0, 1, 1]), np.array([0, 1, 2, 0, 1]), 0.5), [2.5, 5.0, 10.0, 1.5, 1.0]
    )
    # trajectories of unequal lengths, rows of a step position not adjacent
    r = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    traj, step = np.array([0, 1, 1, 1, 2, 2]), np.array([0, 0, 1, 2, 0, 1])
    np.testing.assert_allclose(discounted_returns(r, traj, step, 0.5), [1.0, 2 + 1.5 + 1.0, 3 + 2.0, 4.0, 8.0, 6.0])


def test_small_helpers_by_hand():
    from scpo.credit.grouping import invalid_penalty, next_row_in_trajectory, shifted_codes

    np.testing.assert_allclose(invalid_penalty([1, 0, True, False], 0.5), [0, 0.5, 0, 0.5])
    assert next_row_in_trajectory(np.array([0, 0, 1, 2, 2, 2])).tolist() == [1, -1, -1, 4, 5, -1]
    assert shifted_codes(np.array([7, 8, 9, 5]), np.array([0, 1, 2, 0]), 1).tolist() == [-1, 7, 8, -1]
    assert shifted_codes(np.array([7, 8, 9, 5]), np.array([0, 1, 2, 0]), 2).tolist() == [-1, -1, 7, -1]
    assert shifted_codes(np.array([7, 8, 9, 5]), np.array([0, 1, 2, 0]), 0).tolist() == [7, 8, 9, 5]
    # default epsilon 1e-6 and unbiased std
    np.testing.assert_allclose(
        segment_norm(np.array([1.0, 3.0]), np.array([0, 0])),
        [-1 / (np.sqrt(2) + 1e-6), 1 / (np.sqrt(2) + 1e-6)],
        rtol=1e-12,
    )


def test_episode_terms_with_default_arguments_and_single_trajectory_groups():
    from scpo.credit.grpo import episode_advantage, episode_statistics

    ret, pen = np.array([10.0, 10.0, 0.0]), np.array([0.0, 0.0, 0.5])
    group, traj = np.array([0, 0, 0]), np.array([0, 0, 1])
    # defaults: statistics over the rows, scale std, eps 1e-6
    s = ret - pen
    np.testing.assert_allclose(
        episode_advantage(ret, pen, group, traj), (s - s.mean()) / (s.std(ddof=1) + 1e-6), rtol=1e-12
    )
    mean, std, count = episode_statistics(ret, pen, group, traj)
    np.testing.assert_allclose([mean[0], std[0], count[0]], [s.mean(), s.std(ddof=1), 3], rtol=1e-12)
    # one trajectory alone in group 1 (with an invalid step): 0, not -pen / eps
    ret, pen = np.array([10.0, 0.0, 0.0, 5.0]), np.array([0.0, 0.0, 0.0, 0.5])
    group, traj = np.array([0, 0, 0, 1]), np.array([0, 1, 1, 2])
    out = episode_advantage(ret, pen, group, traj, stats_over="trajectories")
    assert out[3] == 0.0
    mean, std, count = episode_statistics(ret, pen, group, traj, stats_over="trajectories")
    np.testing.assert_allclose([mean[1], std[1], count[1]], [5.0, 0.0, 1.0])


def test_check_finite_messages_in_full():
    from scpo.credit.grouping import check_finite

    traj = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    check_finite({"reward": np.zeros(8), "episode_return": None}, traj)  # finite, and an absent column: no error
    one = np.zeros(8)
    one[4] = np.inf
    with pytest.raises(ValueError) as err:
        check_finite({"reward": one}, traj)
    assert str(err.value) == "non-finite credit input: reward at row 4 (traj_id 1, inf)"
    five = np.r_[np.full(5, np.nan), np.zeros(3)]
    with pytest.raises(ValueError) as err:
        check_finite({"reward": np.zeros(8), "episode_return": five}, traj)
    assert str(err.value) == (
        "non-finite credit input: episode_return at rows 0 (traj_id 0, nan), 1 (traj_id 0, nan), 2 (traj_id 0, nan), "
        "3 (traj_id 1, nan), 4 (traj_id 1, nan)"
    )
    seven = np.r_[np.zeros(1), np.full(7, -np.inf)]
    with pytest.raises(ValueError) as err:
        check_finite({"reward": one, "episode_return": seven}, traj)
    assert str(err.value) == (
        "non-finite credit input: reward at row 4 (traj_id 1, inf); episode_return at rows 1 (traj_id 0, -inf), "
        "2 (traj_id 0, -inf), 3 (traj_id 1, -inf), 4 (traj_id 1, -inf), 5 (traj_id 1, -inf) and 2 more"
    )
    with pytest.raises(ValueError, match=r"^non-finite credit input: reward at row 0 \(traj_id 0, nan\)$"):
        check_finite({"reward": [np.nan, 0, 0, 0, 0, 0, 0, 0]}, traj)  # a list is read as floats too
    with pytest.raises(ValueError, match=r"^non-finite credit input: reward at row 1 \(traj_id 0, inf\)$"):
        check_finite({"reward": np.array([0.0, np.inf, 0, 0, 0, 0, 0, 0], dtype=object)}, traj)  # and an object array
    six = np.r_[np.zeros(2), np.full(6, np.nan)]
    with pytest.raises(ValueError, match=r"5 \(traj_id 1, nan\), 6 \(traj_id 2, nan\) and 1 more$"):
        check_finite({"episode_return": six}, traj)
    two = np.zeros(8)
    two[[6, 7]] = np.nan
    with pytest.raises(ValueError) as err:
        check_finite({"oracle_progress": None, "reward": two}, traj)  # an absent column first: the next is checked
    assert str(err.value) == "non-finite credit input: reward at rows 6 (traj_id 2, nan), 7 (traj_id 2, nan)"
