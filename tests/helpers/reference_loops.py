"""Independent loop-based re-implementations of the public algorithms the new estimators follow, for the equivalence
tests: GraphGPO (verl-agent recipe/GraphGPO), verl's RLOO, verl-agent's recipe HGPO and the HGPO authors' code. Written
from the algorithms' descriptions in docs/algorithms.md with the public code's structure (per-uid dictionaries of
lists, a Dijkstra search with a heap on the reversed graph, per-row Python loops), in float64 and with no numpy
vectorisation, so they share no code with `scpo.credit`.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from difflib import SequenceMatcher

GOAL = "success"


def _mean(xs):
    return sum(xs) / len(xs)


def _std(xs, unbiased: bool):
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1 if unbiased else len(xs)))


def episode_norm(scores, index, eps, remove_std, one_score_per_traj=None):
    """verl-agent's episode normalisation: statistics over the rows of each index (or, given `one_score_per_traj`,
    over the first row of each (index, traj) pair); a one-member index has mean 0 and std 1."""
    members = defaultdict(list)
    seen = set()
    for i, idx in enumerate(index):
        if one_score_per_traj is not None:
            if (idx, one_score_per_traj[i]) in seen:
                continue
            seen.add((idx, one_score_per_traj[i]))
        members[idx].append(scores[i])
    out = []
    for i, idx in enumerate(index):
        vals = members[idx]
        mean, std = (0.0, 1.0) if len(vals) == 1 else (_mean(vals), _std(vals, True))
        out.append(scores[i] - mean if remove_std else (scores[i] - mean) / (std + eps))
    return out


def step_norm(values, keys, eps, remove_std):
    """GiGPO's step normalisation over rows with equal key: a one-row key has its own mean (0 after centring)."""
    members = defaultdict(list)
    for v, k in zip(values, keys):
        members[k].append(v)
    out = []
    for v, k in zip(values, keys):
        vals = members[k]
        mean = _mean(vals)
        std = 1.0 if len(vals) == 1 else _std(vals, True)
        out.append(v - mean if remove_std else (v - mean) / (std + eps))
    return out


# ------------------------------------------------------------------------------------------------------- GraphGPO
class _Canon:
    def __init__(self, enable, thresh):
        self.enable, self.thresh, self.reps, self.cache = enable, thresh, [], {}

    def __call__(self, s):
        if not self.enable:
            return s
        if s in self.cache:
            return self.cache[s]
        for rep in self.reps:
            if SequenceMatcher(None, s, rep).ratio() >= self.thresh:
                self.cache[s] = rep
                return rep
        self.reps.append(s)
        self.cache[s] = s
        return s


def graph_distances_of_uid(anchors, nexts, enable_similarity=False, thresh=0.95):
    """(distance per canonical node, canonicaliser) of one uid's graph: Dijkstra from the goal on the reversed graph,
    unreachable nodes at the largest finite distance + 1."""
    canon = _Canon(enable_similarity, thresh)
    edges = defaultdict(list)  # reversed: v -> [u]
    nodes = set()
    for a, n in zip(anchors, nexts):
        u, v = canon(a), canon(n)
        edges[v].append(u)
        nodes.update([u, v])
    goal = canon(GOAL)
    dist = dict.fromkeys(nodes, math.inf)
    dist[goal] = 0
    heap = [(0, goal)]
    while heap:
        d, node = heapq.heappop(heap)
        if d > dist[node]:
            continue
        for prev in edges[node]:
            if d + 1 < dist[prev]:
                dist[prev] = d + 1
                heapq.heappush(heap, (d + 1, prev))
    far = max([0] + [d for d in dist.values() if d != math.inf])
    return {k: (far + 1 if d == math.inf else d) for k, d in dist.items()}, canon


def graph_path_returns(uid, anchors, nexts, gamma, normalize_distance, enable_similarity=False, thresh=0.95):
    """The recipe's step return per row: 10 gamma^d(next), or 10 gamma^(d(next) - d(anchor) + 1)."""
    graphs = {}
    for u in dict.fromkeys(uid):
        rows = [i for i in range(len(uid)) if uid[i] == u]
        graphs[u] = graph_distances_of_uid(
            [anchors[i] for i in rows], [nexts[i] for i in rows], enable_similarity, thresh
        )
    out = []
    for i in range(len(uid)):
        dist, canon = graphs[uid[i]]
        d_new, d_old = dist[canon(nexts[i])], dist[canon(anchors[i])]
        out.append(10 * gamma ** (d_new - d_old + 1) if normalize_distance else 10 * gamma ** (d_new + 1 - 1))
    return out


def graphgpo_advantage(scores, step_rewards, anchors, uid, eps=1e-6, step_w=1.0, episode_w=1.0, remove_std=False):
    """The recipe's A = step_w * step_norm(step_rewards, (uid, anchor)) + episode_w * episode_norm(scores, uid)."""
    step = step_norm(step_rewards, list(zip(uid, anchors)), eps, remove_std)
    if episode_w == 0:
        return [step_w * s for s in step]
    ep = episode_norm(scores, uid, eps, remove_std)
    return [step_w * s + episode_w * e for s, e in zip(step, ep)]


