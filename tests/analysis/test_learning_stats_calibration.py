"""The learning benchmark's statistics under no true difference, at the benchmark's seed counts (5 and 10): the
reported 95% paired-t intervals cover 0 in at least 93% of simulated comparisons, and the paired t-test and the exact
sign-flip test reject at 0.05 in at most 7%; the percentile bootstrap they replace fails the same check.

Three nulls (docs/algorithms.md, "Measuring learning"):
- normal differences;
- the paired design's null with skewed AULCs: per seed, two methods' AULCs drawn alike from a skewed (lognormal)
  distribution around a shared seed effect, so the differences are symmetric and heavy-tailed;
- skewed differences with mean 0 (gamma, shape 8: skewness 0.71), a difference in shape but not in mean.
Seeded; 20,000 comparisons per case for the interval (its coverage has a standard error of 0.0016), 2,000 for the
sign-flip test (0.005 at a rate of 0.05).
"""

from __future__ import annotations

import numpy as np
import pytest

from scpo.analysis.learning_stats import paired_t, sign_flip_p

SEEDS = (5, 10)
NULLS = ("normal", "exchangeable_lognormal", "skewed_gamma8")


def _null(name: str, n: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    if name == "normal":
        return rng.normal(0.0, 0.05, size=(reps, n))
    if name == "exchangeable_lognormal":
        seed_effect = rng.normal(0.0, 0.1, size=(reps, n))
        a = seed_effect + 0.05 * np.exp(rng.normal(0.0, 1.0, size=(reps, n)))
        b = seed_effect + 0.05 * np.exp(rng.normal(0.0, 1.0, size=(reps, n)))
        return a - b
    if name == "skewed_gamma8":
        return 0.05 * (rng.gamma(8.0, size=(reps, n)) - 8.0) / np.sqrt(8.0)
    raise ValueError(name)


@pytest.mark.parametrize("null", NULLS)
@pytest.mark.parametrize("n", SEEDS)
def test_the_paired_t_interval_covers_and_the_tests_hold_their_level(null, n):
    rng = np.random.default_rng([n, NULLS.index(null)])
    d = _null(null, n, 20_000, rng)
    _, lo, hi, p_t = paired_t(d, axis=1)
    coverage = np.mean((lo <= 0) & (hi >= 0))
    assert coverage >= 0.93, f"{null}, {n} seeds: the 95% paired-t interval covers 0 in {coverage:.3f}"
    assert np.mean(p_t <= 0.05) <= 0.07
    p_sf = sign_flip_p(d[:2000], axis=1)
    assert np.mean(p_sf <= 0.05) <= 0.07, f"{null}, {n} seeds: the sign-flip test rejects {np.mean(p_sf <= 0.05)}"
    if n == 5:  # 2 / 2^5 = 0.0625: the exact test cannot reject at 0.05 on 5 seeds, whatever the data
        assert p_sf.min() == pytest.approx(0.0625)


def _percentile_bootstrap(d: np.ndarray, resamples: int, rng: np.random.Generator):
    """The statistics these replace (the earlier `paired_bootstrap`), vectorised over rows: the 95% percentile
    interval of the resampled means and p = min(1, 2 min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (B + 1))."""
    reps, n = d.shape
    idx = rng.integers(0, n, size=(reps, resamples, n))
    means = np.take_along_axis(d[:, None, :], idx, axis=2).mean(axis=2)
    lo, hi = np.quantile(means, [0.025, 0.975], axis=1)
    below, above = (means <= 0).sum(axis=1), (means >= 0).sum(axis=1)
    p = np.minimum(1.0, 2.0 * np.minimum(below + 1, above + 1) / (resamples + 1))
    return lo, hi, p


def test_the_percentile_bootstrap_fails_the_same_check_at_5_seeds():
    """What the check guards against: the percentile bootstrap's interval covers about 0.85 at 5 normal seeds and
    its p rejects about 0.15 of true nulls."""
    rng = np.random.default_rng(7)
    d = _null("normal", 5, 2000, rng)
    lo, hi, p = _percentile_bootstrap(d, 2000, rng)
    assert np.mean((lo <= 0) & (hi >= 0)) < 0.88
    assert np.mean(p <= 0.05) > 0.12
