"""GraphGPO: step credit from hop distances on a graph of the group's states, as verl-agent's recipe/GraphGPO computes
it (`core_graph.py`: `ComplexGraph`, `compute_graph_path_returns`, `compute_graphgpo_outcome_advantage`).
Spec: docs/algorithms.md, "GraphGPO".

Per group g (one graph per group, nodes are exact state strings):

    s_t        = the step's state: its `state_description` when the batch has that column (ALFWorld: the observation
                 with location, items in hand, moved items and sorted admissible commands; WebShop: the page), else o_t
    s_{t+1}    = the next state, or the node "success" after the last step of a trajectory whose summed reward is > 0
    edges      : s_t -> s_{t+1}, one per step row, weight 1
    d(s)       = hops from s to "success" (reversed-graph BFS); unreachable: D_max + 1, D_max the group's largest
                 finite distance; a group with no success: d = 1 everywhere
    R_t        = goal_value gamma^d(s_{t+1});  normalize_distance: goal_value gamma^(d(s_{t+1}) - d(s_t) + 1)
    A^S_{i,t}  = norm(R_t - pen_t, steps of g with the identical s_t), sample std, a one-step group -> 0
    A^E_{i,t}  = norm(R_i - pen_t, step rows of g), sample std, a one-row group keeps R_i - pen_t (verl's convention)
    A_{i,t}    = w_s A^S + w_e A^E

goal_value = 10, gamma = 0.1 (ALFWorld) / 0.2 (WebShop), w_s = w_e = 1, norm with std on every environment (the
recipe's scripts). Env rewards enter only through the success test and the episode term. The similarity option merges
graph nodes greedily (difflib ratio against each node's first text, in order of appearance), so it alone depends on the
order of the rows; step groups always use exact states.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from scpo.batch import RolloutBatch
from scpo.credit.grouping import (
    combine_codes,
    factorize,
    invalid_penalty,
    next_row_in_trajectory,
    segment_norm,
    segment_norm_keep_single,
    segment_sizes,
    similarity_clusters,
)
from scpo.credit.grpo import group_stats
from scpo.credit.options import CreditOptions, Scale, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method
from scpo.scorers.sequence_matcher import SequenceMatcherScorer

__all__ = [
    "GraphGPOOptions",
    "GOAL",
    "state_keys",
    "exact_nodes",
    "similarity_nodes",
    "hop_distances",
    "graph_distances",
    "path_returns",
    "graphgpo_advantage",
    "compute_graphgpo",
]


class GraphGPOOptions(StrictModel):
    """GraphGPO as verl-agent's recipe/GraphGPO computes it (docs/algorithms.md, "GraphGPO")."""

    gamma: float = Field(
        0.1,
        gt=0,
        le=1,
        description="discount of R_t = goal_value gamma^d for environments not in gamma_by_env (the recipe's "
        "config default)",
    )
    gamma_by_env: dict[str, float] = Field(
        default_factory=lambda: {"alfworld": 0.1, "webshop": 0.2},
        description="gamma per environment, as the recipe's run scripts set it (`for_env(name)`)",
    )
    scale: Scale = Field(
        "std",
        description="norm of both terms: the recipe's scripts use mean_std_norm on every environment (GiGPO's use "
        "mean_norm on WebShop), so GraphGPO reads this, not norm.scale",
    )
    goal_value: float = Field(10.0, gt=0, description="the constant of R_t = goal_value gamma^d(s_{t+1})")
    normalize_distance: bool = Field(
        False, description="R_t = goal_value gamma^(d(s_{t+1}) - d(s_t) + 1) instead of goal_value gamma^d(s_{t+1})"
    )
    step_advantage_w: float = Field(1.0, ge=0, description="w_s in A = w_s A^S + w_e A^E")
    episode_advantage_w: float = Field(1.0, ge=0, description="w_e in A = w_s A^S + w_e A^E")
    enable_similarity: bool = Field(
        False,
        description="merge graph nodes whose difflib ratio to a node's first text is >= similarity_thresh (greedy, "
        "in order of appearance; step groups stay exact)",
    )
    similarity_thresh: float = Field(0.95, gt=0, lt=1)

    @field_validator("gamma_by_env")
    @classmethod
    def _gammas_in_range(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: g for k, g in v.items() if not 0 < g <= 1}
        if bad:
            raise ValueError(f"every gamma must be in (0, 1], got {bad}")
        return v

    def for_env(self, env: str | None) -> GraphGPOOptions:
        """These options with `gamma` from `gamma_by_env[env]` (an unlisted environment keeps `gamma`)."""
        gamma = self.gamma_by_env.get(env, self.gamma) if env else self.gamma
        return self if gamma == self.gamma else self.model_copy(update={"gamma": gamma})


