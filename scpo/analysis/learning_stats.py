"""Statistics of the learning benchmark (docs/algorithms.md, "Measuring learning"): pure functions of per-seed
learning curves, built for the benchmark's small seed counts (5-10 paired seeds).

- AULC: the area under the learning curve, normalised by its span (a mean success over the iterations):
  AULC = (1 / (t_K - t_0)) sum_k (t_{k+1} - t_k) (y_k + y_{k+1}) / 2 over the evaluation points t_0 < ... < t_K.
- Paired differences: within a seed every method saw the same task draws and evaluation episodes, so a method's
  difference from a reference is taken seed by seed, d_s = AULC(m, s) - AULC(ref, s), s = 1..n, with mean d and
  standard deviation s_d (ddof 1):
  - the 95% paired-t interval d +- t_{0.975, n-1} s_d / sqrt(n) and the paired t-test's two-sided p (Student 1908;
    `scipy.stats.ttest_1samp`): exact when the d_s are normal, approximate otherwise;
  - the exact sign-flip p (Fisher 1935, the randomization test of a paired design): under "no difference" the
    d_s are symmetric about 0, so each of the 2^n sign patterns e of the observed |d_s| is equally likely and
    p = #{e in {-1, +1}^n : |mean(e_s |d_s|)| >= |d|} / 2^n (`scipy.stats.permutation_test`,
    permutation_type="samples"; exact when 2^n <= `permutations`, else that many patterns drawn and
    p = (#{...} + 1) / (permutations + 1)). No normality is assumed; its smallest value is 2 / 2^n (0.0625 at 5
    seeds, 0.00195 at 10), whatever the data: `sign_flip_floor`.
  - Holm's step-down adjustment within a family of m comparisons (Holm 1979; computed by statsmodels' `multipletests`,
    method="holm"): p_(i) sorted ascending, adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
- Power, per comparison from its own s_d: the minimum detectable difference (MDE), the mean difference delta at which
  a two-sided paired t-test at level alpha on n seeds has power 1 - beta, P(|T'| > t_{1-alpha/2, n-1}) = 1 - beta
  with T' noncentral t on n - 1 degrees of freedom and noncentrality sqrt(n) delta / s_d (solved exactly; close to
  (t_{1-alpha/2, n-1} + t_{1-beta, n-1}) s_d / sqrt(n)).
- Bands: mean +- t_{0.975, n-1} s / sqrt(n) over seeds at each evaluation point.
- Rank correlation of two per-method quantities over k methods (Spearman's rho of a per-method value and the
  per-method mean over seeds of another) and its exact permutation p: the share of the k! pairings of the two lists
  with |rho| at least the observed one (`scipy.stats.permutation_test`, permutation_type="pairings"; exact when
  k! <= `permutations`). It asks whether the two orderings are related beyond chance over these k methods; its
  smallest value is 2 / k! (1/60 at 5 methods) when the values have no ties.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import optimize, stats
from statsmodels.stats.multitest import multipletests

__all__ = [
    "aulc",
    "paired_t",
    "sign_flip_p",
    "sign_flip_floor",
    "paired_difference",
    "holm",
    "minimum_detectable_difference",
    "t_band",
    "first_reach",
    "rank_correlation",
]

PERMUTATIONS = (
    100_000  # sign patterns / pairings enumerated exactly up to this many (params.yaml learning.permutations)
)


def aulc(iterations: Sequence[float], values: Sequence[float]) -> float:
    """The normalised trapezoid area under (iterations, values); one point gives that value."""
    t = np.asarray(iterations, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if t.shape != y.shape or t.ndim != 1 or len(t) == 0:
        raise ValueError(f"aulc needs equal-length 1-D iterations and values, got {t.shape} and {y.shape}")
    order = np.argsort(t, kind="stable")
    t, y = t[order], y[order]
    if len(np.unique(t)) != len(t):
        raise ValueError(f"aulc: an iteration appears twice in {t.tolist()}")
    if len(t) == 1:
        return float(y[0])
    return float(np.sum(np.diff(t) * (y[1:] + y[:-1]) / 2.0) / (t[-1] - t[0]))


def _differences(d: Sequence[float] | np.ndarray, axis: int) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    if d.ndim == 0 or d.shape[axis] < 2 or not np.all(np.isfinite(d)):
        raise ValueError(f"paired statistics need at least 2 finite differences per comparison, got {d.tolist()}")
    return d


def paired_t(
    differences: Sequence[float] | np.ndarray, axis: int = -1, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lo, hi, p) of the paired differences along `axis`: the `level` paired-t interval and the two-sided
    paired t-test p (module docstring). Differences that are all equal give lo = hi = mean and p = 1 (all 0) or 0."""
    d = _differences(differences, axis)
    mean = d.mean(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant differences: handled below
        res = stats.ttest_1samp(d, 0.0, axis=axis)
        ci = res.confidence_interval(level)
    constant = np.ptp(d, axis=axis) == 0
    lo = np.where(constant, mean, ci.low)
    hi = np.where(constant, mean, ci.high)
    p = np.where(constant, np.where(mean == 0, 1.0, 0.0), res.pvalue)
    return mean, lo, hi, p


def sign_flip_p(
    differences: Sequence[float] | np.ndarray, axis: int = -1, permutations: int = PERMUTATIONS, seed: int = 0
) -> np.ndarray:
    """The two-sided sign-flip p of the mean of the paired differences along `axis` (module docstring): exact over
    the 2^n sign patterns when 2^n <= `permutations`, else `permutations` patterns drawn with `seed`."""
    d = _differences(differences, axis)
    res = stats.permutation_test(
        (d,),
        np.mean,
        permutation_type="samples",
        vectorized=True,
        n_resamples=permutations,
        alternative="two-sided",
        axis=axis,
        rng=seed,
    )
    return np.minimum(1.0, res.pvalue)


def sign_flip_floor(n: int) -> float:
    """The smallest two-sided p the exact sign-flip test can give on n paired seeds: 2 / 2^n."""
    return 2.0 ** (1 - n)


def paired_difference(
    differences: Sequence[float],
    permutations: int = PERMUTATIONS,
    seed: int = 0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> dict[str, float]:
    """Summary of one comparison's paired differences: n, mean, sd, the 95% paired-t interval (lo, hi), the paired
    t-test p (p_t), the sign-flip p (p_signflip), its floor 2 / 2^n (p_floor), whether it was exact, and the MDE at
    `alpha` and `power` from this comparison's own sd."""
    d = _differences(differences, -1)
    if d.ndim != 1:
        raise ValueError(f"paired_difference takes one comparison's differences (1-D), got shape {d.shape}")
    mean, lo, hi, p_t = paired_t(d)
    sd = 0.0 if np.ptp(d) == 0 else float(d.std(ddof=1))
    n = len(d)
    return {
        "n": n,
        "mean": float(mean),
        "sd": sd,
        "lo": float(lo),
        "hi": float(hi),
        "p_t": float(p_t),
        "p_signflip": float(sign_flip_p(d, permutations=permutations, seed=seed)),
        "p_floor": sign_flip_floor(n),
        "exact": bool(2**n <= permutations),
        "mde": minimum_detectable_difference(sd, n, alpha, power),
    }


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the order given (module docstring): statsmodels'
    `multipletests(p, method="holm")`."""
    p = np.asarray(pvalues, dtype=np.float64)
    return multipletests(p, method="holm")[1] if len(p) else p.copy()


def minimum_detectable_difference(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """MDE of a two-sided paired t-test on n pairs with difference standard deviation `sd`: the delta with
    P(|T'| > t_{1-alpha/2, n-1}) = power, T' ~ noncentral t(n - 1, sqrt(n) delta / sd) (module docstring), solved
    with scipy's brentq. Not statsmodels' `TTestPower.solve_power`: it returns the edge of its search bracket without a
    word once the effect size passes 10 (2 seeds, alpha 0.01, power 0.9: 10.0 where the MDE is 74.05 sd)."""
    if n < 2:
        raise ValueError(f"a paired design needs at least 2 seeds, got {n}")
    if not 0 < alpha < 1 or not alpha < power < 1:
        raise ValueError(f"MDE needs 0 < alpha < power < 1, got alpha {alpha}, power {power}")
    if sd == 0:
        return 0.0
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)

    def shortfall(nc: float) -> float:  # the far tail is negligible where scipy's nct.cdf returns NaN
        return stats.nct.sf(crit, df, nc) + np.nan_to_num(stats.nct.cdf(-crit, df, nc)) - power

    upper = 2 * (crit + stats.t.ppf(power, df)) + 5  # twice the textbook approximation, in units of sd / sqrt(n)
    while shortfall(upper) < 0:  # few seeds and a high power: the root lies further out
        upper *= 2
    nc = optimize.brentq(shortfall, 0.0, upper, xtol=1e-10)
    return float(nc * sd / np.sqrt(n))


def t_band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lo, hi) over axis 0 (seeds) with the 95% Student-t half-width; one seed gives lo = hi = mean."""
    v = np.asarray(values, dtype=np.float64)
    mean = v.mean(axis=0)
    n = v.shape[0]
    if n < 2:
        return mean, mean.copy(), mean.copy()
    half = stats.t.ppf(0.975, n - 1) * v.std(axis=0, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


def first_reach(iterations: Sequence[float], values: Sequence[float], threshold: float) -> float:
    """The first iteration whose value is >= threshold (NaN if none)."""
    t = np.asarray(iterations, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    hit = np.flatnonzero(y[order] >= threshold)
    return float(t[order][hit[0]]) if len(hit) else float("nan")


def rank_correlation(
    fixed: Mapping[str, float],
    per_seed: Mapping[str, Sequence[float]],
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> dict[str, float]:
    """Spearman's rho between a per-method value (`fixed`, e.g. a fidelity AUC) and the per-method mean of a per-seed
    quantity (`per_seed`, e.g. AULC), over the methods in both (at least 3), with the two-sided permutation p over
    the k! pairings of the methods (module docstring). rho and p are NaN where either side is constant."""
    methods = [m for m in fixed if m in per_seed]
    k = len(methods)
    if k < 3:
        raise ValueError(f"a rank correlation needs at least 3 methods in both, got {methods}")
    x = stats.rankdata([fixed[m] for m in methods])
    y = stats.rankdata([float(np.mean(per_seed[m])) for m in methods])
    n_seeds = min(len(per_seed[m]) for m in methods)
    exact = math.factorial(k) <= permutations
    out = {"rho": float("nan"), "p": float("nan"), "p_floor": 2.0 / math.factorial(k), "exact": exact}
    if np.ptp(x) > 0 and np.ptp(y) > 0:
        xc, yc = x - x.mean(), y - y.mean()
        scale = np.sqrt(np.sum(xc**2) * np.sum(yc**2))

        def rho_of(xs: np.ndarray, axis: int = -1) -> np.ndarray:  # Pearson's r of the ranks = Spearman's rho
            return np.sum((xs - xs.mean(axis=axis, keepdims=True)) * yc, axis=axis) / scale

        res = stats.permutation_test(
            (x,), rho_of, permutation_type="pairings", vectorized=True, n_resamples=permutations, rng=seed
        )
        out.update(rho=float(np.sum(xc * yc) / scale), p=float(min(1.0, res.pvalue)))
    return {**out, "n_methods": k, "n_seeds": n_seeds}
