"""G2PO (Group-Graph Policy Optimization): credit from a state graph built over each group, as the public G2PO code
(Nala-YN/G2PO, `g2po/core_g2po.py`) computes it. Spec: docs/algorithms.md, "G2PO".

    nodes      : distinct anchor observations of group g, plus terminal sentinels (success: V = 10, failure: V = 0)
    edges      : step t is the edge node(o_t) -> node(o_{t+1}); a trajectory's last step leads to its terminal sentinel
    V(n)       = mean over member steps (o_t = n) of gamma^(T_i - t) R_i   (t 0-based: the last step is discounted once)
    A^NC_{i,t} = norm(V(next) - pen_t, steps leaving the same node)        (singleton -> 0)
    A^EC_{i,t} = norm(V(next) - V(curr), all steps of group g)
    A          = A^E + w (A^NC + A^EC)

o_{t+1} is the observation of the trajectory's next row (so every non-terminal next node has members and a value).
Deviation: a group of one step row gets A^EC = 0 where the public code divides by a NaN std.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch
from scpo.credit.gigpo import anchor_groups
from scpo.credit.grouping import invalid_penalty, next_row_in_trajectory, segment_norm, segment_sizes
from scpo.credit.grpo import episode_term, group_stats
from scpo.credit.options import CreditOptions, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = ["G2POOptions", "node_values", "compute_g2po"]


class G2POOptions(StrictModel):
    """G2PO as its public code (docs/algorithms.md, "G2PO")."""

    w: float = Field(1.0, ge=0, description="A = A^E + w (A^NC + A^EC)")
    success_value: float = Field(10.0, description="value of the success sentinel node (failure: 0)")


def node_values(
    node: np.ndarray, episode_return: np.ndarray, step: np.ndarray, traj_len: np.ndarray, gamma: float
) -> np.ndarray:
    """V(node) per node code: mean over the node's member steps of gamma^(T_i - t) R_i (public code's exponent)."""
    target = gamma ** (np.asarray(traj_len) - np.asarray(step)) * np.asarray(episode_return, dtype=np.float64)
    counts = np.bincount(node)
    return np.bincount(node, weights=target, minlength=len(counts)) / np.maximum(counts, 1)


@credit_method("g2po", G2POOptions, reads=("gigpo", "grpo"))
def compute_g2po(batch: RolloutBatch, cfg: CreditOptions, **_: object) -> CreditResult:
    """G2PO on `batch`; diagnostics add "node_value" (V of the step's node) and "next_value" (V of the next node)."""
    opts, norm = cfg.g2po, cfg.norm
    pen = invalid_penalty(batch.valid, norm.lambda_invalid)
    ep_adv = episode_term(batch, cfg, pen)
    node = anchor_groups(batch.group_id, batch.observation)
    value = node_values(node, batch.episode_return, batch.step, batch.traj_len, cfg.gigpo.gamma)
    v_curr = value[node]
    nxt = next_row_in_trajectory(batch.traj_id)
    terminal = np.where(batch.won, opts.success_value, 0.0)
    v_next = np.where(nxt >= 0, v_curr[np.maximum(nxt, 0)], terminal)
    a_nc = segment_norm(v_next - pen, node, scale=norm.scale, epsilon=norm.epsilon)
    a_ec = segment_norm(v_next - v_curr, batch.group_id, scale=norm.scale, epsilon=norm.epsilon)
    step_adv = a_nc + a_ec
    diag = {
        "episode_adv": ep_adv,
        "step_adv": step_adv,
        "anchor_group_size": segment_sizes(node),
        "node_value": v_curr,
        "next_value": v_next,
        "node_centric": a_nc,
        "edge_centric": a_ec,
    }
    return CreditResult("g2po", ep_adv + opts.w * step_adv, v_next, diag, group_stats(batch))
