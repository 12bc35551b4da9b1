"""Scorers: lexical values by hand, the pair cache, the offline bi-encoder, a tiny local cross-encoder, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.scorers import ScorerError, make_scorer


def test_lexical_scores_by_hand():
    s = make_scorer("lexical")
    # Indel ratio: abcd vs abce -> 1 - 2 / 8 ; identical -> 1 ; disjoint -> 0
    np.testing.assert_allclose(
        s.score([("abcd", "abce"), ("go to desk 1", "go to desk 1"), ("ab", "cd")]), [0.75, 1.0, 0.0]
    )
    np.testing.assert_allclose(s.score_matrix(["abcd", "ab"], ["abce", "ab"]), [[0.75, 2 / 3], [2 / 3, 1.0]])


def test_pair_cache_counts_hits_and_is_symmetric_for_lexical():
    s = make_scorer("lexical")
    s.score([("a b", "a c"), ("x", "y")])
    assert s.stats["pairs_scored"] == 2 and s.stats["cache_hits"] == 0
    out = s.score([("a c", "a b"), ("x", "y"), ("x", "y")])  # reversed pair hits the symmetric cache
    assert s.stats["pairs_scored"] == 2 and s.stats["cache_hits"] == 3
    assert s.stats["cache_hit_rate"] == pytest.approx(3 / 5)
    assert out[1] == out[2]


def test_make_scorer_errors():
    with pytest.raises(KeyError, match="unknown scorer 'bm25'.*lexical, bi_encoder, cross_encoder"):
        make_scorer("bm25")
    with pytest.raises(ValueError, match="takes no model"):
        make_scorer("lexical", model="x")
    with pytest.raises(ScorerError, match="needs model="):
        make_scorer("cross_encoder")


def test_missing_model_folder_is_a_clear_error(tmp_path):
    for name in ("bi_encoder", "cross_encoder"):
        with pytest.raises(ScorerError, match=f"model folder '{tmp_path / 'nope'}' does not exist"):
            make_scorer(name, model=str(tmp_path / "nope"))


@pytest.fixture(scope="module")
def minilm():
    return make_scorer("bi_encoder")


def test_bi_encoder_default_model_loads_offline_and_ranks_paraphrases_higher(minilm):
    scores = minilm.score(
        [
            ("go to the desk", "walk over to the desk"),
            ("go to the desk", "the fridge is closed"),
            ("take the mug", "take the mug"),
        ]
    )
    assert np.all((scores >= 0) & (scores <= 1))
    assert scores[0] > scores[1] and scores[2] == pytest.approx(1.0, abs=1e-6)
    assert minilm.stats["texts_encoded"] == 4  # distinct texts, each encoded once
    minilm.score([("take the mug", "take the mug")])
    assert minilm.stats["cache_hits"] == 1 and minilm.stats["texts_encoded"] == 4
    mat = minilm.score_matrix(["go to the desk"], ["walk over to the desk", "the fridge is closed"])
    np.testing.assert_allclose(mat[0], scores[:2], atol=1e-6)


def test_cross_encoder_from_a_local_tiny_model(tmp_path):
    from scpo.scorers.tiny import build_tiny_cross_encoder

    path = build_tiny_cross_encoder(tmp_path / "ce", ["go to desk 1", "open the drawer", "the drawer is open ->"])
    s = make_scorer("cross_encoder", model=str(path), batch_size=2)
    pairs = [("go to desk 1", "go to desk 1"), ("open the drawer", "go to desk 1"), ("go to desk 1", "open the drawer")]
    scores = s.score(pairs)
    assert scores.shape == (3,) and np.all((scores > 0) & (scores < 1))
    assert len(np.unique(scores)) == 3  # order matters: the cross-encoder is not symmetric
    assert s.stats["pairs_scored"] == 3 and s.stats["batches"] == 2
    np.testing.assert_array_equal(s.score(pairs[:1]), scores[:1])
    assert s.stats["cache_hits"] == 1
    # the same scorer drives SCPO
    from scpo.batch import RolloutBatch
    from scpo.credit import compute_advantages

    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0],
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0, 10, 0, 0],
        action=["go to desk 1", "open the drawer", "go to desk 1", "open the drawer"],
    )
    res = compute_advantages("scpo", b, scorer=s, tau=0.0)
    credit, score = res.diagnostics["scpo_credit"][2:], res.diagnostics["scpo_score"][2:]
    gap = res.diagnostics["scpo_gap"][2:]
    assert score[0] > 0 and credit[0] > 0  # tau 0: the first failed step is always credited
    np.testing.assert_allclose(credit, score * gap)
    assert res.stats["scpo_cache_hits"] + res.stats["scpo_pairs_scored"] > 0
