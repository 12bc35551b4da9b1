"""Shared helpers, GRPO, GiGPO and the registry, against numbers worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.credit import CreditConfig, available_methods, compute_advantages
from scpo.credit.grouping import check_rows, combine_codes, discounted_returns, segment_norm
from scpo.rollout_types import RolloutBatch

EPS = 1e-6
SQ2 = 1 / np.sqrt(2)


def two_traj_group(invalid_last_fail: bool = True) -> RolloutBatch:
    """Group 0: W (won) sees s0 -> s1 and earns 10 at its last step; F (failed) sees s0 -> s2, last step invalid."""
    return RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0], traj_id=[0, 0, 1, 1], step=[0, 1, 0, 1], reward=[0, 10, 0, 0],
        observation=["s0", "s1", "s0", "s2"], action=["a", "b", "a", "c"],
        valid=[True, True, True, not invalid_last_fail])


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
    b = RolloutBatch.from_columns(group_id=[0, 0, 0, 1, 1], traj_id=[0, 0, 1, 2, 3], step=[0, 1, 0, 0, 0],
                                  reward=[0, 10, 10, 0, 10])
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
    ep = (s - s.mean()) / (s.std(ddof=1) + EPS)
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
    b = RolloutBatch.from_columns(group_id=[0, 0], traj_id=[0, 1], step=[0, 0], reward=[10, 0],
                                  observation=["You are in the kitchen 1.", "You are in the kitchen 2."])
    exact = compute_advantages("gigpo", b)
    merged = compute_advantages("gigpo", b, enable_similarity=True, similarity_thresh=0.9)
    np.testing.assert_array_equal(exact.diagnostics["anchor_group_size"], [1, 1])
    np.testing.assert_array_equal(merged.diagnostics["anchor_group_size"], [2, 2])
    assert merged.diagnostics["step_adv"][0] > 0 > merged.diagnostics["step_adv"][1]


def test_registry_errors_name_the_bad_value():
    b = two_traj_group()
    with pytest.raises(KeyError, match="unknown credit method 'ppo'.*grpo, gigpo, scpo"):
        compute_advantages("ppo", b)
    with pytest.raises(ValueError, match="unknown option 'taux'.*allowed:.*tau"):
        compute_advantages("scpo", b, taux=0.3)
    with pytest.raises(ValueError, match="tau"):
        compute_advantages("scpo", b, tau=1.5)
    assert set(available_methods()) == {"grpo", "gigpo", "scpo", "progpo_c", "progpo_r", "g2po", "hgpo", "hcapo", "oracle"}


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
