"""The learning benchmark's statistics, on values worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.analysis.learning_stats import (
    aulc,
    first_reach,
    holm,
    minimum_detectable_difference,
    paired_bootstrap,
    spearman_bootstrap,
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


def test_minimum_detectable_difference_of_a_paired_t_test():
    # (t_{0.975, 4} + t_{0.8, 4}) / sqrt(5) = (2.7764 + 0.9410) / 2.2361
    assert minimum_detectable_difference(1.0, 5) == pytest.approx(1.6625, abs=1e-3)
    assert minimum_detectable_difference(0.2, 5) == pytest.approx(0.2 * 1.6625, abs=1e-3)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        minimum_detectable_difference(1.0, 1)


def test_paired_bootstrap_interval_and_p_value():
    out = paired_bootstrap([1.0, 2.0, 3.0, 4.0, 5.0], n_resamples=2000)
    assert out["mean"] == 3.0 and 1.0 <= out["lo"] < 3.0 < out["hi"] <= 5.0
    assert out["p"] == pytest.approx(2 / 2001)  # no resampled mean is <= 0
    mixed = paired_bootstrap([-1.0, 1.0, -1.0, 1.0], n_resamples=2000)
    assert mixed["lo"] < 0 < mixed["hi"] and mixed["p"] > 0.5
    assert paired_bootstrap([1.0, 2.0, 3.0], seed=4) == paired_bootstrap([1.0, 2.0, 3.0], seed=4)
    with pytest.raises(ValueError, match="at least 2 finite"):
        paired_bootstrap([1.0])


def test_t_band_and_first_reach():
    mean, lo, hi = t_band(np.array([[0.0, 1.0], [2.0, 1.0]]))
    np.testing.assert_allclose(mean, [1.0, 1.0])
    half = 12.7062 * np.sqrt(2.0) / np.sqrt(2)  # t_{0.975, 1} * sd / sqrt(n)
    np.testing.assert_allclose(hi - mean, [half, 0.0], rtol=1e-4)
    assert first_reach([0, 2, 4, 6], [0.1, 0.4, 0.6, 0.7], 0.5) == 4
    assert np.isnan(first_reach([0, 2], [0.1, 0.2], 0.5))


def test_spearman_with_a_bootstrap_over_paired_seeds():
    fixed = {"a": 0.5, "b": 0.6, "c": 0.7, "d": 0.1}
    per_seed = {"a": [0.1, 0.2], "b": [0.3, 0.4], "c": [0.5, 0.6], "e": [0.0, 0.0]}
    out = spearman_bootstrap(fixed, per_seed, n_resamples=500)
    assert out["rho"] == pytest.approx(1.0) and out["lo"] == pytest.approx(1.0) and out["n_methods"] == 3
    flipped = spearman_bootstrap(fixed, {"a": [0.6, 0.5], "b": [0.3, 0.4], "c": [0.1, 0.2]}, n_resamples=500)
    assert flipped["rho"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="at least 3 methods"):
        spearman_bootstrap({"a": 1.0}, {"a": [1.0]})


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
    table = fidelity_correlation(runs, {"bench": {"a": 0.2, "b": 0.5, "c": 0.9}}, n_resamples=200)
    assert table["env"].tolist() == ["alfworld"]
    assert table["rho"].iloc[0] == pytest.approx(1.0) and table["n_methods"].iloc[0] == 3
    assert fidelity_correlation(runs, {"bench": {"a": 0.9, "b": 0.5, "c": 0.2}}, 200, envs=["corridor"])[
        "env"
    ].tolist() == ["corridor"]
