"""Statistics of the learning benchmark (docs/algorithms.md, "Measuring learning"): pure functions of per-seed
learning curves.

- AULC: the area under the learning curve, normalised by its span (a mean success over the iterations):
  AULC = (1 / (t_K - t_0)) sum_k (t_{k+1} - t_k) (y_k + y_{k+1}) / 2 over the evaluation points t_0 < ... < t_K.
- Paired differences: within a seed every method saw the same task draws and evaluation episodes, so a method's
  difference from a reference is taken seed by seed, d_s = AULC(m, s) - AULC(ref, s), and summarised by its mean with a
  percentile bootstrap interval over seeds (resampled with replacement) and a two-sided bootstrap p-value
  p = min(1, 2 min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (B + 1)) for the resampled means d*; the p-values of a family
  (every method against one reference, per environment) are Holm-adjusted.
- Power: the smallest mean paired difference detectable at level alpha with power 1 - beta by a paired t-test on n
  seeds, MDE = (t_{1 - alpha/2, n-1} + t_{1 - beta, n-1}) s_d / sqrt(n), with s_d the standard deviation of the
  paired differences.
- Bands: mean +- t_{0.975, n-1} s / sqrt(n) over seeds at each evaluation point.
- Rank correlation of two per-method quantities (Spearman's rho) with a percentile bootstrap interval over the seeds
  of the quantity measured per seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

__all__ = [
    "aulc",
    "paired_bootstrap",
    "holm",
    "minimum_detectable_difference",
    "t_band",
    "first_reach",
    "spearman_bootstrap",
]


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


def paired_bootstrap(differences: Sequence[float], n_resamples: int = 10_000, seed: int = 0) -> dict[str, float]:
    """Mean of the paired differences, its 95% percentile bootstrap interval and two-sided bootstrap p-value (module
    docstring); resamples seeds with replacement from a generator seeded by `seed`."""
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or len(d) < 2 or not np.all(np.isfinite(d)):
        raise ValueError(f"paired_bootstrap needs at least 2 finite differences, got {d.tolist()}")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_resamples, len(d)))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    below, above = int(np.sum(means <= 0)), int(np.sum(means >= 0))
    p = min(1.0, 2.0 * min(below + 1, above + 1) / (n_resamples + 1))
    return {"mean": float(d.mean()), "lo": float(lo), "hi": float(hi), "p": p, "n": int(len(d))}


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (same order as given): p_(i) * (m - i + 1), made monotone, capped at 1."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return out


def minimum_detectable_difference(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """MDE of a two-sided paired t-test on n pairs with difference standard deviation `sd` (module docstring)."""
    if n < 2:
        raise ValueError(f"a paired design needs at least 2 seeds, got {n}")
    df = n - 1
    return float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * sd / np.sqrt(n))


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


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho, NaN when either side is constant (the correlation is not defined)."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(stats.spearmanr(x, y).statistic)


def spearman_bootstrap(
    fixed: Mapping[str, float],
    per_seed: Mapping[str, Sequence[float]],
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """Spearman's rho between a per-method value (`fixed`, e.g. a fidelity AUC) and the per-method mean of a per-seed
    quantity (`per_seed`, e.g. AULC), with a 95% percentile interval from resampling the seeds (jointly for every
    method: the seeds are paired). Methods in both mappings only; at least 3."""
    methods = [m for m in fixed if m in per_seed]
    if len(methods) < 3:
        raise ValueError(f"a rank correlation needs at least 3 methods in both, got {methods}")
    x = np.array([fixed[m] for m in methods], dtype=np.float64)
    y = np.array([np.asarray(per_seed[m], dtype=np.float64) for m in methods])  # [methods, seeds]
    rho = _spearman(x, y.mean(axis=1))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, y.shape[1], size=(n_resamples, y.shape[1]))
    boot = np.array([_spearman(x, y[:, i].mean(axis=1)) for i in idx])
    boot = boot[np.isfinite(boot)]
    lo, hi = np.quantile(boot, [0.025, 0.975]) if len(boot) else (np.nan, np.nan)
    return {"rho": rho, "lo": float(lo), "hi": float(hi), "n_methods": len(methods), "n_seeds": int(y.shape[1])}
