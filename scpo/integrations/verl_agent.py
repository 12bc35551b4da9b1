"""verl-agent drop-in: scpo's estimators behind verl-agent's GiGPO advantage signature (no verl import needed).

verl-agent (https://github.com/langfengQ/verl-agent) calls, in `verl/trainer/ppo/ray_trainer.py::compute_advantage`,

    advantages, returns = core_gigpo.compute_gigpo_outcome_advantage(
        token_level_rewards=data.batch["token_level_rewards"], step_rewards=data.batch["step_rewards"],
        response_mask=data.batch["response_mask"], anchor_obs=data.non_tensor_batch["anchor_obs"],
        index=data.non_tensor_batch["uid"], traj_index=data.non_tensor_batch["traj_uid"], ...)

Rows are steps; `index` is the group uid, `traj_index` the trajectory uid; rows of one trajectory appear in step order
(they may interleave with other trajectories). Conventions reproduced from verl-agent's `core_gigpo.py`:
episode scores are `token_level_rewards.sum(-1)` (R_i minus the invalid penalty verl puts on the last token), their
mean/std are taken over every step row of the group with the unbiased std; a one-row episode group keeps its raw score
(mean 0, std 1); a one-row anchor group gets 0; mode "mean_norm" omits the std, "mean_std_norm" divides by std + eps;
the result is broadcast over the response and multiplied by `response_mask`. `step_rewards` are verl's discounted step
returns with the penalty already subtracted. Returns (advantages, returns), both (rows, response_len), like verl-agent.

G2PO and HGPO keep their public trainers' signatures, so either file can be swapped in:
- G2PO (Nala-YN/G2PO): `step_rewards, group_idx, next_group_idx = compute_group_aggregation_values(batch)` (reads
  non_tensor_batch "episode_rewards", "anchor_obs", "traj_uid", "uid"), then
  `compute_g2po_outcome_advantage(token_level_rewards=..., step_rewards=..., response_mask=..., index=...,
  traj_index=..., group_idx=..., next_group_idx=..., is_action_valid=non_tensor_batch["is_action_valid"],
  step_advantage_w=..., mode=...)`.
- HGPO: `compute_hgpo_outcome_advantage(step_rewards=..., response_mask=..., anchor_obs=..., index=..., traj_index=...,
  types=..., history_length=..., epsilon=..., weight_type=..., mode=...)`.
SCPO has no public code; its drop-in takes GiGPO's arguments plus the step texts and a scorer.

verl-agent's own recipes and verl's RLOO keep their trainers' calls too:
- GraphGPO (recipe/GraphGPO): `Gs = ComplexGraph.from_data(batch, enable_similarity=..., similarity_thresh=...)`,
  `ComplexGraph.Calculate_all_shortest_path(Gs)`, `step_rewards = compute_graph_path_returns(batch=..., Gs=Gs,
  gamma=..., normalize_distance=...)` (reads non_tensor_batch "uid", "anchor_obs", "next_obs", with "success" as the
  next_obs of a successful trajectory's last step, as the recipe's rollout loop writes it), then, after the invalid
  penalty, `compute_graphgpo_outcome_advantage(token_level_rewards=..., step_rewards=..., response_mask=...,
  anchor_obs=..., index=..., traj_index=..., step_advantage_w=..., episode_advantage_w=..., mode=...)`.
- RLOO (verl's core_algos): `compute_rloo_outcome_advantage(token_level_rewards=..., response_mask=..., index=...,
  traj_index=...)`.
- HGPO as verl-agent's recipe/hgpo calls it: `compute_hgpo_recipe_outcome_advantage(token_level_rewards=...,
  step_rewards=..., response_mask=..., anchor_obs=..., index=..., traj_index=..., history_length=..., mode=...,
  length_weight_alpha=..., base_group=...)`; the recipe's module names it `compute_hgpo_outcome_advantage`, so import
  it under that name to swap it in.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scpo.batch import RolloutBatch
from scpo.credit.g2po import G2POOptions, node_values
from scpo.credit.gigpo import GiGPOOptions, similarity_anchor_groups
from scpo.credit.graphgpo import GraphGPOOptions, graph_distances, graphgpo_advantage, path_returns
from scpo.credit.grouping import combine_codes, discounted_returns, factorize, segment_norm
from scpo.credit.grpo import episode_statistics
from scpo.credit.hgpo import HGPOOptions, hgpo_step_advantage
from scpo.credit.options import CreditOptions, NormOptions
from scpo.credit.rloo import leave_one_out
from scpo.credit.scpo import SCPOOptions, match_failures, returns_bonus

__all__ = [
    "compute_gigpo_outcome_advantage",
    "compute_scpo_outcome_advantage",
    "compute_g2po_outcome_advantage",
    "compute_hgpo_outcome_advantage",
    "compute_group_aggregation_values",
    "episode_norm_reward",
    "ComplexGraph",
    "compute_graph_path_returns",
    "compute_graphgpo_outcome_advantage",
    "compute_rloo_outcome_advantage",
    "compute_hgpo_recipe_outcome_advantage",
    "recipe_base_term",
]

_MODES = {"mean_norm": "none", "mean_std_norm": "std"}
_EPS = NormOptions().epsilon
_GIGPO = GiGPOOptions()
_R_SUCCESS = CreditOptions().success_reward
_SCPO = SCPOOptions()
_GRAPHGPO = GraphGPOOptions()


def _scale(mode: str) -> str:
    try:
        return _MODES[mode]
    except KeyError:
        raise ValueError(f"Unknown mode: {mode!r}; verl-agent modes are 'mean_norm', 'mean_std_norm'") from None


def _np(x: Any) -> np.ndarray:
    """A torch tensor or array-like as a float64 numpy array (detached, on CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _keys(values: Any) -> np.ndarray:
    """Hashable per-row keys (verl's anchor_obs may hold strings, numbers, arrays, lists or dicts)."""

    def key(v: Any):
        if isinstance(v, np.ndarray):
            return (v.shape, v.tobytes())
        if isinstance(v, (list, tuple)):
            return tuple(key(e) for e in v)
        if isinstance(v, dict):
            return tuple(sorted((k, key(e)) for k, e in v.items()))
        return v.item() if isinstance(v, np.generic) else v

    out = np.empty(len(values), dtype=object)
    out[:] = [key(v) for v in values]
    return out


def _broadcast(per_row: np.ndarray, response_mask: Any, like: Any):
    """(rows,) -> (rows, response_len) tensor multiplied by the mask, with `like`'s dtype and device when `like` is a
    tensor, else float32 on the CPU (a numpy `like` has a numpy dtype, which torch cannot take)."""
    import torch

    adv = torch.as_tensor(per_row, dtype=torch.float64).unsqueeze(-1) * torch.as_tensor(response_mask).double().cpu()
    tensor = isinstance(like, torch.Tensor)
    return adv.to(dtype=like.dtype if tensor else torch.float32, device=like.device if tensor else "cpu")


def episode_norm_reward(scores: np.ndarray, index: np.ndarray, *, scale: str, epsilon: float) -> np.ndarray:
    """verl-agent's episode term per row: norm over the group's rows, but a one-row group keeps its raw score."""
    group = factorize(_keys(index))
    out = segment_norm(scores, group, scale=scale, epsilon=epsilon)
    single = np.bincount(group)[group] == 1
    raw = scores / (1.0 + epsilon) if scale == "std" else scores
    return np.where(single, raw, out)


class _Rows:
    """verl rows regrouped as a contiguous, step-ordered RolloutBatch (and the permutation back)."""

    def __init__(self, index, traj_index, *, observation=None, texts=None, won=None, valid=None, reward=None) -> None:
        traj = factorize(_keys(traj_index))
        self.order = np.argsort(traj, kind="stable")  # contiguous trajectories, verl's step order kept
        t = traj[self.order]
        starts = np.r_[True, t[1:] != t[:-1]]
        step = np.arange(len(t)) - np.maximum.accumulate(np.where(starts, np.arange(len(t)), 0))
        n = len(t)
        cols = dict(  # noqa: C408 - keyword form: tests/mutation/equivalent.toml records this call's mutants
            group_id=factorize(_keys(index))[self.order],
            traj_id=t,
            step=step,
            reward=np.zeros(n) if reward is None else np.asarray(reward, dtype=np.float64)[self.order],
        )
        if observation is not None:
            cols["observation"] = [str(o) for o in np.asarray(observation, dtype=object)[self.order]]
        if texts is not None:
            cols["action"] = [str(o) for o in np.asarray(texts, dtype=object)[self.order]]
        if won is not None:
            cols["won"] = np.asarray(won, dtype=bool)[self.order]
        if valid is not None:
            cols["valid"] = np.asarray(valid, dtype=bool)[self.order]
        self.batch = RolloutBatch.from_columns(**cols)

    def back(self, per_row: np.ndarray) -> np.ndarray:
        out = np.empty_like(per_row)
        out[self.order] = per_row
        return out


def _trajectory_won(scores: np.ndarray, traj_index: Any, won: Any) -> np.ndarray:
    if won is not None:
        return np.asarray(won, dtype=bool)
    traj = factorize(_keys(traj_index))
    return (np.bincount(traj, weights=(scores > 0).astype(float)) > 0)[traj]


def compute_gigpo_outcome_advantage(
    token_level_rewards,
    step_rewards,
    response_mask,
    anchor_obs,
    index,
    traj_index,
    epsilon: float = _EPS,
    step_advantage_w: float = _GIGPO.step_advantage_w,
    mode: str = "mean_norm",
    enable_similarity: bool = _GIGPO.enable_similarity,
    similarity_thresh: float = _GIGPO.similarity_thresh,
    *,
    scorer=None,
):
    """GiGPO with verl-agent's signature and numbers: A = A^E + step_advantage_w * A^S (GiGPO Eq. 3, 6-8).

    `enable_similarity` merges anchor observations scoring >= similarity_thresh under `scorer` (default: lexical,
    rapidfuzz's Indel ratio, close to but not the same as verl-agent's difflib ratio).
    """
    scale = _scale(mode)
    ep = episode_norm_reward(_np(token_level_rewards).sum(-1), index, scale=scale, epsilon=epsilon)
    group = factorize(_keys(index))
    if enable_similarity:
        from scpo.scorers import make_scorer

        anchor = similarity_anchor_groups(
            group,
            np.asarray([str(o) for o in anchor_obs], dtype=object),
            scorer or make_scorer("lexical"),
            similarity_thresh,
        )
    else:
        anchor = combine_codes(group, factorize(_keys(anchor_obs)))
    step = segment_norm(_np(step_rewards).reshape(-1), anchor, scale=scale, epsilon=epsilon)
    adv = _broadcast(ep + step_advantage_w * step, response_mask, token_level_rewards)
    return adv, adv


def compute_scpo_outcome_advantage(
    token_level_rewards,
    step_rewards,
    response_mask,
    anchor_obs,
    index,
    traj_index,
    step_texts,
    scorer,
    epsilon: float = _EPS,
    step_advantage_w: float = _GIGPO.step_advantage_w,
    mode: str = "mean_norm",
    enable_similarity: bool = _GIGPO.enable_similarity,
    similarity_thresh: float = _GIGPO.similarity_thresh,
    *,
    won=None,
    episode_rewards=None,
    scpo_mode: str = _SCPO.mode,
    match: str = _SCPO.match,
    gamma: float = _GIGPO.gamma,
    tau: float = _SCPO.tau,
    kappa: float = _SCPO.kappa,
    kappa_r: float = _SCPO.kappa_r,
    success_reward: float = _R_SUCCESS,
    reference: str = _SCPO.reference,
    seed: int = _SCPO.seed,
):
    """SCPO inside verl-agent: GiGPO's advantages (this module's drop-in), then SCPO's credit on the credited failed
    steps of mixed groups (docs/algorithms.md, "SCPO"). `mode` names verl's normalisation; `scpo_mode` is SCPO's:

      "advantage" (revision 2): A' = A + kappa s_t (A^E_ref - A^E_i), with A^E verl's episode term: the gap is
                  (R_ref - R_i) / (std + eps) for mode "mean_std_norm" (std: unbiased, over the group's rows of
                  token_level_rewards.sum(-1), as verl's episode term uses it) and R_ref - R_i for "mean_norm";
      "returns"   (revision 1): step returns of failed trajectories become step_rewards + sum_k gamma^k b_{t+k}.

    step_texts: per-row text of the step (e.g. action + " -> " + next observation); won: per-row success flag (default:
    the trajectory has a row whose episode score is > 0); episode_rewards: per-row R_i without invalid penalties
    (verl's non_tensor_batch["episode_rewards"]; default success_reward * won). Rows of successes and of groups without
    both outcomes keep GiGPO's advantages exactly.
    """
    scale = _scale(mode)
    scores = _np(token_level_rewards).sum(-1)
    won_row = _trajectory_won(scores, traj_index, won)
    r_row = success_reward * won_row if episode_rewards is None else _np(episode_rewards).reshape(-1)
    rows = _Rows(index, traj_index, texts=step_texts, won=won_row, reward=r_row)
    b = rows.batch
    opts = SCPOOptions(
        mode=scpo_mode, match=match, tau=tau, kappa=kappa, kappa_r=kappa_r, reference=reference, seed=seed
    )
    r_traj = r_row[rows.order]  # R_i per row, in batch order
    group = b.group_id
    _, std, _ = episode_statistics(scores[rows.order], np.zeros(b.n_rows), group, b.traj_id, stats_over="steps")
    factor = 1.0 / (std[group] + epsilon) if scale == "std" else np.ones(b.n_rows)

    def weight(fails, refs, credited, advance, ref_len):
        if scpo_mode == "returns":
            bonus = returns_bonus(credited, advance, ref_len, kappa_r=kappa_r, r_success=success_reward)
            return np.array([math.fsum(row) for row in bonus])
        return kappa * (r_traj[refs] - r_traj[fails]) * factor[fails] * np.array([math.fsum(r) for r in credited])

    m = match_failures(b, b.action, scorer, opts, credit_weight=weight)
    base, _ = compute_gigpo_outcome_advantage(
        token_level_rewards,
        step_rewards,
        response_mask,
        anchor_obs,
        index,
        traj_index,
        epsilon,
        step_advantage_w,
        mode,
        enable_similarity,
        similarity_thresh,
        scorer=scorer,
    )
    import torch

    has_ref = m["ref_first"] >= 0
    if scpo_mode == "advantage":
        gap = np.where(has_ref, (r_traj[np.maximum(m["ref_first"], 0)] - r_traj) * factor, 0.0)
        extra = torch.as_tensor(rows.back(kappa * m["credited"] * gap), dtype=torch.float64).unsqueeze(-1)
        mask = torch.as_tensor(response_mask).double().cpu()
        return _same_as(base.double() + extra * mask, base), _same_as(base.double() + extra * mask, base)
    r_len = np.where(has_ref, b.traj_len[np.maximum(m["ref_first"], 0)], 1)
    bonus = kappa_r * success_reward * m["advance"] / r_len * m["credited"]
    extra_returns = rows.back(discounted_returns(bonus, b.traj_id, b.step, gamma))
    new, _ = compute_gigpo_outcome_advantage(
        token_level_rewards,
        _np(step_rewards).reshape(-1) + extra_returns,
        response_mask,
        anchor_obs,
        index,
        traj_index,
        epsilon,
        step_advantage_w,
        mode,
        enable_similarity,
        similarity_thresh,
        scorer=scorer,
    )
    shaped = torch.as_tensor(rows.back(m["shaped"]), device=base.device).unsqueeze(-1)
    adv = torch.where(shaped, new, base)
    return adv, adv


def _same_as(x, like):
    return x.to(dtype=like.dtype, device=like.device)


# --------------------------------------------------------------------------------------------------------- G2PO
def compute_group_aggregation_values(batch, *, gamma: float = _GIGPO.gamma, success_reward: float = _R_SUCCESS):
    """G2PO's per-step node values, as the public G2PO trainer computes them before `compute_g2po_outcome_advantage`.

    Reads `batch.non_tensor_batch` fields "episode_rewards" (R_i per row), "anchor_obs", "traj_uid", "uid" (verl's
    DataProto, or any object with a `non_tensor_batch` mapping). Returns (step_rewards, group_idx, next_group_idx) per
    row: V(node of the row) = mean over the node's rows of gamma^(T_i - t) R_i; group_idx = the node, numbered from 0
    within each uid in order of first appearance (trajectories in sorted uid order, then row order); next_group_idx =
    the next row's node, or -1 after a success (R_i == success_reward) and -2 after a failure.
    """
    nt = batch.non_tensor_batch
    episode_rewards = _np(nt["episode_rewards"]).reshape(-1)
    index, traj_index = np.asarray(nt["uid"]), np.asarray(nt["traj_uid"])
    obs_key = _keys(nt["anchor_obs"])
    n = len(index)
    step = np.zeros(n, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    group_idx = np.full(n, -1, dtype=np.int64)
    next_group_idx = np.ones(n, dtype=np.int64)
    first_r = np.zeros(n)
    for uid in np.unique(index):
        nodes: dict = {}
        rows_of = [np.flatnonzero(traj_index == t) for t in np.unique(traj_index[index == uid])]
        for rows in rows_of:
            step[rows], length[rows], first_r[rows] = np.arange(len(rows)), len(rows), episode_rewards[rows[0]]
            for r in rows:
                group_idx[r] = nodes.setdefault(obs_key[r], len(nodes))
        for rows in rows_of:
            next_group_idx[rows[:-1]] = group_idx[rows[1:]]
            next_group_idx[rows[-1]] = -1 if episode_rewards[rows[-1]] == success_reward else -2
    node = combine_codes(factorize(_keys(index)), group_idx)
    return node_values(node, first_r, step, length, gamma)[node], group_idx, next_group_idx


def compute_g2po_outcome_advantage(
    token_level_rewards,
    step_rewards,
    response_mask,
    index,
    traj_index,
    group_idx,
    next_group_idx,
    is_action_valid,
    epsilon: float = _EPS,
    step_advantage_w: float = G2POOptions().w,
    mode: str = "mean_norm",
    *,
    invalid_action_penalty: float = NormOptions().lambda_invalid,
    success_value: float = G2POOptions().success_value,
):
    """G2PO with the public G2PO trainer's signature (Nala-YN/G2PO): A = A^E + w (A^NC + A^EC).

    step_rewards: per-row node values V and group_idx / next_group_idx: per-row node and next node (-1 success sentinel,
    valued `success_value`; -2 failure sentinel, valued 0), as `compute_group_aggregation_values` makes them;
    is_action_valid: per-row validity. A^E is verl's episode term; A^NC = norm(V(next) - pen_t, rows of the same node)
    (a one-row node gives 0), A^EC = norm(V(next) - V(node), rows of the uid), both with the unbiased std. Deviation:
    a uid with a single row gets A^EC = 0 where the public code divides by a NaN std.
    """
    scale = _scale(mode)
    scores = _np(token_level_rewards).sum(-1)
    value = _np(step_rewards).reshape(-1)
    prompt = factorize(_keys(index))
    group_idx, next_group_idx = np.asarray(group_idx, dtype=np.int64), np.asarray(next_group_idx, dtype=np.int64)
    both = combine_codes(np.r_[prompt, prompt], np.r_[group_idx, np.maximum(next_group_idx, 0)])
    node, next_node = both[: len(prompt)], both[len(prompt) :]
    node_value = np.zeros(int(both.max()) + 1)
    node_value[node] = value  # one value per node (the public code asserts they agree)
    v_next = np.where(next_group_idx == -1, success_value, np.where(next_group_idx == -2, 0.0, node_value[next_node]))
    pen = invalid_action_penalty * (1.0 - np.asarray(is_action_valid, dtype=np.float64))
    step = segment_norm(v_next - pen, node, scale=scale, epsilon=epsilon) + segment_norm(
        v_next - value, prompt, scale=scale, epsilon=epsilon
    )
    ep = episode_norm_reward(scores, index, scale=scale, epsilon=epsilon)
    adv = _broadcast(ep + step_advantage_w * step, response_mask, token_level_rewards)
    return adv, adv


# --------------------------------------------------------------------------------------------------------- HGPO
def compute_hgpo_outcome_advantage(
    step_rewards,
    response_mask,
    anchor_obs,
    index,
    traj_index,
    types: str = "hard",
    history_length: int = HGPOOptions().history_length,
    epsilon: float = _EPS,
    weight_type: str = "mean",
    mode: str = "mean_norm",
    *,
    alpha: float = HGPOOptions().alpha,
):
    """HGPO with the public HGPO trainer's signature: A = sum_l w_l norm(step_rewards, context cluster C_l) over
    l = 0..history_length, population std, w_l proportional to (l+1)^alpha over the depths with a non-zero term
    (docs/algorithms.md, "HGPO"). `types` and `weight_type` are accepted for the signature and, as in the public code,
    change nothing. Returns (advantages, advantages) in float32 on `response_mask`'s device, like the public code."""
    scale = _scale(mode)
    rows = _Rows(index, traj_index, observation=[str(o) for o in _keys(anchor_obs)])
    b = rows.batch
    g = _np(step_rewards).reshape(-1)[rows.order]
    adv, _ = hgpo_step_advantage(
        g, b.group_id, b.observation, b.step, history_length=history_length, alpha=alpha, scale=scale, epsilon=epsilon
    )
    import torch

    mask = torch.as_tensor(response_mask)
    out = torch.as_tensor(rows.back(adv), dtype=torch.float32, device=mask.device).unsqueeze(-1) * mask
    return out, out


# ----------------------------------------------------------------------------------------------------- GraphGPO
class ComplexGraph:
    """The two graph calls of verl-agent's GraphGPO trainer. `from_data` returns the graphs as {uid: {state key: d}}:
    every anchor_obs / next_obs key of the uid's rows mapped to its node's hop distance to "success"
    (docs/algorithms.md, "GraphGPO"); the distances are computed there, so `Calculate_all_shortest_path` has nothing
    left to do."""

    @staticmethod
    def from_data(data, enable_similarity: bool = False, similarity_thresh: float = _GRAPHGPO.similarity_thresh):
        nt = data.non_tensor_batch
        uid = np.asarray(nt["uid"])
        state, nxt = _keys(nt["anchor_obs"]), _keys(nt["next_obs"])
        if enable_similarity:  # the recipe compares the texts: str() of what is not a string
            texts = ([str(o) for o in nt["anchor_obs"]], [str(o) for o in nt["next_obs"]])
            d_state, d_next = graph_distances(factorize(_keys(uid)), *texts, similarity_thresh=similarity_thresh)
        else:
            d_state, d_next = graph_distances(factorize(_keys(uid)), state, nxt)
        graphs: dict = {}
        for r, (s_key, n_key) in enumerate(zip(state, nxt)):
            g = graphs.setdefault(uid[r], {})
            g[s_key], g[n_key] = d_state[r], d_next[r]
        return graphs

    @staticmethod
    def Calculate_all_shortest_path(Gs) -> None:
        """Kept for the trainer's call: `from_data` already holds the distances."""


def compute_graph_path_returns(
    batch, Gs, gamma: float = _GRAPHGPO.gamma, normalize_distance: bool = _GRAPHGPO.normalize_distance
):
    """The recipe's step returns per row: 10 gamma^d(next_obs), or 10 gamma^(d(next_obs) - d(anchor_obs) + 1) with
    normalize_distance, d from `ComplexGraph.from_data`'s graphs `Gs`. A float32 tensor on batch.batch["input_ids"]'s
    device (the CPU when the batch has none), like the recipe's."""
    import torch

    nt = batch.non_tensor_batch
    rows = list(zip(nt["uid"], _keys(nt["anchor_obs"]), _keys(nt["next_obs"])))
    d_state = np.array([Gs[u][s_key] for u, s_key, _ in rows])
    d_next = np.array([Gs[u][n_key] for u, _, n_key in rows])
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
    "mean_norm" without it.
    `step_rewards` are `compute_graph_path_returns`' with the invalid penalty subtracted (the trainer does that).
    Returns (advantages, advantages), (rows, response_len), masked."""
    scale = _scale(mode)
    group = factorize(_keys(index))
    anchor = combine_codes(group, factorize(_keys(anchor_obs)))
    adv, _, _ = graphgpo_advantage(
        _np(step_rewards),
        _np(token_level_rewards).sum(1),
        anchor,
        group,
        scale=scale,
        epsilon=epsilon,
        step_w=step_advantage_w,
        episode_w=episode_advantage_w,
    )
    out = _broadcast(adv, response_mask, token_level_rewards)
    return out, out


# --------------------------------------------------------------------------------------------------------- RLOO
def compute_rloo_outcome_advantage(
    token_level_rewards,
    response_mask,
    index,
    traj_index,
    epsilon: float = _EPS,
    compute_mean_std_cross_steps: bool = True,
):
    """verl's RLOO with its signature: A = N / (N - 1) (s - mean) per row, s = token_level_rewards.sum(-1), N and the
    mean over the uid's rows (`compute_mean_std_cross_steps`) or over the first row of each (uid, traj_index) pair;
    N = 1 keeps s. `epsilon` is unused, as in verl. Returns (advantages, advantages), (rows, response_len), masked."""
    scores = _np(token_level_rewards).sum(1)
    group = factorize(_keys(index))
    if compute_mean_std_cross_steps:
        rows = np.arange(len(scores))
    else:
        pair = combine_codes(group, factorize(_keys(traj_index)))
        rows = np.unique(pair, return_index=True)[1]
    out = _broadcast(leave_one_out(scores, group, rows), response_mask, token_level_rewards)
    return out, out


# ------------------------------------------------------------------------------------------- HGPO (verl-agent recipe)
def recipe_base_term(episode: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The recipe's base-group term per row: the episode term broadcast over the response, masked twice (the recipe
    masks it in `trajectory_advantages`, then again), averaged over the mask (its sum clamped at 1e-8)."""
    return (episode[:, None] * mask * mask).sum(1) / np.maximum(mask.sum(1), 1e-8)


def compute_hgpo_recipe_outcome_advantage(
    token_level_rewards,
    step_rewards,
    response_mask,
    anchor_obs,
    index,
    traj_index,
    history_length: int,
    epsilon: float = _EPS,
    mode: str = "mean_std_norm",
    length_weight_alpha: float = HGPOOptions().alpha,
    base_group: bool = HGPOOptions().base_group,
):
    """HGPO as verl-agent's recipe/hgpo computes it, with that trainer's signature: A = sum over the non-zero terms of
    w a, w = (l+2)^length_weight_alpha / (sum + epsilon) over the context depths l = 0..history_length (population std),
    plus, with `base_group`, verl's episode term of token_level_rewards.sum(-1) (averaged over the row's response mask)
    as a term of weight 1 (docs/algorithms.md, "HGPO"). Returns (advantages, advantages) in float32 on
    `response_mask`'s device, like the recipe."""
    import torch

    scale = _scale(mode)
    rows = _Rows(index, traj_index, observation=[str(o) for o in _keys(anchor_obs)])
    b = rows.batch
    base = None
    if base_group:
        episode = episode_norm_reward(_np(token_level_rewards).sum(1), index, scale=scale, epsilon=epsilon)
        base = recipe_base_term(episode, _np(response_mask))[rows.order]
    adv, _ = hgpo_step_advantage(
        _np(step_rewards)[rows.order],
        b.group_id,
        b.observation,
        b.step,
        history_length=history_length,
        alpha=length_weight_alpha,
        scale=scale,
        epsilon=epsilon,
        version="verl_agent",
        base=base,
    )
    mask_t = torch.as_tensor(response_mask)
    out = torch.as_tensor(rows.back(adv), dtype=torch.float32, device=mask_t.device)[:, None] * mask_t
    return out, out
