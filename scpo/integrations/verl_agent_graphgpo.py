"""verl-agent's recipe/GraphGPO (`core_graph.py`) as its trainer calls it, on scpo's GraphGPO (docs/algorithms.md,
"GraphGPO"); `scpo.integrations.verl_agent` re-exports every name here.

    Gs = ComplexGraph.from_data(batch, enable_similarity=..., similarity_thresh=...)
    ComplexGraph.Calculate_all_shortest_path(Gs)
    step_rewards = compute_graph_path_returns(batch=batch, Gs=Gs, gamma=..., normalize_distance=...)
    # the trainer subtracts the invalid penalty from step_rewards
    advantages, returns = compute_graphgpo_outcome_advantage(token_level_rewards=..., step_rewards=..., ...)

`from_data` reads `non_tensor_batch` "uid", "anchor_obs" and "next_obs" ("success" as the next_obs of a successful
trajectory's last step, as the recipe's rollout loop writes it) and returns {uid: ComplexGraph}, each graph with what
the recipe's own `compute_graph_path_returns` reads: `canonicalizer.canonicalize(state)` (the state's node: its
hashable key, or with the similarity option the key of its node's first state), `shortest_path_to_final` (None until
`Calculate_all_shortest_path`, then (distances, None): every node's hop distance to "success", unreachable nodes at the
group's largest finite distance + 1; the recipe's second element, the paths, is not built and its returns never read
it), and `final_state`, `first_state`, `nodes`, `distances`. The graphs hold no edge lists: the recipe's path and
plotting helpers (`neighbors`, `edges`, `all_simple_paths`, `shortest_path`, golden states,
`visualize_complex_graph_hierarchical`) are not provided.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from scpo.credit.graphgpo import (
    GOAL,
    GraphGPOOptions,
    exact_nodes,
    graphgpo_advantage,
    hop_distances,
    path_returns,
    similarity_nodes,
)
from scpo.credit.grouping import combine_codes, factorize
from scpo.credit.options import NormOptions
from scpo.integrations.verl_rows import as_float64, broadcast, mode_scale, row_keys
from scpo.scorers.sequence_matcher import sequence_ratio

__all__ = [
    "NodeCanonicalizer",
    "ComplexGraph",
    "compute_graph_path_returns",
    "compute_graphgpo_outcome_advantage",
]

_GRAPHGPO = GraphGPOOptions()
_EPS = NormOptions().epsilon


class NodeCanonicalizer:
    """A state's node key in one uid's graph (the recipe's `StateCanonicalizer.canonicalize`): without similarity the
    state's own hashable key; with it, the key of the first state of the node it joined. A state not met before joins
    the first node whose first state's text scores `SequenceMatcher(None, str(state), first).ratio() >= threshold`,
    else it founds a node. `canonical`: state key -> node key of the states met; `first_texts`: node key -> its first
    state's text, in order of founding."""

    def __init__(self, enable: bool, threshold: float, canonical: dict, first_texts: dict) -> None:
        self.enable, self.threshold = enable, threshold
        self._canonical, self._first_texts = dict(canonical), dict(first_texts)

    def canonicalize(self, state):
        key = row_keys([state])[0]
        if not self.enable:
            return key
        if key not in self._canonical:
            text = str(state)
            hits = [n for n, first in self._first_texts.items() if sequence_ratio(text, first) >= self.threshold]
            if not hits:
                self._first_texts[key] = text
            self._canonical[key] = hits[0] if hits else key
        return self._canonical[key]


class ComplexGraph:
    """One uid's graph as the recipe's trainer uses it (see the module docstring): `distances` (node key -> hops to
    "success"), `nodes`, `canonicalizer`, `final_state` (the node of "success"), `first_state` (None without
    traj_uid), and `shortest_path_to_final` once `calculate_path` ran."""

    def __init__(self, distances: dict, canonicalizer: NodeCanonicalizer, first_state=None) -> None:
        self.distances = distances
        self.nodes = set(distances)
        self.canonicalizer = canonicalizer
        self.final_state = canonicalizer.canonicalize(GOAL)
        self.first_state = first_state
        self.shortest_path_to_final: tuple[dict, None] | None = None

    def calculate_path(self) -> None:
        """Publish the hop distances as the recipe's `shortest_path_to_final`: (distances, None)."""
        self.shortest_path_to_final = (dict(self.distances), None)

    @staticmethod
    def Calculate_all_shortest_path(Gs: dict) -> None:
        """`calculate_path()` of every graph in `Gs`."""
        for graph in Gs.values():
            graph.calculate_path()

    @classmethod
    def from_data(cls, data, enable_similarity: bool = False, similarity_thresh: float = _GRAPHGPO.similarity_thresh):
        """{uid: ComplexGraph} of the batch's groups (see the module docstring): nodes met in the recipe's order (per
        row its anchor_obs, then its next_obs; "success" last), hop distances by `scpo.credit.graphgpo`."""
        nt = data.non_tensor_batch
        uid = np.asarray(nt["uid"])
        group = factorize(row_keys(uid))
        keys = (row_keys(nt["anchor_obs"]), row_keys(nt["next_obs"]))
        texts = tuple(np.array([str(o) for o in nt[k]]) for k in ("anchor_obs", "next_obs"))
        if enable_similarity:  # the recipe compares the texts: str() of what is not a string
            state_node, next_node, goal = similarity_nodes(group, *texts, similarity_thresh)
        else:
            state_node, next_node, goal = exact_nodes(group, *keys)
        d_state, d_next = hop_distances(state_node, next_node, goal, group)
        first_rows = np.unique(factorize(row_keys(nt["traj_uid"])), return_index=True)[1] if "traj_uid" in nt else []
        graphs: dict = {}
        for g in range(int(group.max()) + 1):
            rows = np.flatnonzero(group == g)
            met = []  # (key, text, node, distance) of each state in the order the recipe meets them
            for r in rows:
                met.append((keys[0][r], texts[0][r], state_node[r], d_state[r]))
                met.append((keys[1][r], texts[1][r], next_node[r], d_next[r]))
            met.append((GOAL, GOAL, goal[g], 0.0))  # "success" comes last (with similarity it may join a node)
            starts = [keys[0][r] for r in first_rows if group[r] == g]
            graphs[uid[rows[0]]] = cls._of_group(met, starts, enable_similarity, similarity_thresh)
        return graphs

    @classmethod
    def _of_group(cls, met: list, starts: list, enable_similarity: bool, similarity_thresh: float) -> ComplexGraph:
        """One group's graph from its states in the order met, (key, text, node code, distance), and the anchor keys
        its trajectories start from."""
        first_key: dict = {}  # node code -> the key of its first state
        canonical, first_texts, distances = {}, {}, {}
        for key, text, node, dist in met:
            rep = first_key.setdefault(node, key)
            canonical.setdefault(key, rep)
            first_texts.setdefault(rep, text)
            distances.setdefault(rep, float(dist))
        canonicalizer = NodeCanonicalizer(enable_similarity, similarity_thresh, canonical, first_texts)
        counts = Counter(canonical[k] for k in starts)  # the node most trajectories start from (ties: the first met)
        return cls(distances, canonicalizer, max(counts, key=counts.get) if counts else None)


def compute_graph_path_returns(
    batch, Gs, gamma: float = _GRAPHGPO.gamma, normalize_distance: bool = _GRAPHGPO.normalize_distance
):
    """The recipe's step returns per row: 10 gamma^d(next_obs), or 10 gamma^(d(next_obs) - d(anchor_obs) + 1) with
    normalize_distance, d from the graphs `Gs` of `ComplexGraph.from_data`. A float32 tensor on
    batch.batch["input_ids"]'s device (the CPU when the batch has none), like the recipe's."""
    import torch

    nt = batch.non_tensor_batch
    d_state, d_next = np.zeros(len(nt["uid"])), np.zeros(len(nt["uid"]))
    for r, (u, state, nxt) in enumerate(zip(nt["uid"], nt["anchor_obs"], nt["next_obs"])):
        graph = Gs[u]
        d_state[r] = graph.distances[graph.canonicalizer.canonicalize(state)]
        d_next[r] = graph.distances[graph.canonicalizer.canonicalize(nxt)]
    returns = path_returns(
        d_state, d_next, gamma=gamma, goal_value=_GRAPHGPO.goal_value, normalize_distance=normalize_distance
    )
    tensors = getattr(batch, "batch", {})
    where = {"device": tensors["input_ids"].device} if "input_ids" in tensors else {}
    return torch.as_tensor(returns, dtype=torch.float32, **where)


def compute_graphgpo_outcome_advantage(
    token_level_rewards,
    step_rewards,
    response_mask,
    anchor_obs,
    index,
    traj_index,
    epsilon: float = _EPS,
    step_advantage_w: float = _GRAPHGPO.step_advantage_w,
    episode_advantage_w: float = _GRAPHGPO.episode_advantage_w,
    mode: str = "mean_std_norm",
):
    """GraphGPO with the recipe's signature: A = step_advantage_w A^S + episode_advantage_w A^E, with
    A^S = norm(step_rewards, rows of the uid with the identical anchor_obs) (a one-row group gives 0) and A^E = verl's
    episode term of token_level_rewards.sum(-1) (a one-row uid keeps its score); both with the unbiased std,
    "mean_norm" without it. `step_rewards` are `compute_graph_path_returns`' with the invalid penalty subtracted (the
    trainer does that). Returns (advantages, advantages), (rows, response_len), masked."""
    scale = mode_scale(mode)
    group = factorize(row_keys(index))
    anchor = combine_codes(group, factorize(row_keys(anchor_obs)))
    adv, _, _ = graphgpo_advantage(
        as_float64(step_rewards),
        as_float64(token_level_rewards).sum(1),
        anchor,
        group,
        scale=scale,
        epsilon=epsilon,
        step_w=step_advantage_w,
        episode_w=episode_advantage_w,
    )
    out = broadcast(adv, response_mask, token_level_rewards)
    return out, out
