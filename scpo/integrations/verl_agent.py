"""verl-agent drop-ins: scpo's estimators behind the advantage functions of the public trainers, with their names,
signatures and returns (no verl import needed). Spec: docs/algorithms.md (each method's section) and docs/credit.md,
"Using SCPO inside verl-agent".

verl-agent calls, in `verl/trainer/ppo/ray_trainer.py::compute_advantage`,

    advantages, returns = core_gigpo.compute_gigpo_outcome_advantage(
        token_level_rewards=data.batch["token_level_rewards"], step_rewards=data.batch["step_rewards"],
        response_mask=data.batch["response_mask"], anchor_obs=data.non_tensor_batch["anchor_obs"],
        index=data.non_tensor_batch["uid"], traj_index=data.non_tensor_batch["traj_uid"], ...)

Rows are steps; `index` is the group uid, `traj_index` the trajectory uid, and a trajectory is the pair (index,
traj_index) (`scpo.integrations.verl_rows`); rows of one trajectory appear in step order (they may interleave with
other trajectories). Conventions of verl-agent's `core_gigpo.py`: episode scores are `token_level_rewards.sum(-1)`
(R_i minus the invalid penalty verl puts on the last token), their mean/std are taken over every step row of the group
with the unbiased std; a one-row episode group keeps its raw score (mean 0, std 1); a one-row anchor group gets 0;
mode "mean_norm" omits the std, "mean_std_norm" divides by std + eps; the result is broadcast over the response and
multiplied by `response_mask`. `step_rewards` are verl's discounted step returns with the penalty already subtracted.
Parameters scpo adds come after the public ones, keyword-only.

What each public file's names are replaced by (the rest of those files is not provided):
- verl-agent `gigpo/core_gigpo.py`: `compute_gigpo_outcome_advantage`, `episode_norm_reward`, `build_step_group`,
  `step_norm_reward` (the three that recipe/GraphGPO's `core_graph.py` imports); not `compute_step_discounted_returns`
  (verl's step returns: keep verl-agent's), `to_hashable`, `are_similar`, `summarize_group_size`.
- verl-agent `recipe/GraphGPO/core_graph.py`: `ComplexGraph` (`from_data`, `Calculate_all_shortest_path`),
  `compute_graph_path_returns`, `compute_graphgpo_outcome_advantage` (from `scpo.integrations.verl_agent_graphgpo`);
  not its path, golden-state and plotting helpers.
- G2PO (Nala-YN/G2PO) `g2po/core_g2po.py`: `compute_group_aggregation_values`, `compute_g2po_outcome_advantage`
  (its `episode_norm_reward` is verl-agent's); not `compute_step_level_advantage`.
- the HGPO authors' trainer: `compute_hgpo_outcome_advantage`.
- verl-agent `recipe/hgpo`: its `compute_hgpo_outcome_advantage` is `compute_hgpo_recipe_outcome_advantage` here
  (import it under the recipe's name to swap it in).
- verl's `core_algos.py`: `compute_rloo_outcome_advantage`.
- SCPO has no public code: `compute_scpo_outcome_advantage` takes GiGPO's arguments, then the step texts (keyword).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from scpo.credit.g2po import G2POOptions, node_values
from scpo.credit.gigpo import GiGPOOptions, similarity_anchor_groups
from scpo.credit.grouping import (
    combine_codes,
    discounted_returns,
    factorize,
    invalid_penalty,
    segment_norm,
    segment_norm_keep_single,
)
from scpo.credit.grpo import episode_statistics
from scpo.credit.hgpo import HGPOOptions, hgpo_step_advantage
from scpo.credit.options import CreditOptions, NormOptions
from scpo.credit.rloo import leave_one_out
from scpo.credit.scpo import SCPOOptions, match_failures, returns_bonus
from scpo.integrations.verl_agent_graphgpo import (
    ComplexGraph,
    compute_graph_path_returns,
    compute_graphgpo_outcome_advantage,
)
from scpo.integrations.verl_rows import (
    TrajectoryRows,
    as_float64,
    broadcast,
    episode_scores,
    mode_scale,
    per_row,
    row_keys,
    trajectory_codes,
)

__all__ = [
    "compute_gigpo_outcome_advantage",
    "episode_norm_reward",
    "build_step_group",
    "step_norm_reward",
    "compute_scpo_outcome_advantage",
    "compute_g2po_outcome_advantage",
    "compute_hgpo_outcome_advantage",
    "compute_group_aggregation_values",
    "ComplexGraph",
    "compute_graph_path_returns",
    "compute_graphgpo_outcome_advantage",
    "compute_rloo_outcome_advantage",
    "compute_hgpo_recipe_outcome_advantage",
    "recipe_base_term",
]

_EPS = NormOptions().epsilon
_GIGPO = GiGPOOptions()
_R_SUCCESS = CreditOptions().success_reward
_SCPO = SCPOOptions()


@lru_cache(maxsize=4)
def _scorer(name: str):
    """The default scorer of this name, one per process (its pair cache survives across calls)."""
    from scpo.scorers import make_scorer

    return make_scorer(name)


# -------------------------------------------------------------------------------------------- GiGPO (core_gigpo.py)
def _scale_of(remove_std: bool) -> str:
    return "none" if remove_std else "std"


def _episode_term(scores: np.ndarray, index: Any, *, scale: str, epsilon: float, traj_index: Any = None) -> np.ndarray:
    """verl-agent's episode term per row, float64: norm(score, S_g) with the unbiased std, S_g every row of the group,
    or with `traj_index` (verl's compute_mean_std_cross_steps=False) the first row of each of its (index, traj_index)
    trajectories; a group whose S_g has one member has mean 0 and std 1 (its rows keep their score, divided by 1 + eps
    with the std)."""
    group = factorize(row_keys(index))
    if traj_index is None:
        return segment_norm_keep_single(scores, group, scale=scale, epsilon=epsilon)
    first = np.unique(trajectory_codes(index, traj_index), return_index=True)[1]
    counts = np.bincount(group[first])  # every group has a first row
    mean = np.bincount(group[first], weights=scores[first]) / counts
    sq = np.bincount(group[first], weights=(scores[first] - mean[group[first]]) ** 2)
    std = np.sqrt(sq / np.maximum(counts - 1, 1))
    single = counts[group] == 1
    centred = scores - np.where(single, 0.0, mean[group])
    return centred if scale == "none" else centred / (np.where(single, 1.0, std[group]) + epsilon)


def _step_groups(anchor_obs: Any, index: Any, enable_similarity: bool, similarity_thresh: float, scorer) -> np.ndarray:
    """Dense anchor-group code per row (GiGPO Eq. 6): identical anchor_obs within a group, or with `enable_similarity`
    verl-agent's greedy clusters of `scorer.score(obs, representative) >= similarity_thresh` (default scorer:
    difflib's ratio, verl-agent's `are_similar`; observations compared as str())."""
    group = factorize(row_keys(index))
    if not enable_similarity:
        return combine_codes(group, factorize(row_keys(anchor_obs)))
    if not 0.0 < similarity_thresh < 1.0:
        raise ValueError(
            f"When enabling similarity-based grouping, similarity_thresh should be in (0, 1), got {similarity_thresh}"
        )
    texts = np.array([str(o) for o in anchor_obs])
    return similarity_anchor_groups(group, texts, scorer or _scorer("difflib"), similarity_thresh)


def episode_norm_reward(
    token_level_rewards,
    response_mask,
    index,
    traj_index,
    epsilon: float = _EPS,
    remove_std: bool = True,
    compute_mean_std_cross_steps: bool = True,
):
    """verl-agent's `episode_norm_reward` (GiGPO Eq. 3): per row, norm(token_level_rewards.sum(-1)) over the rows of
    its group (`compute_mean_std_cross_steps`) or over the first row of each (index, traj_index) trajectory, unbiased
    std, a one-member group keeping its score; "remove_std" omits the std. Returns (rows, response_len) masked, in
    token_level_rewards' dtype and device."""
    per_trajectory = None if compute_mean_std_cross_steps else traj_index
    scale = _scale_of(remove_std)
    term = _episode_term(
        episode_scores(token_level_rewards), index, scale=scale, epsilon=epsilon, traj_index=per_trajectory
    )
    return broadcast(term, response_mask, token_level_rewards)


