"""The candidate answers of one prompt as a prefix tree: each distinct prefix is fed to the decoder once.

Candidate answers share their first tokens: every ALFWorld answer starts with `<action>`, and `go to cabinet 1` ...
`go to cabinet 6` share `<action> go to cabinet`. Under causal attention the hidden state at a token depends only on
the prompt and on the tokens before it, so candidates with a common prefix have the same hidden states along it. A
*node* is a distinct proper prefix `y_<=j` (j < |y| - 1) of some candidate; it is fed once, at position
`len(prompt) + j`, attending to the prompt and to its own ancestors (tree attention, as when SpecInfer or Medusa verify
a tree of drafts). The last token of a candidate (EOS) is predicted, never fed:

    s_k = log p(y_k,0 | x) + sum_{j >= 1} log p(y_k,j | x, y_k,<j)        (the node y_k,<j predicts y_k,j)

which is the sum each candidate's own forward pass would give (`scpo.policy.scoring`; tests/policy/test_scoring.py
compares them). Tries are built once per distinct candidate list and kept (`trie_of`): an ALFWorld location's
commands recur in every episode that visits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

__all__ = ["CandidateTrie", "build_trie", "trie_of"]


@dataclass(frozen=True)
class CandidateTrie:
    """Nodes in creation order (a parent before its children). Tensors are long, `ancestors` bool.

    tokens [N]: a node's last token; depth [N]: its prefix length - 1 (its position after the prompt);
    ancestors [N, N]: ancestors[i, m] when node m is node i or one of its ancestors (whom node i attends to);
    first [K]: each candidate's first token, predicted from the prompt's last position;
    pred_node, pred_token, pred_candidate [M]: every later token of every candidate, with the node predicting it.
    """

    tokens: torch.Tensor
    depth: torch.Tensor
    ancestors: torch.Tensor
    first: torch.Tensor
    pred_node: torch.Tensor
    pred_token: torch.Tensor
    pred_candidate: torch.Tensor

    @property
    def n_nodes(self) -> int:
        return len(self.tokens)

    @property
    def n_candidates(self) -> int:
        return len(self.first)


def build_trie(candidates: Sequence[Sequence[int]]) -> CandidateTrie:
    """The prefix tree of `candidates` (token id lists, each non-empty; duplicates score alike)."""
    if not candidates or any(not y for y in candidates):
        raise ValueError("a trie needs at least one candidate, and every candidate at least one token")
    node_of: dict[tuple[int, int], int] = {}  # (parent node or -1, token) -> node
    tokens: list[int] = []
    depth: list[int] = []
    parent: list[int] = []
    pred_node: list[int] = []
    pred_token: list[int] = []
    pred_candidate: list[int] = []
    for k, y in enumerate(candidates):
        at = -1
        for j, t in enumerate(y):
            if j > 0:  # token j is predicted by the node of the prefix before it
                pred_node.append(at)
                pred_token.append(int(t))
                pred_candidate.append(k)
            if j == len(y) - 1:
                break  # the last token is never fed
            key = (at, int(t))
            if key not in node_of:
                node_of[key] = len(tokens)
                tokens.append(int(t))
                depth.append(j)
                parent.append(at)
            at = node_of[key]
    n = len(tokens)
    ancestors = np.zeros((n, n), dtype=bool)
    for i, p in enumerate(parent):  # parents come first: copy the parent's row, add the node itself
        if p >= 0:
            ancestors[i] = ancestors[p]
        ancestors[i, i] = True
    as_long = lambda xs: torch.tensor(xs, dtype=torch.long)  # noqa: E731
    return CandidateTrie(
        tokens=as_long(tokens),
        depth=as_long(depth),
        ancestors=torch.from_numpy(ancestors),
        first=as_long([int(y[0]) for y in candidates]),
        pred_node=as_long(pred_node),
        pred_token=as_long(pred_token),
        pred_candidate=as_long(pred_candidate),
    )


@lru_cache(maxsize=2048)  # a tree of N nodes keeps an N x N mask: ~10 kB for an ALFWorld location
def trie_of(candidates: tuple[tuple[int, ...], ...]) -> CandidateTrie:
    """`build_trie`, kept for the next time the same candidate list comes (its tensors are never written to)."""
    return build_trie(candidates)
