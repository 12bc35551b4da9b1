"""Semantic credit inconsistency, revision 2: do the same steps get the same credit? Spec: docs/algorithms.md,
"Measuring credit".

Pairs (always two steps p < q of one group):
- *same step* (exact): identical raw observation and identical normalised action (`normalise_action`);
- *semantic* (a labelled variant): `action -> next_observation` texts with similarity >= threshold under a named scorer;
- *control*: identical raw observation, different normalised actions; there opposite credit is often right.

Per estimator, per pair set and per pair kind (both won / both failed / one won and one failed):
    disagreement = #{A_p A_q < 0} / #{A_p != 0 and A_q != 0}      (sign disagreement among non-zero pairs)
    zero share   = #{A_p = 0 or A_q = 0} / #pairs
    mean |dA|    = mean over pairs of |A_p - A_q| / std(A)           (std over every row of the batch)
and on control pairs whose targets differ: the share with sign(A_p - A_q) = sign(y_p - y_q), y the discounted return
(env rewards, no penalty) or, when the batch carries it, the oracle progress q. Counts (not rates) are returned so that
files pool exactly. Same-step pairs are not found by text similarity of observation + action (revision 1 of the
metric in docs/algorithms.md): the long observation dominates it ("go to countertop 1" and "go to drawer 3" from one
room score 0.98), so such pairs are mostly one state with different actions, where opposite credit is correct.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

import numpy as np
import pandas as pd

from scpo.batch import RolloutBatch

__all__ = [
    "PAIR_KINDS",
    "PAIR_SETS",
    "COUNT_COLUMNS",
    "normalise_action",
    "step_texts",
    "same_step_pairs",
    "semantic_pairs",
    "control_pairs",
    "pair_kinds",
    "pair_counts",
    "control_counts",
    "inconsistency_counts",
    "rates",
]

PAIR_KINDS = ("won_won", "failed_failed", "won_failed")
PAIR_SETS = ("same_step", "semantic")
COUNT_COLUMNS = ("n_pairs", "n_nonzero", "n_disagree", "n_zero", "sum_abs_diff")
StepText = Literal["obs_action", "action", "action_next_obs"]
_SPACES = re.compile(r"\s+")


def normalise_action(action: str) -> str:
    """The action as the environment reads it: lower case, surrounding blanks stripped, inner blanks collapsed."""
    return _SPACES.sub(" ", str(action).strip().lower())


def step_texts(batch: RolloutBatch, kind: StepText = "action_next_obs") -> np.ndarray:
    """Per-row text: action + ' -> ' + next observation (default, SCPO's), the action alone, or observation + ' || ' +
    action (revision 1's)."""
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


def _pairs_within(key: np.ndarray) -> pd.DataFrame:
    """Every pair of rows (row_a < row_b) sharing `key` (int codes), vectorised by sorting."""
    order = np.argsort(key, kind="stable")
    k = key[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    sizes = np.diff(np.r_[starts, len(k)])
    a_list, b_list = [], []
    for size in np.unique(sizes[sizes > 1]):
        i, j = np.triu_indices(int(size), k=1)
        block = starts[sizes == size][:, None]
        a_list.append(order[(block + i).ravel()])
        b_list.append(order[(block + j).ravel()])
    if not a_list:
        return pd.DataFrame({"row_a": np.empty(0, np.int64), "row_b": np.empty(0, np.int64)})
    a, b = np.concatenate(a_list), np.concatenate(b_list)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return pd.DataFrame({"row_a": lo, "row_b": hi}).sort_values(["row_a", "row_b"], ignore_index=True)


def _codes(*columns) -> np.ndarray:
    from scpo.credit.grouping import combine_codes, factorize

    return combine_codes(
        *(
            factorize(np.asarray(c, dtype=object)) if np.asarray(c).dtype == object else np.asarray(c, dtype=np.int64)
            for c in columns
        )
    )


def same_step_pairs(batch: RolloutBatch) -> pd.DataFrame:
    """Pairs of one group with the identical raw observation and the identical normalised action."""
    actions = np.array([normalise_action(a) for a in batch.action], dtype=object)
    return _pairs_within(_codes(batch.group_id, batch.observation, actions))


def control_pairs(batch: RolloutBatch) -> pd.DataFrame:
    """Pairs of one group with the identical raw observation and different normalised actions."""
    actions = np.array([normalise_action(a) for a in batch.action], dtype=object)
    same_obs = _pairs_within(_codes(batch.group_id, batch.observation))
    keep = actions[same_obs["row_a"].to_numpy()] != actions[same_obs["row_b"].to_numpy()]
    return same_obs[keep].reset_index(drop=True)


def semantic_pairs(batch: RolloutBatch, scorer, threshold: float = 0.9) -> pd.DataFrame:
    """Pairs of one group whose `normalised action -> next_observation` texts score >= threshold under `scorer` (one
    `score_matrix` call per group over its distinct texts; equal texts score 1 without a call)."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold = {threshold!r} must be in (0, 1]")
    texts = np.array(
        [f"{normalise_action(a)} -> {o}" for a, o in zip(batch.action, batch.next_observation)], dtype=object
    )
    found_a, found_b = [], []
    for g in np.unique(batch.group_id):
        rows = np.flatnonzero(batch.group_id == g)
        if len(rows) < 2:
            continue
        uniq, inverse = np.unique(texts[rows].astype(str), return_inverse=True)
        sim = np.ones((1, 1)) if len(uniq) == 1 else np.asarray(scorer.score_matrix(list(uniq), list(uniq)), float)
        sim = np.maximum(sim, sim.T)  # a pair is similar if either direction scores high
        np.fill_diagonal(sim, 1.0)
        inverse = inverse.reshape(-1)
        a, b = np.nonzero(np.triu(sim[inverse][:, inverse] >= threshold, k=1))
        found_a.append(rows[a])
        found_b.append(rows[b])
    if not found_a:
        return pd.DataFrame({"row_a": np.empty(0, np.int64), "row_b": np.empty(0, np.int64)})
    return pd.DataFrame(
        {"row_a": np.concatenate(found_a).astype(np.int64), "row_b": np.concatenate(found_b).astype(np.int64)}
    ).sort_values(["row_a", "row_b"], ignore_index=True)


def pair_kinds(won: np.ndarray, pairs: pd.DataFrame) -> np.ndarray:
    """Per pair, the outcomes of its two steps' trajectories: 'won_won', 'failed_failed' or 'won_failed'."""
    won = np.asarray(won, dtype=bool)
    a, b = won[pairs["row_a"].to_numpy()], won[pairs["row_b"].to_numpy()]
    return np.where(a & b, "won_won", np.where(~a & ~b, "failed_failed", "won_failed")).astype(object)


def pair_counts(advantages: np.ndarray, pairs: pd.DataFrame) -> dict[str, float]:
    """{n_pairs, n_nonzero, n_disagree, n_zero, sum_abs_diff} of `advantages` over `pairs` (sum_abs_diff: the sum of
    |A_p - A_q| / std(A), std over all rows; 0 when A is constant)."""
    adv = np.asarray(advantages, dtype=np.float64)
    a, b = adv[pairs["row_a"].to_numpy()], adv[pairs["row_b"].to_numpy()]
    nonzero = (a != 0) & (b != 0)
    std = adv.std()
    return {
        "n_pairs": int(len(a)),
        "n_nonzero": int(nonzero.sum()),
        "n_disagree": int(np.count_nonzero(a * b < 0)),
        "n_zero": int((~nonzero).sum()),
        "sum_abs_diff": float(np.abs(a - b).sum() / std) if std > 0 else 0.0,
    }


def control_counts(advantages: np.ndarray, pairs: pd.DataFrame, target: np.ndarray) -> dict[str, int]:
    """{n_control, n_ordered}: control pairs whose targets differ, and those among them whose advantages are ordered
    like the targets (sign(A_p - A_q) = sign(y_p - y_q); equal advantages are not ordered)."""
    adv, y = np.asarray(advantages, dtype=np.float64), np.asarray(target, dtype=np.float64)
    ra, rb = pairs["row_a"].to_numpy(), pairs["row_b"].to_numpy()
    dy, da = np.sign(y[ra] - y[rb]), np.sign(adv[ra] - adv[rb])
    informative = dy != 0
    return {"n_control": int(informative.sum()), "n_ordered": int(np.count_nonzero(informative & (da == dy)))}


def inconsistency_counts(
    advantages: Mapping[str, np.ndarray],
    batch: RolloutBatch,
    *,
    target: np.ndarray,
    semantic: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Long table of counts for one batch: one row per (estimator, pair_set, kind) with `COUNT_COLUMNS`, kind 'all'
    and each of `PAIR_KINDS`, plus, on pair_set 'same_step' kind 'all', n_control / n_ordered of the control pairs
    against `target`. `semantic`: precomputed semantic pairs (None: that pair set is left out)."""
    sets = {"same_step": same_step_pairs(batch)}
    if semantic is not None:
        sets["semantic"] = semantic
    control = control_pairs(batch)
    rows = []
    for name, adv in advantages.items():
        for pair_set, pairs in sets.items():
            kinds = pair_kinds(batch.won, pairs)
            for kind in ("all", *PAIR_KINDS):
                sub = pairs if kind == "all" else pairs[kinds == kind]
                row = {"estimator": name, "pair_set": pair_set, "kind": kind, **pair_counts(adv, sub)}
                if pair_set == "same_step" and kind == "all":
                    row.update(control_counts(adv, control, target))
                rows.append(row)
    return pd.DataFrame(rows)


def rates(counts: pd.DataFrame) -> pd.DataFrame:
    """Rates from (pooled) counts: disagreement = n_disagree / n_nonzero, zero_share = n_zero / n_pairs,
    mean_abs_diff = sum_abs_diff / n_pairs, control_ordered = n_ordered / n_control (NaN where undefined)."""
    out = counts.copy()

    def ratio(num, den):
        d = out[den].astype(float)
        return np.where(d > 0, out[num].astype(float) / d.where(d > 0, 1.0), np.nan)

    out["disagreement"] = ratio("n_disagree", "n_nonzero")
    out["zero_share"] = ratio("n_zero", "n_pairs")
    out["mean_abs_diff"] = ratio("sum_abs_diff", "n_pairs")
    if "n_control" in out:
        out["control_ordered"] = ratio("n_ordered", "n_control")
    return out
