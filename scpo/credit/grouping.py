"""Shared, vectorised building blocks of every estimator: row checks, group codes, segment statistics, `norm`, returns.

All functions take flat per-row arrays (one row per step, rows of a trajectory contiguous and ordered by step) and use
sort/bincount group-bys, never Python loops over rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import pandas as pd

__all__ = [
    "check_rows",
    "check_finite",
    "factorize",
    "shared_codes",
    "combine_codes",
    "segment_sizes",
    "segment_norm",
    "segment_norm_keep_single",
    "similarity_clusters",
    "discounted_returns",
    "invalid_penalty",
    "next_row_in_trajectory",
    "shifted_codes",
    "trajectory_first_rows",
]


def check_rows(traj_id: np.ndarray, step: np.ndarray) -> None:
    """Raise if rows are not grouped by trajectory (contiguous) and ordered by step 0, 1, 2, ... within it."""
    traj_id = np.asarray(traj_id)
    step = np.asarray(step)
    if len(traj_id) == 0:
        raise ValueError("the rollout batch has no rows")
    starts = np.r_[True, traj_id[1:] != traj_id[:-1]]
    first_rows = np.flatnonzero(starts)
    again = pd.Series(traj_id[first_rows]).duplicated().to_numpy()
    if again.any():
        t = traj_id[first_rows[np.argmax(again)]]
        runs = first_rows[traj_id[first_rows] == t]
        raise ValueError(
            f"traj_id {t} has rows in {len(runs)} separate runs (from rows {', '.join(map(str, runs))}): rows of a "
            "trajectory must be contiguous (sort the batch by trajectory, then step), and a traj_id names one "
            "trajectory of the whole batch (ids that restart in every group name several)"
        )
    expected = np.arange(len(step)) - np.maximum.accumulate(np.where(starts, np.arange(len(step)), 0))
    bad = np.flatnonzero(step != expected)
    if len(bad):
        r = int(bad[0])
        raise ValueError(
            f"row {r} (traj_id {traj_id[r]}) has step {step[r]}, expected {expected[r]}: rows must be "
            "ordered by step 0, 1, 2, ... within each trajectory"
        )


def check_finite(columns: Mapping[str, np.ndarray | None], traj_id: np.ndarray) -> None:
    """Raise ValueError naming each column of `columns` (None: absent, skipped) that holds a NaN or an infinity, with
    its first 5 such rows, their trajectories and values. A group statistic over a non-finite value is NaN, and the
    estimators' masks and sign tests would turn it into advantage 0 for the whole group without a word."""
    problems = []
    for name, values in columns.items():
        if values is None:
            continue
        x = np.asarray(values, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(x))
        if len(bad):
            rows = ", ".join(f"{r} (traj_id {traj_id[r]}, {x[r]})" for r in bad[:5])
            more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
            problems.append(f"{name} at row{'s' if len(bad) > 1 else ''} {rows}{more}")
    if problems:
        raise ValueError("non-finite credit input: " + "; ".join(problems))


_CODES: ContextVar[dict | None] = ContextVar("scpo_credit_codes", default=None)


@contextmanager
def shared_codes() -> Iterator[None]:
    """Within this block `factorize` computes the codes of each (unchanged) column array once: several estimator
    stages factorise the same observation column. `compute_advantages` opens one block per call."""
    token = _CODES.set({})
    try:
        yield
    finally:
        _CODES.reset(token)


def factorize(values: Sequence) -> np.ndarray:
    """Dense int64 codes 0..K-1 of `values` in order of first appearance (hash-based, exact equality)."""
    cache = _CODES.get()
    if cache is not None and isinstance(values, np.ndarray):
        hit = cache.get(id(values))
        if hit is not None and hit[0] is values:
            return hit[1]
    codes = pd.factorize(values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object))[0]
    codes = codes.astype(np.int64)
    if cache is not None and isinstance(values, np.ndarray):
        cache[id(values)] = (values, codes)  # holds `values`, so its id stays unique in the block
    return codes


def combine_codes(*codes: np.ndarray) -> np.ndarray:
    """Dense codes 0..K-1 of the tuple key (codes[0][r], codes[1][r], ...) per row.

    Negative entries are allowed (padding). Columns are folded into one int64 mixed-radix key (re-densified only when
    the next fold could overflow), then hash-factorised once: O(n) per column, no row-wise sort of tuples.
    """
    acc = np.asarray(codes[0], dtype=np.int64)
    acc = acc - acc.min() if len(acc) else acc
    for col in codes[1:]:
        col = np.asarray(col, dtype=np.int64)
        col = col - col.min() if len(col) else col
        radix = int(col.max()) + 1 if len(col) else 1
        if len(acc) and (int(acc.max()) + 1) * radix >= 2**62:
            acc = _dense_int(acc)
        acc = acc * radix + col
    return _dense_int(acc)


def _dense_int(x: np.ndarray) -> np.ndarray:
    """Dense codes of int64 keys: a hash table for large inputs, a small sort below (cheaper per call)."""
    if len(x) > 2048:
        return pd.factorize(x)[0].astype(np.int64)
    return np.unique(x, return_inverse=True)[1].reshape(-1).astype(np.int64)


def segment_sizes(seg: np.ndarray) -> np.ndarray:
    """Per-row size of the row's segment."""
    return np.bincount(seg)[seg]