def build_step_group(
    anchor_obs,
    index,
    enable_similarity: bool = False,
    similarity_thresh: float = _GIGPO.similarity_thresh,
    summarize: bool = False,
    *,
    scorer=None,
) -> np.ndarray:
    """verl-agent's `build_step_group` (GiGPO Eq. 6): per row, the id of its anchor-state group (see `_step_groups`),
    an object array of strings. The ids are deterministic ("step-group-<k>", k in order of first appearance) where
    verl-agent draws uuid4s; `summarize` is accepted and prints nothing (nor does the average group size print)."""
    codes = _step_groups(anchor_obs, index, enable_similarity, similarity_thresh, scorer)
    return np.array([f"step-group-{k}" for k in codes], dtype=object)


def step_norm_reward(step_rewards, response_mask, index, epsilon: float = _EPS, remove_std: bool = True):
    """verl-agent's `step_norm_reward` (GiGPO Eq. 7): norm(step_rewards) over the rows with the same `index` (the step
    groups of `build_step_group`), unbiased std, a one-row group giving 0. Returns (rows, response_len) masked, in
    step_rewards' dtype and device (float32 on the CPU for a numpy input)."""
    group = factorize(row_keys(index))
    term = segment_norm(per_row(step_rewards), group, scale=_scale_of(remove_std), epsilon=epsilon)
    return broadcast(term, response_mask, step_rewards)


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
    """GiGPO with verl-agent's signature and numbers: A = A^E + step_advantage_w * A^S (GiGPO Eq. 3, 6-8), computed in
    float64, returned as (advantages, advantages) in token_level_rewards' dtype.

    `enable_similarity` merges anchor observations scoring >= similarity_thresh under `scorer` (default: difflib's
    ratio, verl-agent's; `make_scorer("lexical")` is rapidfuzz's Indel ratio, which scores long texts differing in a
    few characters much higher)."""
    scale = mode_scale(mode)
    ep = _episode_term(episode_scores(token_level_rewards), index, scale=scale, epsilon=epsilon)
    groups = _step_groups(anchor_obs, index, enable_similarity, similarity_thresh, scorer)
    step = segment_norm(per_row(step_rewards), groups, scale=scale, epsilon=epsilon)
    adv = broadcast(ep + step_advantage_w * step, response_mask, token_level_rewards)
    return adv, adv