# ----------------------------------------------------------------------------------------------------------- RLOO
def rloo(scores, index, traj_index, cross_steps=True):
    """verl's RLOO: s * N/(N-1) - mean * N/(N-1) per row, N and mean over the index's rows or first rows per traj."""
    members = defaultdict(list)
    seen = set()
    for i in range(len(scores)):
        if (index[i], traj_index[i]) in seen:
            continue
        members[index[i]].append(scores[i])
        if not cross_steps:
            seen.add((index[i], traj_index[i]))
    out = []
    for i in range(len(scores)):
        n = len(members[index[i]])
        mean = 0.0 if n == 1 else _mean(members[index[i]])
        out.append(scores[i] * n / (n - 1) - mean * n / (n - 1) if n > 1 else scores[i])
    return out


# ------------------------------------------------------------------------------------------- HGPO, verl-agent recipe
def hgpo_recipe(
    scores,
    step_rewards,
    anchors,
    index,
    traj_index,
    history_length,
    eps=1e-6,
    mode="mean_std_norm",
    alpha=1.0,
    base_group=False,
    mask_sums=None,
):
    """verl-agent's recipe HGPO: per uid, clusters keyed by (k, last k observations), k = 1..history_length + 1,
    population std; per step the non-zero items (k, a) weighted (k + 1)^alpha / (sum + eps), plus the base item
    (0, episode term) when base_group. `mask_sums`: per row, the response mask's sum (0: the base term is 0)."""
    base = None
    if base_group:
        ep = episode_norm(scores, index, eps, mode == "mean_norm")
        base = [e if (mask_sums is None or mask_sums[i] > 0) else 0.0 for i, e in enumerate(ep)]
    out = [0.0] * len(scores)
    for g in dict.fromkeys(index):
        rows = [i for i in range(len(index)) if index[i] == g]
        trajs = defaultdict(list)
        for i in rows:
            trajs[traj_index[i]].append(i)
        clusters = defaultdict(list)
        for t_rows in trajs.values():
            for si in range(len(t_rows)):
                for k in range(1, min(history_length + 1, si + 1) + 1):
                    key = (k, tuple(anchors[r] for r in t_rows[si - k + 1 : si + 1]))
                    clusters[key].append(t_rows[si])
        items = defaultdict(list)
        for (k, _), members in clusters.items():
            if len(members) <= 1:
                continue
            r = [step_rewards[i] for i in members]
            m, sd = _mean(r), _std(r, False)
            for i, x in zip(members, r):
                items[i].append((k, (x - m) / (sd + eps) if mode == "mean_std_norm" else x - m))
        for i in rows:
            its = ([(0, base[i])] if base is not None else []) + items[i]
            its = [(k, a) for k, a in its if a != 0]
            if its:
                w = [(k + 1) ** alpha for k, _ in its]
                total = sum(w) + eps
                out[i] = sum(wi / total * a for wi, (_, a) in zip(w, its))
    return out


# ----------------------------------------------------------------------------------------- HGPO, the authors' code
def hgpo_authors(step_rewards, anchor_obs, index, traj_index, history_length, remove_std, alpha=1.0, eps=1e-6):
    """HGPO as its public code describes it, in loops: within a uid, its trajectories (traj_index within the uid),
    clusters of the same observation (one row -> 0); inside each, for l = 0..K, sub-clusters by the l previous
    observations (steps with t < l left out), kept when larger than one; population-std scores; weights
    (l + 1)^alpha over the non-zero scores."""
    out = [0.0] * len(index)
    for uid in dict.fromkeys(index):
        rows = [r for r in range(len(index)) if index[r] == uid]
        trajs = defaultdict(list)
        for r in rows:
            trajs[traj_index[r]].append(r)
        pos = {r: (t, k) for t, rs in trajs.items() for k, r in enumerate(rs)}
        by_obs = defaultdict(list)
        for r in rows:
            by_obs[anchor_obs[r]].append(r)
        for members in by_obs.values():
            if len(members) < 2:
                continue
            scores = defaultdict(list)
            for depth in range(history_length + 1):
                clusters = defaultdict(list)
                for r in members:
                    t, k = pos[r]
                    if k >= depth:
                        clusters[tuple(anchor_obs[q] for q in trajs[t][k - depth : k])].append(r)
                for rs in clusters.values():
                    if len(rs) < 2:
                        continue
                    v = [step_rewards[r] for r in rs]
                    m, sd = _mean(v), _std(v, False)
                    for r, x in zip(rs, v):
                        scores[r].append((depth + 1, x - m if remove_std else (x - m) / (sd + eps)))
            for r, pairs in scores.items():
                kept = [(ln**alpha, a) for ln, a in pairs if a != 0]
                out[r] = sum(w * a for w, a in kept) / sum(w for w, _ in kept) if kept else 0.0
    return out
