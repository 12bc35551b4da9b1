"""The semantic-inconsistency metric: how often an estimator gives opposite-sign credit to near-identical steps.

Two steps of the same group (same task, same seed) are *near-identical* when the similarity of their step texts
(observation + action, by default) is >= `threshold` (report.similarity_thresh, 0.9). For an estimator with per-step
advantages A, the inconsistency rate is

    rate = #{pairs (p, q) near-identical : A_p * A_q < 0} / #{near-identical pairs}

(a zero advantage is neither sign, so it never counts as opposite). Trajectory-level credit (GRPO) gives the same
state-action opposite signs whenever it occurs in a won and a lost sibling; step-level estimators should lower the rate.
The rate is also split by the outcomes of the pair's two trajectories (`PAIR_KINDS`: both won, both failed, one of each),
which tells an estimator that reconciles won and failed siblings from one that splits failed siblings apart.
This is the quantity SCPO's name refers to (algorithms.md, SCPO); the precise definition here is ours.
"""

from __future__ import annotations

from typing import Callable, Literal, Mapping

import numpy as np
import pandas as pd

from scpo.rollout_types import RolloutBatch

__all__ = ["StepText", "PAIR_KINDS", "step_texts", "lexical_similarity", "near_identical_pairs", "pair_kinds",
           "opposite_sign_rate", "inconsistency_by_method"]

StepText = Literal["obs_action", "action", "action_next_obs"]
SimilarityFn = Callable[[list[str]], np.ndarray]
PAIR_KINDS = ("won_won", "failed_failed", "won_failed")


def step_texts(batch: RolloutBatch, kind: StepText = "obs_action") -> np.ndarray:
    """Per-row text that defines 'the same step': observation + ' || ' + action (default), the action alone, or
    action + ' -> ' + next observation (SCPO's step text)."""
    if kind == "obs_action":
        parts = (batch.observation, " || ", batch.action)
    elif kind == "action":
        parts = (batch.action,)
    elif kind == "action_next_obs":
        parts = (batch.action, " -> ", batch.next_observation)
    else:
        raise ValueError(f"step text kind {kind!r} is unknown; allowed: obs_action, action, action_next_obs")
    columns = np.broadcast_arrays(*[np.asarray(p, dtype=object) for p in parts])
    out = np.empty(batch.n_rows, dtype=object)
    out[:] = ["".join(map(str, cols)) for cols in zip(*columns)]
    return out


def lexical_similarity(texts: list[str]) -> np.ndarray:
    """(k, k) normalised Indel similarity in [0, 1] (rapidfuzz `fuzz.ratio` / 100; 1.0 iff the texts are equal)."""
    from rapidfuzz import fuzz, process

    return process.cdist(texts, texts, scorer=fuzz.ratio, dtype=np.float32, workers=1) / 100.0


def near_identical_pairs(group_id: np.ndarray, texts: np.ndarray, threshold: float,
                         similarity: SimilarityFn = lexical_similarity) -> pd.DataFrame:
    """Every pair of rows (row_a < row_b) of one group whose texts have similarity >= `threshold`.

    Similarities are computed once per distinct text of a group (equal texts -> 1.0 without calling `similarity`).
    Returns a DataFrame with int64 columns row_a, row_b and float column similarity (sorted by row_a, row_b).
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold = {threshold!r} must be in (0, 1]")
    group_id = np.asarray(group_id)
    texts = np.asarray(texts, dtype=object)
    if len(group_id) != len(texts):
        raise ValueError(f"group_id has {len(group_id)} rows but texts has {len(texts)}")
    found_a, found_b, found_s = [], [], []
    for g in np.unique(group_id):
        rows = np.flatnonzero(group_id == g)
        if len(rows) < 2:
            continue
        uniq, inverse = np.unique(texts[rows].astype(str), return_inverse=True)
        sim_u = similarity(list(uniq)) if len(uniq) > 1 else np.ones((1, 1))
        sim_u = np.asarray(sim_u, dtype=np.float64)
        np.fill_diagonal(sim_u, 1.0)
        sim = sim_u[inverse][:, inverse]
        a, b = np.nonzero(np.triu(sim >= threshold, k=1))
        found_a.append(rows[a])
        found_b.append(rows[b])
        found_s.append(sim[a, b])
    if not found_a:
        return pd.DataFrame({"row_a": np.empty(0, np.int64), "row_b": np.empty(0, np.int64), "similarity": np.empty(0)})
    return pd.DataFrame({"row_a": np.concatenate(found_a).astype(np.int64),
                         "row_b": np.concatenate(found_b).astype(np.int64),
                         "similarity": np.concatenate(found_s)}).sort_values(["row_a", "row_b"], ignore_index=True)


def pair_kinds(won: np.ndarray, pairs: pd.DataFrame) -> np.ndarray:
    """Per pair, the outcomes of its two steps' trajectories: 'won_won', 'failed_failed' or 'won_failed'."""
    won = np.asarray(won, dtype=bool)
    a, b = won[pairs["row_a"].to_numpy()], won[pairs["row_b"].to_numpy()]
    return np.where(a & b, "won_won", np.where(~a & ~b, "failed_failed", "won_failed")).astype(object)


def opposite_sign_rate(advantages: np.ndarray, pairs: pd.DataFrame) -> dict[str, float]:
    """{'n_pairs', 'n_opposite', 'rate'} for per-row `advantages` over `pairs` (rate NaN when there are no pairs)."""
    adv = np.asarray(advantages, dtype=np.float64)
    product = adv[pairs["row_a"].to_numpy()] * adv[pairs["row_b"].to_numpy()]
    n_pairs = int(len(product))
    n_opposite = int(np.count_nonzero(product < 0))
    return {"n_pairs": n_pairs, "n_opposite": n_opposite, "rate": n_opposite / n_pairs if n_pairs else float("nan")}


def inconsistency_by_method(advantages: Mapping[str, np.ndarray], pairs: pd.DataFrame,
                            kinds: np.ndarray | None = None) -> pd.DataFrame:
    """One row per estimator: method, n_pairs, n_opposite, rate (same pairs for every estimator); with `kinds` (see
    `pair_kinds`) also n_pairs_<kind> and n_opposite_<kind> for every kind of `PAIR_KINDS`."""
    rows = []
    for m, a in advantages.items():
        row = {"method": m, **opposite_sign_rate(a, pairs)}
        if kinds is not None:
            for kind in PAIR_KINDS:
                part = opposite_sign_rate(a, pairs[kinds == kind])
                row[f"n_pairs_{kind}"], row[f"n_opposite_{kind}"] = part["n_pairs"], part["n_opposite"]
        rows.append(row)
    return pd.DataFrame(rows)