# --------------------------------------------------------------------------------------------------------- SCPO
def _trajectory_won(scores: np.ndarray, index: Any, traj_index: Any, won: Any) -> np.ndarray:
    """Per row: `won`, else whether its (index, traj_index) trajectory has a row with a positive episode score."""
    if won is not None:
        return np.asarray(won, dtype=bool)
    traj = trajectory_codes(index, traj_index)
    return (np.bincount(traj, weights=scores > 0) > 0)[traj]


def compute_scpo_outcome_advantage(
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
    step_texts,
    scorer=None,
    similarity_scorer=None,
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
    """SCPO inside verl-agent: GiGPO's advantages (this module's drop-in, called with the same positional arguments,
    so a GiGPO-style call binds as GiGPO's), then SCPO's credit on the credited failed steps of mixed groups
    (docs/algorithms.md, "SCPO"). `mode` names verl's normalisation; `scpo_mode` is SCPO's:

      "advantage" (revision 2): A' = A + kappa s_t (A^E_ref - A^E_i), with A^E verl's episode term: the gap is
                  (R_ref - R_i) / (std + eps) for mode "mean_std_norm" (std: unbiased, over the group's rows of
                  token_level_rewards.sum(-1), as verl's episode term uses it) and R_ref - R_i for "mean_norm";
      "returns"   (revision 1): step returns of failed trajectories become step_rewards + sum_k gamma^k b_{t+k}.

    Keyword-only: step_texts (per-row text of the step, e.g. action + " -> " + next observation; required); scorer
    (SCPO's matching scorer, default the lexical one, as `credit.scpo.scorer`); similarity_scorer (GiGPO's anchors
    with enable_similarity, default difflib's ratio, as the GiGPO drop-in); won (per-row success flag, default: the
    trajectory has a row whose episode score is > 0); episode_rewards (per-row R_i without invalid penalties, verl's
    non_tensor_batch["episode_rewards"]; default success_reward * won); SCPO's options. Rows of successes and of
    groups without both outcomes keep GiGPO's advantages exactly.
    """
    import torch

    scale = mode_scale(mode)
    scorer = scorer or _scorer(_SCPO.scorer)
    scores = episode_scores(token_level_rewards)
    won_row = _trajectory_won(scores, index, traj_index, won)
    r_row = success_reward * won_row if episode_rewards is None else per_row(episode_rewards)
    rows = TrajectoryRows(index, traj_index, texts=step_texts, won=won_row)
    b = rows.batch
    opts = SCPOOptions(match=match, tau=tau, reference=reference, seed=seed)  # what the matching reads
    r_traj = r_row[rows.order]  # R_i per row, in batch order
    group = b.group_id
    _, std, _ = episode_statistics(scores[rows.order], np.zeros(b.n_rows), group, b.traj_id)
    factor = 1.0 / (std[group] + epsilon) if scale == "std" else np.ones(b.n_rows)

    def weight(fails, refs, credited, advance, ref_len):
        if scpo_mode == "returns":
            bonus = returns_bonus(credited, advance, ref_len, kappa_r=kappa_r, r_success=success_reward)
            return np.array([math.fsum(row) for row in bonus])
        return kappa * (r_traj[refs] - r_traj[fails]) * factor[fails] * np.array([math.fsum(r) for r in credited])

    m = match_failures(b, b.action, scorer, opts, credit_weight=weight)
    gigpo_args = (epsilon, step_advantage_w, mode, enable_similarity, similarity_thresh)
    common = (response_mask, anchor_obs, index, traj_index, *gigpo_args)
    base, _ = compute_gigpo_outcome_advantage(token_level_rewards, step_rewards, *common, scorer=similarity_scorer)
    ref = np.maximum(
        m["ref_first"], 0
    )  # rows with no reference are credited 0: whatever row 0 holds is multiplied by 0
    if scpo_mode == "advantage":
        credit = kappa * m["credited"] * (r_traj[ref] - r_traj) * factor
        extra = torch.as_tensor(rows.back(credit))[:, None] * torch.as_tensor(response_mask).double().cpu()
        adv = (base.double() + extra).to(base)
        return adv, adv
    bonus = kappa_r * success_reward * m["advance"] / b.traj_len[ref] * m["credited"]
    extra_returns = rows.back(discounted_returns(bonus, b.traj_id, b.step, gamma))
    new, _ = compute_gigpo_outcome_advantage(
        token_level_rewards, per_row(step_rewards) + extra_returns, *common, scorer=similarity_scorer
    )
    shaped = torch.as_tensor(rows.back(m["shaped"]))[:, None].to(base.device)
    adv = torch.where(shaped, new, base)
    return adv, adv


# --------------------------------------------------------------------------------------------------------- G2PO
def compute_group_aggregation_values(batch, *, gamma: float = _GIGPO.gamma, success_reward: float = _R_SUCCESS):
    """G2PO's per-step node values, as the public G2PO trainer computes them before `compute_g2po_outcome_advantage`.

    Reads `batch.non_tensor_batch` fields "episode_rewards" (R_i per row), "anchor_obs", "traj_uid", "uid" (verl's
    DataProto, or any object with a `non_tensor_batch` mapping). Returns (step_rewards, group_idx, next_group_idx) per
    row: V(node of the row) = mean over the node's rows of gamma^(T_i - t) R_i; group_idx = the node, numbered from 0
    within each uid in order of first appearance (trajectories in sorted uid order, then row order); next_group_idx =
    the next row's node, or -1 after a success (R_i == success_reward) and -2 after a failure. A trajectory is the
    pair (uid, traj_uid): the public code gathers a trajectory's rows by traj_uid alone, so there a traj_uid shared by
    two uids would merge both uids' rows into one trajectory.
    """
    nt = batch.non_tensor_batch
    episode_rewards = per_row(nt["episode_rewards"])
    index, traj_index = np.asarray(nt["uid"]), np.asarray(nt["traj_uid"])
    obs_key = row_keys(nt["anchor_obs"])
    rows = TrajectoryRows(index, traj_index)  # a trajectory is (uid, traj_uid); its rows in step order
    step, length = rows.back(rows.batch.step), rows.back(rows.batch.traj_len)
    traj = trajectory_codes(index, traj_index)
    first_r = episode_rewards[np.unique(traj, return_index=True)[1]][traj]  # R_i: the trajectory's first row's
    group_idx = np.empty(len(index), dtype=np.int64)
    next_group_idx = np.empty(len(index), dtype=np.int64)
    for uid in np.unique(index):
        nodes: dict = {}
        in_uid = index == uid
        rows_of = [np.flatnonzero(in_uid & (traj_index == t)) for t in np.unique(traj_index[in_uid])]
        for t_rows in rows_of:
            for r in t_rows:
                group_idx[r] = nodes.setdefault(obs_key[r], len(nodes))
        for t_rows in rows_of:
            next_group_idx[t_rows[:-1]] = group_idx[t_rows[1:]]
            next_group_idx[t_rows[-1]] = -1 if episode_rewards[t_rows[-1]] == success_reward else -2
    node = combine_codes(factorize(row_keys(index)), group_idx)
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
    scale = mode_scale(mode)
    value = per_row(step_rewards)
    prompt = factorize(row_keys(index))
    group_idx, next_group_idx = np.asarray(group_idx), np.asarray(next_group_idx)
    both = combine_codes(np.r_[prompt, prompt], np.r_[group_idx, np.maximum(next_group_idx, 0)])
    node, next_node = both[: len(prompt)], both[len(prompt) :]
    node_value = np.zeros(len(both))  # indexed by the node codes, which are dense: fewer than len(both)
    node_value[node] = value  # one value per node (the public code asserts they agree)
    v_next = np.where(next_group_idx == -1, success_value, np.where(next_group_idx == -2, 0.0, node_value[next_node]))
    pen = invalid_penalty(is_action_valid, invalid_action_penalty)
    step = segment_norm(v_next - pen, node, scale=scale, epsilon=epsilon) + segment_norm(
        v_next - value, prompt, scale=scale, epsilon=epsilon
    )
    ep = _episode_term(episode_scores(token_level_rewards), index, scale=scale, epsilon=epsilon)
    adv = broadcast(ep + step_advantage_w * step, response_mask, token_level_rewards)
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
    scale = mode_scale(mode)
    rows = TrajectoryRows(index, traj_index, observation=[str(o) for o in row_keys(anchor_obs)])
    b = rows.batch
    g = per_row(step_rewards)[rows.order]
    adv, _ = hgpo_step_advantage(
        g, b.group_id, b.observation, b.step, history_length=history_length, alpha=alpha, scale=scale, epsilon=epsilon
    )
    import torch

    mask = torch.as_tensor(response_mask)
    out = torch.as_tensor(rows.back(adv), dtype=torch.float32, device=mask.device)[:, None] * mask
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
    scores = episode_scores(token_level_rewards)
    group = factorize(row_keys(index))
    if compute_mean_std_cross_steps:
        rows = np.arange(len(scores))
    else:
        rows = np.unique(trajectory_codes(index, traj_index), return_index=True)[1]
    out = broadcast(leave_one_out(scores, group, rows), response_mask, token_level_rewards)
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

    scale = mode_scale(mode)
    rows = TrajectoryRows(index, traj_index, observation=[str(o) for o in row_keys(anchor_obs)])
    b = rows.batch
    base = None
    if base_group:
        episode = _episode_term(episode_scores(token_level_rewards), index, scale=scale, epsilon=epsilon)
        base = recipe_base_term(episode, as_float64(response_mask))[rows.order]
    adv, _ = hgpo_step_advantage(
        per_row(step_rewards)[rows.order],
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
