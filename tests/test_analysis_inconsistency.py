"""Semantic inconsistency, revision 2, on hand-built batches: the pairs found, the counts and rates by hand, pooling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scpo.analysis.inconsistency import (control_counts, control_pairs, inconsistency_counts, normalise_action,
                                         pair_counts, pair_kinds, rates, same_step_pairs, semantic_pairs, step_texts)
from scpo.rollout_types import RolloutBatch
from scpo.scorers.base import CachedScorer


def _batch() -> RolloutBatch:
    # group 0: traj 0 (won) and traj 1 (failed) both "open drawer 1" in "room a" (once with other spacing/case),
    # traj 1 also "go to desk" in "room a"; group 1 has the same observation and action once.
    return RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 0, 1, 1],
        traj_id=[0, 0, 1, 1, 1, 2, 2],
        step=[0, 1, 0, 1, 2, 0, 1],
        reward=[0, 10, 0, 0, 0, 0, 0],
        observation=["room a", "room b", "room a", "room a", "room c", "room a", "room d"],
        action=["open drawer 1", "take mug", "Open  drawer 1 ", "go to desk", "look", "open drawer 1", "look"],
        next_observation=["room a2", "done", "room a2", "desk", "room c", "room a2", "room d"],
    )


def test_normalise_action_and_step_texts():
    assert normalise_action("  Open   Drawer 1 ") == "open drawer 1"
    b = _batch()
    assert step_texts(b)[0] == "open drawer 1 -> room a2"
    assert step_texts(b, "obs_action")[0] == "room a || open drawer 1"
    with pytest.raises(ValueError, match="'nope'"):
        step_texts(b, "nope")


def test_same_step_pairs_need_the_same_observation_and_normalised_action_in_one_group():
    b = _batch()
    assert same_step_pairs(b)[["row_a", "row_b"]].values.tolist() == [[0, 2]]     # row 5 is in another group
    # same observation "room a", other action: (0, 3) and (2, 3)
    assert control_pairs(b)[["row_a", "row_b"]].values.tolist() == [[0, 3], [2, 3]]


def test_same_step_pairs_of_a_cluster_are_all_pairs():
    b = RolloutBatch.from_columns(group_id=[0] * 4, traj_id=[0, 1, 2, 3], step=[0] * 4, reward=[0] * 4,
                                  observation=["s"] * 4, action=["a", "a", "a", "b"])
    assert same_step_pairs(b)[["row_a", "row_b"]].values.tolist() == [[0, 1], [0, 2], [1, 2]]


class Table(CachedScorer):
    def __init__(self, table):
        super().__init__()
        self.table = table

    def _score_batch(self, left, right):
        return np.array([1.0 if a == b else self.table.get((a, b), 0.0) for a, b in zip(left, right)])


def test_semantic_pairs_use_the_scorer_in_either_direction_within_groups():
    b = _batch()
    scorer = Table({("go to desk -> desk", "take mug -> done"): 0.95})     # texts use the normalised action
    pairs = semantic_pairs(b, scorer, threshold=0.9)
    # equal texts (0, 2) score 1; (1, 3) scores 0.95 in one direction; row 5 equals row 0's text but in group 1
    assert pairs[["row_a", "row_b"]].values.tolist() == [[0, 2], [1, 3]]
    with pytest.raises(ValueError, match="1.5"):
        semantic_pairs(b, scorer, threshold=1.5)


def test_pair_counts_by_hand():
    pairs = pd.DataFrame({"row_a": [0, 0, 1, 2], "row_b": [1, 2, 2, 3]})
    adv = np.array([1.0, -2.0, 0.0, 3.0])
    c = pair_counts(adv, pairs)
    # non-zero pairs: (0,1) disagree, (2? no) ... (0,2) and (1,2) have a zero; (2,3) has a zero
    assert (c["n_pairs"], c["n_nonzero"], c["n_disagree"], c["n_zero"]) == (4, 1, 1, 3)
    std = adv.std()
    assert c["sum_abs_diff"] == pytest.approx((3 + 1 + 2 + 3) / std)
    r = rates(pd.DataFrame([c]))
    assert r["disagreement"].iloc[0] == 1.0 and r["zero_share"].iloc[0] == 0.75
    assert r["mean_abs_diff"].iloc[0] == pytest.approx(9 / 4 / std)


def test_control_counts_order_like_the_target_and_skip_ties():
    pairs = pd.DataFrame({"row_a": [0, 0, 1], "row_b": [1, 2, 2]})
    target = np.array([5.0, 1.0, 1.0])
    # (0,1): target says 0 > 1; (0,2): 0 > 2; (1,2): tie -> not informative
    assert control_counts(np.array([2.0, -1.0, 3.0]), pairs, target) == {"n_control": 2, "n_ordered": 1}
    assert control_counts(np.array([1.0, 1.0, 0.0]), pairs, target) == {"n_control": 2, "n_ordered": 1}


def test_pair_kinds_and_counts_by_kind():
    won = np.array([True, True, False, False])
    pairs = pd.DataFrame({"row_a": [0, 0, 2, 1], "row_b": [1, 2, 3, 3]})
    assert pair_kinds(won, pairs).tolist() == ["won_won", "won_failed", "failed_failed", "won_failed"]


def test_trajectory_level_credit_disagrees_where_step_credit_agrees():
    b = _batch()
    grpo_like = np.where(b.won, 1.0, -1.0)                      # the sign of the outcome on every step
    consistent = np.array([0.5, 1.0, 0.5, -1.0, -0.2, 0.3, 0.1])
    target = np.array([9.5, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    table = inconsistency_counts({"traj": grpo_like, "step": consistent}, b, target=target)
    same = rates(table[(table["pair_set"] == "same_step")]).set_index(["estimator", "kind"])
    assert same.loc[("traj", "won_failed"), "disagreement"] == 1.0
    assert same.loc[("step", "won_failed"), "disagreement"] == 0.0
    assert np.isnan(same.loc[("step", "won_won"), "disagreement"])     # no such pair
    # control (0, 3): target 9.5 > 0; grpo-like orders it (1 > -1), consistent too (0.5 > -1); (2, 3): tie -> skipped
    assert same.loc[("traj", "all"), "n_control"] == 1 and same.loc[("step", "all"), "control_ordered"] == 1.0


def test_counts_pool_exactly_over_files():
    from scpo.analysis.inconsistency_report import summarise_inconsistency

    b = _batch()
    target = np.zeros(b.n_rows)
    f1 = inconsistency_counts({"m": np.where(b.won, 1.0, -1.0)}, b, target=target)
    f2 = inconsistency_counts({"m": np.ones(b.n_rows)}, b, target=target)
    per_file = pd.concat([f1.assign(env="e"), f2.assign(env="e")])
    pooled = summarise_inconsistency(per_file).set_index(["pair_set", "kind"])
    # one won-vs-failed same-step pair per file: disagree in the first, agree in the second -> 1 / 2
    assert pooled.loc[("same_step", "won_failed"), "n_pairs"] == 2
    assert pooled.loc[("same_step", "won_failed"), "disagreement"] == 0.5
