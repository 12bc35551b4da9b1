"""HGPO's two public versions: verl-agent's recipe ((l+2)^alpha weights, eps in their normaliser, the base group)
against a group worked by hand, beside the authors' version on the same group."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import compute_advantages

EPS = 1e-6


def batch() -> RolloutBatch:
    # t1: A -> B won (10) ; t2: A -> B ; t3: A -> C, its second step invalid ; t4: C -> B. gamma 0.5:
    # G = t1 5, 10 ; t2 0, 0 ; t3 0, -0.1 (penalty after discounting) ; t4 0, 0
    return RolloutBatch.from_columns(
        group_id=[0] * 8,
        traj_id=[0, 0, 1, 1, 2, 2, 3, 3],
        step=[0, 1] * 4,
        reward=[0, 10, 0, 0, 0, 0, 0, 0],
        observation=["A", "B", "A", "B", "A", "C", "C", "B"],
        valid=[True, True, True, True, True, False, True, True],
    )


def pop(x, v):
    return (x - np.mean(v)) / (np.std(v) + EPS)


# depth l = 0: {A: 5, 0, 0}, {B: 10, 0, 0}, {C: -0.1, 0} ; l = 1: {(A, B): 10, 0}, (A, C) and (C, B) alone
A0 = {0: pop(5, [5, 0, 0]), 2: pop(0, [5, 0, 0]), 4: pop(0, [5, 0, 0])}
B0 = {1: pop(10, [10, 0, 0]), 3: pop(0, [10, 0, 0]), 7: pop(0, [10, 0, 0])}
C0 = {5: pop(-0.1, [-0.1, 0]), 6: pop(0, [-0.1, 0])}
AB1 = {1: pop(10, [10, 0]), 3: pop(0, [10, 0])}


def test_recipe_version_by_hand():
    res = compute_advantages("hgpo", batch(), version="verl_agent", history_length=2, gamma=0.5)
    w0, w1 = 2.0, 3.0  # (l + 2)^1
    expected = np.zeros(8)
    for r, a in {**A0, **C0, 7: B0[7]}.items():
        expected[r] = w0 * a / (w0 + EPS)
    for r in (1, 3):
        expected[r] = (w0 * B0[r] + w1 * AB1[r]) / (w0 + w1 + EPS)
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-12)


def test_authors_version_on_the_same_group():
    res = compute_advantages("hgpo", batch(), history_length=2, gamma=0.5)
    expected = np.zeros(8)
    for r, a in {**A0, **C0, 7: B0[7]}.items():
        expected[r] = a  # one surviving depth: its weight renormalises to 1
    for r in (1, 3):
        expected[r] = (1 * B0[r] + 2 * AB1[r]) / 3
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-12)


def test_recipe_base_group_pools_the_episode_term_with_weight_one():
    res = compute_advantages("hgpo", batch(), version="verl_agent", base_group=True, history_length=1, gamma=0.5)
    scores = np.array([10, 10, 0, 0, 0, -0.1, 0, 0])
    base = (scores - scores.mean()) / (scores.std(ddof=1) + EPS)
    expected = np.zeros(8)
    for r, a in {**A0, **C0, 7: B0[7]}.items():
        expected[r] = (1 * base[r] + 2 * a) / (1 + 2 + EPS)
    for r in (1, 3):
        expected[r] = (base[r] + 2 * B0[r] + 3 * AB1[r]) / (1 + 2 + 3 + EPS)
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-12)
    np.testing.assert_allclose(res.diagnostics["episode_adv"], base, rtol=1e-12)


def test_recipe_alpha_and_scale_none():
    res = compute_advantages("hgpo", batch(), version="verl_agent", alpha=2.0, scale="none", gamma=0.5)
    # rows 1 (t1's B): l = 0 centred 10 - 10/3, l = 1 centred 5 ; weights 2^2, 3^2
    assert res.advantages[1] == pytest.approx((4 * (10 - 10 / 3) + 9 * 5) / (13 + EPS), rel=1e-12)


def test_base_group_belongs_to_the_recipe():
    with pytest.raises(ValueError, match="base_group=True belongs to version='verl_agent'"):
        compute_advantages("hgpo", batch(), base_group=True)
    with pytest.raises(ValueError, match="version"):
        compute_advantages("hgpo", batch(), version="recipe")


def test_a_zero_base_term_takes_no_weight():
    # both trajectories won, so every row's episode term is 0: only the depths count. gamma 0.5:
    # t1: A -> B (G 5, 10) ; t2: A -> C -> B (G 2.5, 5, 10)
    b = RolloutBatch.from_columns(
        group_id=[0] * 5,
        traj_id=[0, 0, 1, 1, 1],
        step=[0, 1, 0, 1, 2],
        reward=[0, 10, 0, 0, 10],
        observation=["A", "B", "A", "C", "B"],
    )
    res = compute_advantages("hgpo", b, version="verl_agent", base_group=True, history_length=0, gamma=0.5)
    np.testing.assert_array_equal(res.diagnostics["episode_adv"], 0.0)
    a = pop(5, [5, 2.5])
    # A: {5, 2.5} at depth 0 only, weight 2 ; B: {10, 10} gives 0 ; C alone
    np.testing.assert_allclose(res.advantages, [2 * a / (2 + EPS), 0, -2 * a / (2 + EPS), 0, 0], rtol=1e-12)


def test_the_base_term_uses_the_normalisations_epsilon():
    res = compute_advantages("hgpo", batch(), version="verl_agent", base_group=True, history_length=0, epsilon=0.5)
    scores = np.array([10, 10, 0, 0, 0, -0.1, 0, 0])
    np.testing.assert_allclose(
        res.diagnostics["episode_adv"], (scores - scores.mean()) / (scores.std(ddof=1) + 0.5), rtol=1e-12
    )


def test_unknown_version_is_named():
    from scpo.credit.hgpo import hgpo_step_advantage

    with pytest.raises(ValueError, match=r"^HGPO version='recipe' is not one of authors, verl_agent$"):
        hgpo_step_advantage(
            np.zeros(1),
            np.zeros(1, int),
            np.array(["a"], object),
            np.zeros(1, int),
            history_length=0,
            alpha=1.0,
            scale="std",
            epsilon=EPS,
            version="recipe",
        )
