"""verl-agent's public GiGPO functions (langfengQ/verl-agent, `gigpo/core_gigpo.py`) and recipe/GraphGPO's step
returns (`recipe/GraphGPO/core_graph.py::compute_graph_path_returns`), transcribed for the parity tests of the
drop-ins: the same loops, dictionaries, torch calls, uuid4 group ids and difflib similarity, with the prints and the
verl imports left out. They share no code with `scpo`.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from difflib import SequenceMatcher
from typing import Any

import numpy as np
import torch


def to_hashable(x):
    if isinstance(x, (int, float, str, bool)):
        return x
    elif isinstance(x, (np.integer, np.floating)):
        return x.item()
    elif isinstance(x, np.ndarray):
        return tuple(x.flatten())
    elif isinstance(x, (list, tuple)):
        return tuple(to_hashable(e) for e in x)
    elif isinstance(x, dict):
        return tuple(sorted((k, to_hashable(v)) for k, v in x.items()))
    else:
        raise TypeError(f"Unsupported type: {type(x)}")


def are_similar(a: str, b: str, threshold: float = 0.95) -> bool:
    if not isinstance(a, str) or not isinstance(b, str):
        raise ValueError("Only text-based observations are supported for similarity-based GiGPO in this version.")
    return SequenceMatcher(None, a, b).ratio() >= threshold


def compute_gigpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    step_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    anchor_obs: np.array,
    index: np.array,
    traj_index: np.array,
    epsilon: float = 1e-6,
    step_advantage_w: float = 1.0,
    mode: str = "mean_norm",
    enable_similarity: bool = False,
    similarity_thresh: float = 0.95,
):
    if mode == "mean_std_norm":
        remove_std = False
    elif mode == "mean_norm":
        remove_std = True
    else:
        raise ValueError(f"Unknown mode: {mode}")
    episode_advantages = episode_norm_reward(token_level_rewards, response_mask, index, traj_index, epsilon, remove_std)
    step_group_uids = build_step_group(anchor_obs, index, enable_similarity, similarity_thresh)
    step_advantages = step_norm_reward(step_rewards, response_mask, step_group_uids, epsilon, remove_std)
    scores = episode_advantages + step_advantage_w * step_advantages
    return scores, scores


def episode_norm_reward(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.array,
    traj_index: np.array,
    epsilon: float = 1e-6,
    remove_std: bool = True,
    compute_mean_std_cross_steps: bool = True,
):
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    seen_pairs = set()
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            if (index[i], traj_index[i]) in seen_pairs:
                continue
            id2score[index[i]].append(scores[i])
            if not compute_mean_std_cross_steps:
                seen_pairs.add((index[i], traj_index[i]))
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.tensor(0.0)
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if remove_std:
                scores[i] = scores[i] - id2mean[index[i]]
            else:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        episode_advantages = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
    return episode_advantages


def build_step_group(
    anchor_obs: np.array,
    index: np.array,
    enable_similarity: bool = False,
    similarity_thresh: float = 0.95,
    summarize: bool = False,
):
    if enable_similarity:
        assert similarity_thresh > 0.0 and similarity_thresh < 1.0
    step_group_uids = np.empty(len(anchor_obs), dtype=object)
    unique_indices = np.unique(index)
    for idx in unique_indices:
        if not enable_similarity:
            indices = np.where(index == idx)[0]
            obs_group = anchor_obs[indices]
            clusters = defaultdict(list)
            for i, obs in enumerate(obs_group):
                clusters[to_hashable(obs)].append(indices[i])
            for _obs, original_indices in clusters.items():
                uid = str(uuid.uuid4())
                for original_idx in original_indices:
                    step_group_uids[original_idx] = uid
        else:
            locs = np.where(index == idx)[0]
            obs_group = anchor_obs[locs]
            clusters: list[dict[str, Any]] = []
            for obs, loc in zip(obs_group, locs):
                placed = False
                for cluster in clusters:
                    if are_similar(obs, cluster["rep"], similarity_thresh):
                        cluster["locs"].append(loc)
                        placed = True
                        break
                if not placed:
                    clusters.append({"rep": obs, "locs": [loc]})
            for cluster in clusters:
                uid = str(uuid.uuid4())
                for loc in cluster["locs"]:
                    step_group_uids[loc] = uid
    if None in step_group_uids or np.any(step_group_uids == None):  # noqa: E711 - the public code's test
        raise ValueError("Failed to assign UIDs to all observations")
    return step_group_uids


def step_norm_reward(
    step_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.array,
    epsilon: float = 1e-6,
    remove_std: bool = True,
):
    response_length = response_mask.shape[-1]
    scores = step_rewards.clone()
    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}
    with torch.no_grad():
        bsz = scores.shape[0]
        for i in range(bsz):
            id2score[index[i]].append(scores[i])
        for idx in id2score:
            if len(id2score[idx]) == 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.tensor(1.0)
            elif len(id2score[idx]) > 1:
                id2mean[idx] = torch.mean(torch.tensor(id2score[idx]))
                id2std[idx] = torch.std(torch.tensor([id2score[idx]]))
            else:
                raise ValueError(f"no score in prompt index: {idx}")
        for i in range(bsz):
            if remove_std:
                scores[i] = scores[i] - id2mean[index[i]]
            else:
                scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        step_advantages = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
    return step_advantages


def recipe_graph_path_returns(batch, Gs: dict, gamma: float, normalize_distance: bool):
    """recipe/GraphGPO's `compute_graph_path_returns`: reads each graph's `shortest_path_to_final` and
    `canonicalizer`."""
    rewards = batch.non_tensor_batch["rewards"].astype(np.float32)
    traj_uids = batch.non_tensor_batch["traj_uid"]
    uids = batch.non_tensor_batch["uid"]
    active_masks = batch.non_tensor_batch["active_masks"].astype(np.float32)
    next_obs_ = batch.non_tensor_batch["next_obs"]
    old_obs_ = batch.non_tensor_batch["anchor_obs"]
    returns_by_traj = {}
    unique_traj_uids = np.unique(traj_uids)
    for uid in unique_traj_uids:
        traj_indices = np.where(traj_uids == uid)[0]
        uid_uid = uids[traj_indices[0]]
        traj_rewards = rewards[traj_indices]
        traj_active_masks = active_masks[traj_indices]
        new_obs = next_obs_[traj_indices]
        old_obs = old_obs_[traj_indices]
        assert traj_active_masks.all(), "active_masks should be all 1s for the same trajectory"
        traj_returns = np.zeros_like(traj_rewards)
        g = Gs[uid_uid]
        distances_dict, distances_path_dict = g.shortest_path_to_final
        canon = getattr(g, "canonicalizer", None)
        for t in range(len(traj_rewards)):
            weight = 1.0
            if canon is not None:
                new_h = canon.canonicalize(new_obs[t])
                old_h = canon.canonicalize(old_obs[t])
            else:
                new_h = to_hashable(new_obs[t])
                old_h = to_hashable(old_obs[t])
            if normalize_distance:
                traj_returns[t] = 10 * gamma ** (distances_dict[new_h] - distances_dict[old_h] + weight)
            else:
                traj_returns[t] = 10 * gamma ** (distances_dict[new_h] + weight - 1)
        returns_by_traj[uid] = traj_returns
    all_returns = np.zeros_like(rewards)
    for i, uid in enumerate(traj_uids):
        traj_indices = np.where(traj_uids == uid)[0]
        idx_in_traj = np.where(traj_indices == i)[0][0]
        all_returns[i] = returns_by_traj[uid][idx_in_traj]
    return torch.tensor(all_returns, dtype=torch.float32, device=batch.batch["input_ids"].device)
