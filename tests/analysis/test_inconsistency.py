"""Semantic inconsistency, revision 2, on hand-built batches: the pairs found, the counts and rates by hand, pooling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scpo.analysis.inconsistency import (
    control_counts,
    control_pairs,
    inconsistency_counts,
    normalise_action,
    pair_counts,
    pair_kinds,
    rates,
    same_step_pairs,
    semantic_pairs,
    step_texts,
)
from scpo.batch import RolloutBatch
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
    assert same_step_pairs(b)[["row_a", "row_b"]].values.tolist() == [[0, 2]]  # row 5 is in another group
    # same observation "room a", other action: (0, 3) and (2, 3)
    assert control_pairs(b)[["row_a", "row_b"]].values.tolist() == [[0, 3], [2, 3]]


def test_same_step_pairs_of_a_cluster_are_all_pairs():
    b = RolloutBatch.from_columns(
        group_id=[0] * 4,
        traj_id=[0, 1, 2, 3],
        step=[0] * 4,
        reward=[0] * 4,
        observation=["s"] * 4,
        action=["a", "a", "a", "b"],
    )
    assert same_step_pairs(b)[["row_a", "row_b"]].values.tolist() == [[0, 1], [0, 2], [1, 2]]


class Table(CachedScorer):
    def __init__(self, table):
        super().__init__()
        self.table = table

    def _score_batch(self, left, right):
        return np.array([1.0 if a == b else self.table.get((a, b), 0.0) for a, b in zip(left, right)])


def test_semantic_pairs_use_the_scorer_in_either_direction_within_groups():
    b = _batch()
    scorer = Table({("go to desk -> desk", "take mug -> done"): 0.95})  # texts use the normalised action
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
    grpo_like = np.where(b.won, 1.0, -1.0)  # the sign of the outcome on every step
    consistent = np.array([0.5, 1.0, 0.5, -1.0, -0.2, 0.3, 0.1])
    target = np.array([9.5, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    table = inconsistency_counts({"traj": grpo_like, "step": consistent}, b, target=target)
    same = rates(table[(table["pair_set"] == "same_step")]).set_index(["estimator", "kind"])
    assert same.loc[("traj", "won_failed"), "disagreement"] == 1.0
    assert same.loc[("step", "won_failed"), "disagreement"] == 0.0
    assert np.isnan(same.loc[("step", "won_won"), "disagreement"])  # no such pair
    # control (0, 3): target 9.5 > 0; grpo-like orders it (1 > -1), consistent too (0.5 > -1); (2, 3): tie -> skipped
    assert same.loc[("traj", "all"), "n_control"] == 1 and same.loc[("step", "all"), "control_ordered"] == 1.0


def test_counts_pool_exactly_over_files():
    from scpo.analysis.inconsistency_tables import summarise_inconsistency

    b = _batch()
    target = np.zeros(b.n_rows)
    f1 = inconsistency_counts({"m": np.where(b.won, 1.0, -1.0)}, b, target=target)
    f2 = inconsistency_counts({"m": np.ones(b.n_rows)}, b, target=target)
    per_file = pd.concat([f1.assign(env="e"), f2.assign(env="e")])
    pooled = summarise_inconsistency(per_file).set_index(["pair_set", "kind"])
    # one won-vs-failed same-step pair per file: disagree in the first, agree in the second -> 1 / 2
    assert pooled.loc[("same_step", "won_failed"), "n_pairs"] == 2
    assert pooled.loc[("same_step", "won_failed"), "disagreement"] == 0.5


# ------------------------------------------------------------------ pair sets: clusters, empty results, frames
def _rows(group, obs, act, nxt=None, won=None) -> RolloutBatch:
    n = len(group)
    return RolloutBatch.from_columns(
        group_id=group,
        traj_id=list(range(n)),
        step=[0] * n,
        reward=[0] * n,
        observation=obs,
        action=act,
        next_observation=nxt or [f"n{i}" for i in range(n)],
        **({"won": won} if won is not None else {}),
    )


def _frame_ok(pairs: pd.DataFrame, expected: list[list[int]]) -> None:
    assert list(pairs.columns) == ["row_a", "row_b"]
    assert pairs.index.equals(pd.RangeIndex(len(expected)))
    assert pairs["row_a"].dtype == np.int64 and pairs["row_b"].dtype == np.int64
    assert pairs.values.tolist() == expected


def test_same_step_pairs_of_several_clusters_in_one_group():
    # clusters: rows 0-2 (s, a) of size 3, row 3 alone, rows 4-5 (u, c), rows 6-7 (v, d); same action in another
    # observation (row 8: "a" in t) is not the same step
    b = _rows([0] * 9, ["s", "s", "s", "t", "u", "u", "v", "v", "t"], ["a", "a", "A ", "b", "c", "c", "d", "d", "a"])
    _frame_ok(same_step_pairs(b), [[0, 1], [0, 2], [1, 2], [4, 5], [6, 7]])
    # control: same observation, other action: (3, 8) in t
    _frame_ok(control_pairs(b), [[3, 8]])


def test_pair_sets_without_pairs_are_empty_int_frames():
    b = _rows([0, 0, 1], ["s", "t", "s"], ["a", "a", "a"])
    _frame_ok(same_step_pairs(b), [])
    _frame_ok(control_pairs(b), [])
    _frame_ok(semantic_pairs(b, Table({})), [])
    table = inconsistency_counts({"m": np.array([1.0, -1.0, 2.0])}, b, target=np.zeros(3))
    assert table["n_pairs"].tolist() == [0, 0, 0, 0] and table["sum_abs_diff"].tolist() == [0.0] * 4


def test_semantic_pairs_threshold_is_inclusive_and_checked():
    b = _rows([0, 0], ["s", "s"], ["go", "run"], nxt=["x", "y"])
    table = Table({("go -> x", "run -> y"): 0.9})
    _frame_ok(semantic_pairs(b, table), [[0, 1]])  # default threshold 0.9: inclusive
    _frame_ok(semantic_pairs(b, table, threshold=0.91), [])
    _frame_ok(semantic_pairs(_rows([0, 0], ["s", "s"], ["go", "go"], nxt=["x", "x"]), table, threshold=1.0), [[0, 1]])
    with pytest.raises(ValueError, match="threshold = 0 must be in"):
        semantic_pairs(b, table, threshold=0)


class NoCall(Table):
    def score_matrix(self, left, right):
        assert len(left) > 1, "a group whose texts are all equal needs no scorer call"
        return super().score_matrix(left, right)


def test_semantic_pairs_per_group_with_small_groups():
    # group 0 has one row (no pair), group 1 two rows with equal texts (scored 1 without a scorer call), group 2 three
    # rows where the adjacent rows 4 and 5 are similar; nothing pairs across groups
    b = _rows([0, 1, 1, 2, 2, 2], ["s"] * 6, ["go", "go", "go", "x", "y", "z"], nxt=["o"] * 6)
    table = NoCall({("y -> o", "z -> o"): 0.95})
    _frame_ok(semantic_pairs(b, table), [[1, 2], [4, 5]])


def test_pair_kinds_accept_integer_flags():
    pairs = pd.DataFrame({"row_a": [0, 0, 2], "row_b": [1, 2, 3]})
    assert pair_kinds(np.array([1, 1, 0, 0]), pairs).tolist() == ["won_won", "won_failed", "failed_failed"]


def test_pair_counts_with_constant_small_and_unsigned_advantages():
    pairs = pd.DataFrame({"row_a": [0], "row_b": [1]})
    assert pair_counts(np.array([2.0, 2.0]), pairs)["sum_abs_diff"] == 0.0  # constant: std 0 -> 0
    small = pair_counts(np.array([0.1, -0.1]), pairs)  # std 0.1 < 1 still divides
    assert small["sum_abs_diff"] == pytest.approx(0.2 / 0.1)
    assert (small["n_nonzero"], small["n_disagree"], small["n_zero"]) == (1, 1, 0)
    unsigned = pair_counts(np.array([1, 3], dtype=np.uint8), pairs)  # |1 - 3| = 2, not 254
    assert unsigned["sum_abs_diff"] == pytest.approx(2 / 1.0)
    target = np.array([1, 3], dtype=np.uint8)  # 1 - 3 < 0, not 254
    assert control_counts(np.array([0.0, 1.0]), pairs, target) == {"n_control": 1, "n_ordered": 1}
    assert control_counts(np.array([1, 3], dtype=np.uint8), pairs, np.array([0.0, 1.0])) == {
        "n_control": 1,
        "n_ordered": 1,
    }


def test_inconsistency_counts_rows_per_pair_set_and_kind():
    b = _batch()
    semantic = semantic_pairs(b, Table({("go to desk -> desk", "take mug -> done"): 0.95}))
    adv = np.array([0.5, 1.0, -0.5, -1.0, -0.2, 0.3, 0.1])
    table = inconsistency_counts({"m": adv}, b, target=np.array([9.5, 10, 0, 0, 0, 0, 0]), semantic=semantic)
    table = table.set_index(["pair_set", "kind"])
    kinds = ("all", "won_won", "failed_failed", "won_failed")
    assert table.index.tolist() == [(s, k) for s in ("same_step", "semantic") for k in kinds]
    # same step: one pair (0, 2), won vs failed, opposite signs; semantic: (0, 2) and (1, 3), both won vs failed
    assert table.loc[("same_step", "all"), "n_pairs"] == 1 and table.loc[("same_step", "won_failed"), "n_disagree"] == 1
    assert table.loc[("semantic", "all"), "n_pairs"] == 2 and table.loc[("semantic", "won_failed"), "n_disagree"] == 2
    assert table.loc[("semantic", "won_won"), "n_pairs"] == 0
    # the control pairs are counted once, on the same-step 'all' row: (0, 3) ordered like the target, (2, 3) a tie
    assert table.loc[("same_step", "all"), "n_control"] == 1 and table.loc[("same_step", "all"), "n_ordered"] == 1
    others = table.drop(index=[("same_step", "all")])
    assert others["n_control"].isna().all() and others["n_ordered"].isna().all()


def test_step_texts_action_only():
    assert step_texts(_batch(), "action").tolist()[:3] == ["open drawer 1", "take mug", "Open  drawer 1 "]


def test_semantic_pairs_of_single_row_groups_and_groups_out_of_row_order():
    # every group has one row: no pair, an empty int frame
    _frame_ok(semantic_pairs(_rows([0, 1, 2], ["s"] * 3, ["go"] * 3, nxt=["o"] * 3), NoCall({})), [])
    # group 1's rows come first in the batch: the pairs are still sorted by row, with a fresh index
    b = _rows([1, 1, 0, 0], ["s"] * 4, ["go", "go", "run", "run"], nxt=["o"] * 4)
    _frame_ok(semantic_pairs(b, NoCall({})), [[0, 1], [2, 3]])


# ------------------------------------------------------------------ over the saved iterations of runs, in workers
def test_counts_over_runs_in_worker_processes_equal_one_process_in_file_order(tmp_path, repo_root):
    from scpo.analysis.inconsistency_tables import inconsistency_over_runs
    from scpo.config import load_config
    from scpo.credit.synthetic import synthetic_batch

    for k, method in enumerate(("grpo", "gigpo")):
        for it in range(3):  # each file its own batch, so a file counted out of order shows
            batch = synthetic_batch(n_groups=3, group_size=4, max_steps=8, n_states=4, seed=10 * k + it)
            batch.to_parquet(tmp_path / "alfworld" / method / "seed0" / "rollouts" / f"iter_{it:04d}.parquet")
    overrides = {
        "train.out_dir": str(tmp_path),
        "report.envs": ["alfworld"],
        "report.methods": ["grpo", "gigpo"],
        "report.seeds": [0],
        "report.similarity_scorer": "lexical",
    }
    frames = {
        n: inconsistency_over_runs(load_config(repo_root / "params.yaml", overrides={**overrides, "report.workers": n}))
        for n in (1, 2)
    }
    pd.testing.assert_frame_equal(frames[1], frames[2])
    assert frames[1][["run_method", "iteration"]].drop_duplicates().values.tolist() == [
        [m, i] for m in ("grpo", "gigpo") for i in range(3)
    ]
    per_file = frames[1].groupby(["run_method", "iteration"])["n_pairs"].sum()
    assert per_file.nunique() > 1  # the files differ, so the order is tested