def segment_norm(
    x: np.ndarray, seg: np.ndarray, *, scale: str = "std", epsilon: float = 1e-6, ddof: int = 1
) -> np.ndarray:
    """norm(x, S) per segment S: (x - mean_S) / (std_S + eps) for scale="std", x - mean_S for "none"; |S| = 1 -> 0.

    `ddof=1` is the unbiased std (torch.std, as in verl-agent); HGPO uses the population std (ddof=0).
    Two-pass (mean, then squared deviations) for accuracy. Shapes: x, seg (n,) -> (n,) float64.
    """
    if scale not in ("std", "none"):
        raise ValueError(f"scale={scale!r} is not one of 'std', 'none'")
    x = np.asarray(x, dtype=np.float64)
    seg = np.asarray(seg, dtype=np.int64)
    counts = np.bincount(seg).astype(np.float64)
    mean = np.bincount(seg, weights=x, minlength=len(counts)) / np.maximum(counts, 1)
    centred = x - mean[seg]
    if scale == "std":
        sq = np.bincount(seg, weights=centred * centred, minlength=len(counts))
        std = np.sqrt(sq / np.maximum(counts - ddof, 1))
        den = std[seg] + epsilon
        centred = np.divide(centred, den, out=np.zeros_like(centred), where=den > 0)
    return np.where(counts[seg] > 1, centred, 0.0)


def segment_norm_keep_single(x: np.ndarray, seg: np.ndarray, *, scale: str, epsilon: float) -> np.ndarray:
    """verl-agent's episode normalisation (`episode_norm_reward`): `segment_norm` with the unbiased std, except that a
    segment with one member keeps its value as if its mean were 0 and its std 1 (x / (1 + eps) with scale "std").
    x: float64 (n,), seg: int64 (n,)."""
    raw = x / (1.0 + epsilon) if scale == "std" else x
    return np.where(segment_sizes(seg) == 1, raw, segment_norm(x, seg, scale=scale, epsilon=epsilon))


def similarity_clusters(texts: Sequence[str], scorer, thresh: float) -> np.ndarray:
    """Greedy clusters of `texts` (in their order), as verl-agent's `build_step_group(enable_similarity=True)` and
    GraphGPO's `StateCanonicalizer` form them: a text joins the first cluster whose representative (its first text)
    scores `scorer.score([(text, representative)]) >= thresh`, else it founds a new cluster. Returns the cluster per
    position, int64 0..K-1 in order of founding. Each distinct text is scored once, in one `score` call against every
    representative so far; a repeated text joins its first occurrence's cluster (difflib and rapidfuzz score identical
    texts 1, so verl-agent's row-by-row loop puts it there too)."""
    if not 0 < thresh <= 1:
        raise ValueError(f"similarity_thresh={thresh} must be in (0, 1]")
    texts = [str(t) for t in texts]
    codes = factorize(texts)  # dense, in order of first appearance
    cluster_of: list[int] = []  # per code
    reps: list[str] = []
    for pos in np.unique(codes, return_index=True)[1]:  # each distinct text's first position, in order
        hits = np.flatnonzero(scorer.score([(texts[pos], rep) for rep in reps]) >= thresh) if reps else ()
        cluster_of.append(int(hits[0]) if len(hits) else len(reps))
        if not len(hits):
            reps.append(texts[pos])
    return np.array(cluster_of)[codes]


def next_row_in_trajectory(traj_id: np.ndarray) -> np.ndarray:
    """Index of the next row of the same trajectory, or -1 for a trajectory's last row."""
    n = len(traj_id)
    nxt = np.arange(1, n + 1)
    last = np.r_[traj_id[1:] != traj_id[:-1], True]
    nxt[last] = -1
    return nxt


def trajectory_first_rows(traj_id: np.ndarray) -> np.ndarray:
    """Row indices where a trajectory starts (one per trajectory, in row order)."""
    return np.flatnonzero(np.r_[True, traj_id[1:] != traj_id[:-1]])


def discounted_returns(reward: np.ndarray, traj_id: np.ndarray, step: np.ndarray, gamma: float) -> np.ndarray:
    """G_t = sum_k gamma^k r_{t+k} within each trajectory (GiGPO Eq. 5), computed backwards like verl-agent's loop.

    Vectorised over trajectories: one pass per step position (T_max passes), never per row.
    """
    reward = np.asarray(reward, dtype=np.float64)
    out = reward.copy()
    nxt = next_row_in_trajectory(np.asarray(traj_id))
    has_next = nxt >= 0
    order = np.argsort(-np.asarray(step), kind="stable")
    steps_desc = np.asarray(step)[order]
    cuts = np.flatnonzero(np.diff(steps_desc)) + 1
    for rows in np.split(order, cuts):
        rows = rows[has_next[rows]]
        out[rows] += gamma * out[nxt[rows]]
    return out


def invalid_penalty(valid: np.ndarray, lambda_invalid: float) -> np.ndarray:
    """pen_t = lambda_invalid * 1[not valid_t] (subtracted after discounting: it never leaks to earlier steps)."""
    return lambda_invalid * (~np.asarray(valid, dtype=bool)).astype(np.float64)


def shifted_codes(codes: np.ndarray, step: np.ndarray, lag: int) -> np.ndarray:
    """codes[r - lag] when the row has at least `lag` earlier steps in its trajectory, else -1 (before the start)."""
    out = np.full(len(codes), -1, dtype=np.int64)
    if lag == 0:
        return np.asarray(codes, dtype=np.int64).copy()
    ok = np.asarray(step) >= lag
    out[ok] = np.asarray(codes)[np.flatnonzero(ok) - lag]
    return out
