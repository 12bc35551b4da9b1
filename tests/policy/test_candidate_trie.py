"""The candidate prefix tree: each distinct proper prefix one node, fed once; hand-built trees."""

from __future__ import annotations

import pytest
import torch

from scpo.policy.candidate_trie import build_trie, trie_of


def test_each_distinct_proper_prefix_is_one_node_and_last_tokens_are_never_fed():
    # 5 6 7 | 5 6 8 | 5 9 share "5" (and "5 6"); the final 2 (EOS) of each is predicted only; [3] has no node
    trie = build_trie([[5, 6, 7, 2], [5, 6, 8, 2], [5, 9, 2], [3]])
    assert trie.tokens.tolist() == [5, 6, 7, 8, 9]
    assert trie.depth.tolist() == [0, 1, 2, 2, 1]
    assert trie.ancestors.int().tolist() == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],
        [1, 1, 0, 1, 0],
        [1, 0, 0, 0, 1],
    ]
    assert trie.first.tolist() == [5, 5, 5, 3]
    assert list(zip(trie.pred_candidate.tolist(), trie.pred_node.tolist(), trie.pred_token.tolist())) == [
        (0, 0, 6),
        (0, 1, 7),
        (0, 2, 2),
        (1, 0, 6),
        (1, 1, 8),
        (1, 3, 2),
        (2, 0, 9),
        (2, 4, 2),
    ]
    assert trie.n_nodes == 5 and trie.n_candidates == 4


def test_a_token_repeated_at_another_depth_or_under_another_parent_is_another_node():
    trie = build_trie([[4, 4, 4, 2], [7, 4, 2]])
    assert trie.tokens.tolist() == [4, 4, 4, 7, 4]
    assert trie.depth.tolist() == [0, 1, 2, 0, 1]
    assert trie.ancestors[4].tolist() == [False, False, False, True, True]


def test_duplicate_candidates_share_every_node():
    trie = build_trie([[1, 2, 3], [1, 2, 3]])
    assert trie.n_nodes == 2 and trie.pred_node.tolist() == [0, 1, 0, 1]


def test_bad_candidates_are_refused_in_one_line():
    with pytest.raises(ValueError, match="at least one candidate"):
        build_trie([])
    with pytest.raises(ValueError, match="at least one token"):
        build_trie([[1], []])


def test_trie_of_keeps_one_tree_per_candidate_list():
    a = trie_of(((1, 2, 3), (1, 4, 3)))
    assert trie_of(((1, 2, 3), (1, 4, 3))) is a
    assert torch.equal(a.tokens, build_trie([[1, 2, 3], [1, 4, 3]]).tokens)
