"""verl's rows as the drop-ins read them (`scpo.integrations.verl_agent`, `scpo.integrations.verl_agent_graphgpo`):
tensors or arrays to float64, `non_tensor_batch` values to hashable keys, per-row values back to masked
(rows, response_len) tensors, and trajectories regrouped as a RolloutBatch.

Rows are steps; `index` is the group uid, `traj_index` the trajectory uid. A trajectory is the pair (index,
traj_index): one trajectory id in two groups is two trajectories, as verl-agent's `episode_norm_reward` and the public
HGPO code key them (and as a batch whose trajectory ids count from 0 in every group needs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scpo.batch import RolloutBatch
from scpo.credit.grouping import combine_codes, factorize

__all__ = [
    "MODES",
    "mode_scale",
    "as_float64",
    "per_row",
    "episode_scores",
    "row_keys",
    "broadcast",
    "trajectory_codes",
    "TrajectoryRows",
]

MODES = {"mean_norm": "none", "mean_std_norm": "std"}  # verl-agent's mode -> scpo's norm scale


def mode_scale(mode: str) -> str:
    """scpo's scale of verl-agent's `mode`; ValueError with verl-agent's message for another mode."""
    try:
        return MODES[mode]
    except KeyError:
        raise ValueError(f"Unknown mode: {mode!r}; verl-agent modes are 'mean_norm', 'mean_std_norm'") from None


def as_float64(x: Any) -> np.ndarray:
    """A torch tensor or array-like as a float64 numpy array (detached, on CPU)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def per_row(x: Any) -> np.ndarray:
    """A per-row input ((rows,) or (rows, 1)) as a flat float64 array."""
    return as_float64(x).ravel()


def episode_scores(token_level_rewards: Any) -> np.ndarray:
    """verl's episode score of each row: its token_level_rewards (rows, response_len) summed over the response."""
    return as_float64(token_level_rewards).sum(1)


def row_keys(values: Any) -> np.ndarray:
    """Hashable per-row keys (verl's anchor_obs may hold strings, numbers, arrays, lists or dicts), as verl-agent's
    `to_hashable` makes them."""

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


def broadcast(per_row: np.ndarray, response_mask: Any, like: Any):
    """(rows,) float64 -> (rows, response_len) tensor multiplied by the mask, with `like`'s dtype and device when `like`
    is a tensor, else float32 on the CPU (a numpy `like` has a numpy dtype, which torch cannot take)."""
    import torch

    adv = torch.as_tensor(per_row)[:, None] * torch.as_tensor(response_mask).double().cpu()
    tensor = isinstance(like, torch.Tensor)
    return adv.to(dtype=like.dtype if tensor else torch.float32, device=like.device if tensor else "cpu")


def trajectory_codes(index: Any, traj_index: Any) -> np.ndarray:
    """Dense code per row of its trajectory, the pair (index, traj_index)."""
    return combine_codes(factorize(row_keys(index)), factorize(row_keys(traj_index)))


class TrajectoryRows:
    """verl rows regrouped as a contiguous, step-ordered RolloutBatch (and the permutation back): trajectories keyed by
    (index, traj_index), each trajectory's rows in verl's order (its step order). `observation` / `texts`: per-row
    strings for the batch's observation / action columns; `won`: per-row success flags."""

    def __init__(self, index, traj_index, *, observation=None, texts=None, won=None) -> None:
        traj = trajectory_codes(index, traj_index)
        self.order = np.lexsort((np.arange(len(traj)), traj))  # contiguous trajectories, verl's step order kept
        t = traj[self.order]
        step = np.arange(len(t)) - np.searchsorted(t, t)  # the position after the trajectory's first row
        cols = {
            "group_id": factorize(row_keys(index))[self.order],
            "traj_id": t,
            "step": step,
            "reward": np.zeros(len(t)),
        }
        if observation is not None:
            cols["observation"] = [str(observation[i]) for i in self.order]
        if texts is not None:
            cols["action"] = [str(texts[i]) for i in self.order]
        if won is not None:
            cols["won"] = np.asarray(won)[self.order]
        self.batch = RolloutBatch.from_columns(**cols)

    def back(self, per_row: np.ndarray) -> np.ndarray:
        """A per-row array of `batch`'s order in verl's order."""
        out = np.empty_like(per_row)
        out[self.order] = per_row
        return out