GOAL = "success"  # the goal node's name, as the recipe's rollout loop writes it into next_obs


def state_keys(batch: RolloutBatch) -> tuple[np.ndarray, np.ndarray]:
    """(s_t, s_{t+1}) per row (object arrays of strings): the state descriptions when the batch carries them, else the
    raw observations; s_{t+1} is GOAL after the last row of a trajectory with episode return > 0."""
    state, nxt = batch.state_description, batch.next_state_description
    if (state is None) != (nxt is None):
        raise ValueError(
            "the batch has one of state_description / next_state_description without the other: GraphGPO needs both "
            "or neither (then it uses observation / next_observation)"
        )
    if state is None:
        state, nxt = batch.observation, batch.next_observation
    nxt = nxt.copy()
    nxt[(next_row_in_trajectory(batch.traj_id) == -1) & (batch.episode_return > 0)] = GOAL
    return state, nxt


def exact_nodes(group_id: np.ndarray, state: np.ndarray, nxt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense node codes of (group, exact text) for s_t and s_{t+1} (object arrays), and the goal node (the text GOAL)
    of each group in `np.unique(group_id)` order: in a group without success a node that no step reaches."""
    n = len(group_id)
    groups = np.unique(group_id)
    texts = np.concatenate([state, nxt, np.full(len(groups), GOAL, dtype=object)])
    node = combine_codes(np.r_[group_id, group_id, groups], factorize(texts))
    return node[:n], node[n : 2 * n], node[2 * n :]


def similarity_nodes(
    group_id: np.ndarray, state: np.ndarray, nxt: np.ndarray, thresh: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Like `exact_nodes` (one goal node per group), but texts join the first earlier node whose first text has a
    difflib ratio `SequenceMatcher(None, text, first).ratio() >= thresh` (the recipe's `StateCanonicalizer`, by
    `grouping.similarity_clusters` with the difflib scorer GiGPO's similarity uses): per group, in the order s_t,
    s_{t+1} of the first row, then of the next row, ...; GOAL comes last and may join a node like any text (or be a
    node of its own that no step reaches)."""
    n = len(group_id)
    scorer = SequenceMatcherScorer()
    state_node, next_node = np.zeros_like(group_id), np.zeros_like(group_id)  # node codes within the row's group
    groups = np.unique(group_id)
    goal = np.zeros_like(groups)
    for k, g in enumerate(groups):
        rows = np.flatnonzero(group_id == g)
        texts = [str(t) for pair in zip(state[rows], nxt[rows]) for t in pair] + [GOAL]
        local = similarity_clusters(texts, scorer, thresh)
        pairs = local[:-1].reshape(-1, 2)  # (s_t, s_{t+1}) of each row
        state_node[rows], next_node[rows], goal[k] = pairs[:, 0], pairs[:, 1], local[-1]
    node = combine_codes(np.r_[group_id, group_id, groups], np.r_[state_node, next_node, goal])
    return node[:n], node[n : 2 * n], node[2 * n :]


def hop_distances(
    state_node: np.ndarray, next_node: np.ndarray, goal: np.ndarray, row_group: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(d(s_t), d(s_{t+1})) per row (float): the fewest edges s_t -> s_{t+1} from the node to a goal node of its group
    (breadth-first from every goal at once on the reversed edges, one pass per distance level); nodes that cannot
    reach one get D_max + 1, D_max the largest finite distance in the row's group (0 when only the goal is reached or
    the group has no goal: then every node gets 1). Node codes are dense; `row_group` is each row's group."""
    n_nodes = np.unique(np.r_[state_node, next_node, goal]).size
    dist = np.full(n_nodes, np.inf)
    frontier = np.unique(goal)
    dist[frontier] = 0.0
    while frontier.size:
        level = dist[frontier].max() + 1
        in_frontier = np.zeros(n_nodes, dtype=bool)
        in_frontier[frontier] = True
        pred = np.unique(state_node[in_frontier[next_node]])
        frontier = pred[np.isinf(dist[pred])]
        dist[frontier] = level
    d_state, d_next = dist[state_node], dist[next_node]
    finite = np.fmax(np.where(np.isinf(d_state), 0.0, d_state), np.where(np.isinf(d_next), 0.0, d_next))
    unreachable = pd.Series(finite).groupby(row_group).transform("max").to_numpy() + 1
    return np.where(np.isinf(d_state), unreachable, d_state), np.where(np.isinf(d_next), unreachable, d_next)


def path_returns(
    d_state: np.ndarray, d_next: np.ndarray, *, gamma: float, goal_value: float, normalize_distance: bool
) -> np.ndarray:
    """R_t = goal_value gamma^d(s_{t+1}), or goal_value gamma^(d(s_{t+1}) - d(s_t) + 1) with normalize_distance."""
    exponent = d_next - d_state + 1 if normalize_distance else d_next
    return goal_value * np.power(gamma, exponent)


def graphgpo_advantage(
    step_score: np.ndarray,
    episode_score: np.ndarray,
    anchor: np.ndarray,
    group: np.ndarray,
    *,
    scale: str,
    epsilon: float,
    step_w: float,
    episode_w: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, A^S, A^E): A^S = norm(step_score, anchor), A^E = verl's episode norm of episode_score over the group's rows
    (a one-row group keeps its score), A = step_w A^S + episode_w A^E. Scores already include the penalty."""
    step_adv = segment_norm(step_score, anchor, scale=scale, epsilon=epsilon)
    episode_adv = segment_norm_keep_single(episode_score, group, scale=scale, epsilon=epsilon)
    return step_w * step_adv + episode_w * episode_adv, step_adv, episode_adv


def graph_distances(
    group_id: np.ndarray, state: np.ndarray, nxt: np.ndarray, *, similarity_thresh: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(d(s_t), d(s_{t+1})) per row on each group's graph (`exact_nodes`, or `similarity_nodes` when
    `similarity_thresh` is given), by `hop_distances`."""
    if similarity_thresh is None:
        state_node, next_node, goal = exact_nodes(group_id, state, nxt)
    else:
        state_node, next_node, goal = similarity_nodes(group_id, state, nxt, similarity_thresh)
    return hop_distances(state_node, next_node, goal, group_id)


@credit_method("graphgpo", GraphGPOOptions, state_description=True)
def compute_graphgpo(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """GraphGPO on `batch`; diagnostics add "graph_distance" (d(s_{t+1})) and "graph_distance_from" (d(s_t))."""
    opts, norm = cfg.graphgpo, cfg.norm
    state, nxt = state_keys(batch)
    thresh = opts.similarity_thresh if opts.enable_similarity else None
    d_state, d_next = graph_distances(batch.group_id, state, nxt, similarity_thresh=thresh)
    returns = path_returns(
        d_state, d_next, gamma=opts.gamma, goal_value=opts.goal_value, normalize_distance=opts.normalize_distance
    )
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    anchor = combine_codes(batch.group_id, factorize(state))
    adv, step_adv, episode_adv = graphgpo_advantage(
        returns - pen,
        batch.episode_return - pen,
        anchor,
        batch.group_id,
        scale=opts.scale,
        epsilon=norm.epsilon,
        step_w=opts.step_advantage_w,
        episode_w=opts.episode_advantage_w,
    )
    sizes = segment_sizes(anchor)
    diag = {
        "episode_adv": episode_adv,
        "step_adv": step_adv,
        "anchor_group_size": sizes,
        "graph_distance": d_next,
        "graph_distance_from": d_state,
    }
    stats = {
        **group_stats(batch),
        "frac_singleton_anchor_steps": float(np.mean(sizes == 1)),
        "mean_graph_distance": float(np.mean(d_next)),
    }
    return CreditResult("graphgpo", adv, returns, diag, stats)
