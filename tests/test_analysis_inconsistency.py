"""The semantic-inconsistency metric on hand-built batches: pairs found, opposite signs counted, rates by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scpo.analysis.inconsistency import (inconsistency_by_method, lexical_similarity, near_identical_pairs,
                                         opposite_sign_rate, step_texts)
from scpo.rollout_types import RolloutBatch


def _batch() -> RolloutBatch:
    # group 0: traj 0 (won) and traj 1 (lost) both take "open drawer 1" in "room a"; group 1 has the same text once.
    return RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 1, 1],
        traj_id=[0, 0, 1, 1, 2, 2],
        step=[0, 1, 0, 1, 0, 1],
        reward=[0, 10, 0, 0, 0, 0],
        observation=["room a", "room b", "room a", "room c", "room a", "room d"],
        action=["open drawer 1", "take mug", "open drawer 1", "go to desk", "open drawer 1", "look"],
    )


def test_step_texts_kinds():
    b = _batch()
    assert step_texts(b)[0] == "room a || open drawer 1"
    assert step_texts(b, "action")[1] == "take mug"
    assert step_texts(b, "action_next_obs")[0] == "open drawer 1 -> "
    with pytest.raises(ValueError, match="'nope'"):
        step_texts(b, "nope")


def test_pairs_stay_inside_a_group_and_respect_the_threshold():
    b = _batch()
    pairs = near_identical_pairs(b.group_id, step_texts(b), threshold=1.0)
    # only rows 0 and 2 are identical inside group 0; row 4 is identical text but in group 1
    assert pairs[["row_a", "row_b"]].values.tolist() == [[0, 2]]
    assert pairs["similarity"].tolist() == [1.0]


def test_lower_threshold_adds_similar_pairs():
    texts = np.array(["go to desk 1", "go to desk 2", "take the red apple from the fridge"], dtype=object)
    sim = lexical_similarity(list(texts))
    assert sim[0, 1] == pytest.approx(1 - 2 / 24)       # Indel distance 2 over 24 characters
    pairs = near_identical_pairs(np.zeros(3, int), texts, threshold=0.9)
    assert pairs[["row_a", "row_b"]].values.tolist() == [[0, 1]]


def test_custom_similarity_is_called_on_distinct_texts_only():
    calls = []

    def similarity(texts):
        calls.append(list(texts))
        return np.eye(len(texts))

    near_identical_pairs(np.zeros(4, int), np.array(["a", "b", "a", "b"], dtype=object), 0.5, similarity)
    assert calls == [["a", "b"]]


def test_opposite_sign_rate_by_hand():
    pairs = pd.DataFrame({"row_a": [0, 0, 1], "row_b": [1, 2, 2]})
    adv = np.array([1.0, -2.0, 0.0])
    # (0,1): 1 * -2 < 0 opposite; (0,2), (1,2): zero is neither sign
    assert opposite_sign_rate(adv, pairs) == {"n_pairs": 3, "n_opposite": 1, "rate": pytest.approx(1 / 3)}


def test_no_pairs_gives_nan_rate():
    empty = near_identical_pairs(np.array([0, 1]), np.array(["x", "x"], dtype=object), 0.9)
    assert len(empty) == 0
    assert np.isnan(opposite_sign_rate(np.array([1.0, -1.0]), empty)["rate"])


def test_trajectory_level_credit_is_inconsistent_where_step_credit_is_not():
    b = _batch()
    pairs = near_identical_pairs(b.group_id, step_texts(b), threshold=1.0)
    trajectory_level = np.where(b.won, 1.0, -1.0)                 # GRPO-like: sign of the outcome on every step
    step_level = np.array([0.5, 1.0, 0.5, -1.0, 0.0, 0.0])        # the shared step gets the same credit
    table = inconsistency_by_method({"traj": trajectory_level, "step": step_level}, pairs)
    assert table.set_index("method")["rate"].to_dict() == {"traj": 1.0, "step": 0.0}


def test_bad_threshold_is_named():
    with pytest.raises(ValueError, match="1.5"):
        near_identical_pairs(np.zeros(2, int), np.array(["a", "b"], dtype=object), 1.5)


def test_rates_split_by_the_outcomes_of_the_pair():
    from scpo.analysis.inconsistency import pair_kinds
    from scpo.analysis.inconsistency_report import summarise_inconsistency

    # rows 0, 1 from won trajectories, rows 2, 3 from failed ones; pairs of every kind
    won = np.array([True, True, False, False])
    pairs = pd.DataFrame({"row_a": [0, 0, 2, 1], "row_b": [1, 2, 3, 3]})
    kinds = pair_kinds(won, pairs)
    assert kinds.tolist() == ["won_won", "won_failed", "failed_failed", "won_failed"]
    adv = np.array([1.0, 2.0, -1.0, 0.5])  # (0,2) opposite, (2,3) opposite, (1,3) same sign, (0,1) same sign
    row = inconsistency_by_method({"m": adv}, pairs, kinds=kinds).iloc[0]
    assert (row["n_pairs_won_won"], row["n_opposite_won_won"]) == (1, 0)
    assert (row["n_pairs_won_failed"], row["n_opposite_won_failed"]) == (2, 1)
    assert (row["n_pairs_failed_failed"], row["n_opposite_failed_failed"]) == (1, 1)
    # pooled over two files: rates per kind are pooled counts, not means of rates
    per_file = pd.concat([inconsistency_by_method({"m": adv}, pairs, kinds=kinds),
                          inconsistency_by_method({"m": -np.abs(adv)}, pairs, kinds=kinds)]).rename(
        columns={"method": "estimator"}).assign(env="e")
    pooled = summarise_inconsistency(per_file).iloc[0]
    assert pooled["n_pairs"] == 8 and pooled["rate"] == pytest.approx(2 / 8)  # the second file has no opposite pair
    assert pooled["rate_won_failed"] == pytest.approx(1 / 4) and pooled["rate_failed_failed"] == pytest.approx(1 / 2)
    assert pooled["rate_won_won"] == 0.0 and pooled["n_pairs_won_failed"] == 4
