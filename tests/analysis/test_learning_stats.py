"""The learning benchmark's statistics, on values worked by hand (their calibration under no difference:
test_learning_stats_calibration.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from scpo.analysis.learning_stats import (
    aulc,
    first_reach,
    holm,
    minimum_detectable_difference,
    paired_difference,
    paired_t,
    rank_correlation,
    sign_flip_floor,
    sign_flip_p,
    t_band,
)


def test_aulc_is_the_normalised_trapezoid_area():
    assert aulc([0, 2, 4], [0.0, 0.5, 1.0]) == pytest.approx((2 * 0.25 + 2 * 0.75) / 4)
    assert aulc([4, 0, 2], [1.0, 0.0, 0.5]) == pytest.approx(0.5)  # order-free
    assert aulc([0, 1, 4], [0.2, 0.2, 0.8]) == pytest.approx((1 * 0.2 + 3 * 0.5) / 4)  # uneven spacing
    assert aulc([3], [0.4]) == 0.4
    with pytest.raises(ValueError, match="appears twice"):
        aulc([0, 0], [0.1, 0.2])
    with pytest.raises(ValueError, match="equal-length"):
        aulc([0, 1], [0.1])


def test_holm_adjusts_step_down_and_keeps_the_order():
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    np.testing.assert_allclose(holm([0.5, 0.001]), [0.5, 0.002])
    np.testing.assert_allclose(holm([0.9, 0.8]), [1.0, 1.0])


def _holm_by_definition(pvals):
    """Holm (1979) as the module docstring states it, one comparison at a time: the i-th smallest p_(i) adjusted to
    max_{j <= i} min(1, (m - j + 1) p_(j)), ties taken in the order given."""
    m = len(pvals)
    ranked = sorted(range(m), key=lambda k: pvals[k])
    out = [0.0] * m
    for i, k in enumerate(ranked):
        out[k] = max(min(1.0, (m - j) * pvals[ranked[j]]) for j in range(i + 1))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=14))
def test_holm_equals_its_definition(pvals):
    np.testing.assert_allclose(holm(pvals), _holm_by_definition(pvals), rtol=0, atol=1e-15)


def test_the_minimum_detectable_difference_has_the_stated_power():
    """The exact MDE (noncentral t) of a paired t-test, checked by simulation: at that mean difference, normal
    differences with sd 1 on n seeds reject at 0.05 in 80% of 20,000 draws; the textbook approximation
    (t_{0.975, n-1} + t_{0.8, n-1}) sd / sqrt(n) is a little smaller (1.6625 at 5 seeds)."""
    rng = np.random.default_rng(0)
    for n in (5, 10):
        mde = minimum_detectable_difference(1.0, n)
        d = rng.normal(mde, 1.0, size=(20_000, n))
        assert np.mean(stats.ttest_1samp(d, 0.0, axis=1).pvalue <= 0.05) == pytest.approx(0.8, abs=0.01)
        approx = (stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) / np.sqrt(n)
        assert approx < mde < approx * 1.02
    assert minimum_detectable_difference(0.2, 5) == pytest.approx(0.2 * minimum_detectable_difference(1.0, 5))
    assert minimum_detectable_difference(0.0, 5) == 0.0
    with pytest.raises(ValueError, match="at least 2 seeds"):
        minimum_detectable_difference(1.0, 1)


@pytest.mark.parametrize(("n", "alpha", "power"), [(2, 0.01, 0.9), (2, 0.05, 0.95), (2, 0.001, 0.99), (3, 0.001, 0.99)])
def test_the_minimum_detectable_difference_has_its_power_with_very_few_seeds(n, alpha, power):
    """Far beyond the textbook approximation's bracket (and beyond statsmodels' solve_power, which stops at an effect
    size of 10): the exact power of the two-sided t-test at the MDE is the power asked for."""
    mde = minimum_detectable_difference(1.0, n, alpha, power)
    crit, nc = stats.t.ppf(1 - alpha / 2, n - 1), np.sqrt(n) * mde
    assert mde > 10
    assert stats.nct.sf(crit, n - 1, nc) + np.nan_to_num(stats.nct.cdf(-crit, n - 1, nc)) == pytest.approx(power)


def _sign_flip_by_hand(d):
    """Two-sided exact sign-flip p by enumeration: the share of the 2^n sign patterns with |mean| >= |observed|."""
    d = np.asarray(d, dtype=float)
    means = [abs(np.mean(np.array(e) * np.abs(d))) for e in itertools.product((-1, 1), repeat=len(d))]
    return np.mean(np.array(means) >= abs(d.mean()) - 1e-12)


def test_the_issues_case_the_bootstrap_called_p_0_0002():
    """Five small negative differences: the percentile bootstrap gave p 0.0002 (its floor 2 / (B + 1)); the paired t
    gives 0.16 and the exact sign-flip test 2 / 32 = 0.0625, the smallest p it can give on 5 seeds."""
    out = paired_difference([-0.001, -0.002, -0.015, -0.001, -0.030])
    assert out["n"] == 5 and out["mean"] == pytest.approx(-0.0098)
    assert out["p_signflip"] == pytest.approx(0.0625) == out["p_floor"] == sign_flip_floor(5)
    assert out["p_t"] == pytest.approx(0.1609, abs=1e-4)
    half = stats.t.ppf(0.975, 4) * np.std([-0.001, -0.002, -0.015, -0.001, -0.030], ddof=1) / np.sqrt(5)
    assert (out["lo"], out["hi"]) == pytest.approx((-0.0098 - half, -0.0098 + half))
    assert out["lo"] < 0 < out["hi"] and out["exact"]


def test_the_sign_flip_p_enumerates_every_sign_pattern():
    assert sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)  # only all-plus and all-minus reach |mean| 2
    for d in ([1.0, -2.0, 3.0, 4.0], [0.3, 0.1, -0.2, 0.25, 0.05, -0.01, 0.4], [0.0, 1.0, 1.0, -1.0]):
        assert sign_flip_p(d) == pytest.approx(_sign_flip_by_hand(d))
    assert sign_flip_p([0.0, 0.0, 0.0]) == 1.0
    many = np.random.default_rng(3).normal(0.3, 1.0, size=14)
    drawn = sign_flip_p(many, permutations=4000, seed=1)  # 2^14 > 4000: drawn, p = (k + 1) / (4000 + 1)
    assert drawn == pytest.approx(_sign_flip_by_hand(many), abs=0.02)
    batch = np.vstack([[1.0, 2.0, 3.0], [1.0, -2.0, 3.0]])
    np.testing.assert_allclose(sign_flip_p(batch, axis=1), [0.25, _sign_flip_by_hand([1.0, -2.0, 3.0])])
    with pytest.raises(ValueError, match="at least 2 finite"):
        sign_flip_p([1.0])
    with pytest.raises(ValueError, match="at least 2 finite"):
        paired_difference([1.0, np.nan, 2.0])


def test_paired_t_interval_and_p_and_the_constant_case():
    mean, lo, hi, p = paired_t([1.0, 2.0, 3.0, 4.0, 5.0])
    half = stats.t.ppf(0.975, 4) * np.sqrt(2.5) / np.sqrt(5)
    assert (mean, lo, hi) == pytest.approx((3.0, 3.0 - half, 3.0 + half))
    assert p == pytest.approx(2 * stats.t.sf(3.0 / np.sqrt(2.5 / 5), 4))
    assert paired_t([0.2, 0.2, 0.2])[1:] == (pytest.approx(0.2), pytest.approx(0.2), 0.0)
    assert paired_t([0.0, 0.0])[3] == 1.0
    out = paired_difference([1.0, 2.0, 3.0, 4.0, 5.0])
    assert out["mde"] == pytest.approx(minimum_detectable_difference(np.sqrt(2.5), 5))
    assert out["sd"] == pytest.approx(np.sqrt(2.5)) and out["p_signflip"] == pytest.approx(0.0625)


def test_t_band_and_first_reach():
    mean, lo, hi = t_band(np.array([[0.0, 1.0], [2.0, 1.0]]))
    np.testing.assert_allclose(mean, [1.0, 1.0])
    half = 12.7062 * np.sqrt(2.0) / np.sqrt(2)  # t_{0.975, 1} * sd / sqrt(n)
    np.testing.assert_allclose(hi - mean, [half, 0.0], rtol=1e-4)
    assert first_reach([0, 2, 4, 6], [0.1, 0.4, 0.6, 0.7], 0.5) == 4
    assert np.isnan(first_reach([0, 2], [0.1, 0.2], 0.5))


def test_rank_correlation_with_its_exact_permutation_p():
    fixed = {"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.1}
    per_seed = {"a": [0.1, 0.2], "b": [0.3, 0.4], "c": [0.5, 0.6], "e": [0.0, 0.0]}
    out = rank_correlation(fixed, per_seed)
    assert out["rho"] == pytest.approx(1.0) and out["n_methods"] == 3 and out["n_seeds"] == 2
    assert out["p"] == pytest.approx(2 / 6) == out["p_floor"] and out["exact"]  # 2 of the 3! pairings reach |rho| 1
    flipped = rank_correlation(fixed, {"a": [0.6, 0.5], "b": [0.3, 0.4], "c": [0.1, 0.2]})
    assert flipped["rho"] == pytest.approx(-1.0) and flipped["p"] == pytest.approx(2 / 6)
    five = rank_correlation(dict(zip("abcde", [1, 2, 3, 4, 5])), dict(zip("abcde", [[1], [3], [2], [5], [4]])))
    rho = stats.spearmanr([1, 2, 3, 4, 5], [1, 3, 2, 5, 4]).statistic
    by_hand = np.mean(
        [
            abs(stats.spearmanr([1, 2, 3, 4, 5], perm).statistic) >= rho - 1e-12
            for perm in itertools.permutations([1, 3, 2, 5, 4])
        ]
    )
    assert five["rho"] == pytest.approx(rho) and five["p"] == pytest.approx(by_hand) and five["p_floor"] == 2 / 120
    eight = dict(zip("abcdefgh", [0.1, 0.4, 0.2, 0.9, 0.5, 0.3, 0.8, 0.6]))
    seeds = {m: [v + 0.05 * (i % 3), v] for i, (m, v) in enumerate(zip("abcdefgh", [3, 1, 2, 8, 4, 6, 7, 5]))}
    exact = rank_correlation(eight, seeds, permutations=math.factorial(8))
    drawn = rank_correlation(eight, seeds, permutations=5000, seed=2)
    assert exact["exact"] and not drawn["exact"] and drawn["p"] == pytest.approx(exact["p"], abs=0.01)
    constant = rank_correlation(fixed, {"a": [0.1], "b": [0.1], "c": [0.1]})
    assert np.isnan(constant["rho"]) and np.isnan(constant["p"])
    with pytest.raises(ValueError, match="at least 3 methods"):
        rank_correlation({"a": 1.0}, {"a": [1.0]})


def test_a_figure_label_wraps_at_its_separators_within_the_width():
    from scpo.testbeds.learning_tables import _wrap

    label = " · ".join(["alfworld", "profile cpu", "panel of 12 training tasks, 4 x 8 rollouts", "5 paired seeds"])
    wrapped = _wrap(label, 45)
    assert all(len(line) <= 45 for line in wrapped.splitlines()) and len(wrapped.splitlines()) == 3
    assert wrapped.replace("\n", " · ") == label
    assert _wrap(label, 500) == label


def test_setup_label_names_the_episode_length_and_history_of_its_env():
    from scpo.config import load_config
    from scpo.testbeds.learning_tables import setup_label

    cfg = load_config(
        "params.yaml",
        profile="cpu",
        overrides={"env.history_length": 6, "env.alfworld.max_steps": 50, "env.webshop.max_steps": 12},
    )
    assert "episodes of at most 50 steps, 6 past steps in the prompt" in setup_label(cfg, "alfworld")
    assert "episodes of at most 12 steps, 6 past steps in the prompt" in setup_label(cfg, "webshop")
    assert "goal objects" not in setup_label(cfg, "alfworld")
    revealed = load_config("params.yaml", profile="cpu", overrides={"env.alfworld.reveal_goal_objects": True})
    assert "in the prompt · goal objects' places in the task line · panel" in setup_label(revealed, "alfworld")


def test_fidelity_meets_learning_only_where_the_fidelity_was_measured():
    """The fidelity sources score credit on ALFWorld rollouts: an ALFWorld run set gets its rho, a corridor or WebShop
    run set none (its AULCs would be ranked against another environment's fidelity)."""
    import pandas as pd

    from scpo.testbeds.learning_tables import fidelity_correlation

    aulc = {"a": [0.1, 0.2, 0.15], "b": [0.3, 0.35, 0.4], "c": [0.5, 0.6, 0.55]}
    runs = pd.DataFrame(
        [
            {"env": env, "method": m, "seed": s, "aulc": v}
            for env in ("alfworld", "corridor", "webshop")
            for m, vals in aulc.items()
            for s, v in enumerate(vals)
        ]
    )
    table = fidelity_correlation(runs, {"bench": {"a": 0.2, "b": 0.5, "c": 0.9}})
    assert table["env"].tolist() == ["alfworld"]
    assert table["rho"].iloc[0] == pytest.approx(1.0) and table["n_methods"].iloc[0] == 3
    assert table["p"].iloc[0] == pytest.approx(1 / 3)
    assert fidelity_correlation(runs, {"bench": {"a": 0.9, "b": 0.5, "c": 0.2}}, envs=["corridor"])["env"].tolist() == [
        "corridor"
    ]


def test_the_success_metric_is_named_sampled_or_greedy():
    from scpo.config import load_config
    from scpo.testbeds.learning_tables import setup_label, success_metric

    sampled = load_config("params.yaml", profile="cpu")
    T = sampled.eval.temperature
    assert T > 0 and f"sampled at T={T:g}" in success_metric(sampled)
    assert success_metric(sampled) in setup_label(sampled, "alfworld")
    greedy = load_config("params.yaml", profile="cpu", overrides={"eval.temperature": 0.0})
    assert "greedy (T=0)" in success_metric(greedy) and "sampled" not in success_metric(greedy)
