"""verl drop-ins for PPO's critic side, with verl's signatures (verl/trainer/ppo/core_algos.py; no verl import needed):
GAE over response tokens and the clipped value loss. Spec: docs/algorithms.md, "PPO (learned critic)".

    advantages, returns = compute_gae_advantage_return(token_level_rewards, values, response_mask, gamma, lam)
    vf_loss, vf_clipfrac = compute_value_loss(vpreds, returns, values, response_mask, cliprange_value, loss_agg_mode)

GAE, per row b, backwards over the response positions t (Schulman et al. 2016, Eq. 16), skipping masked positions
(the observation tokens of a multi-turn response: they neither give a TD error nor are a next state):

    delta_t = r_t + gamma V_next - V_t,   A_t = delta_t + gamma lam A_next    at positions with mask 1
    V_next, A_next = the value and advantage at the next position with mask 1 (0 past the last)
    A at a masked position = A_next carried through; returns = A + V (every position); A whitened over the mask

The clipped value loss (PPO2, as TRL's and verl's):

    V_clip = clip(V_pred, V_old - c, V_old + c),   L = 1/2 agg(max((V_pred - G)^2, (V_clip - G)^2), mask)
    clipfrac = mean over the mask of 1[(V_clip - G)^2 > (V_pred - G)^2]

`agg` is verl's `agg_loss` at one data-parallel rank: "token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
"seq-mean-token-sum-norm". Whitening is verl's `masked_whiten` (unbiased variance over the mask, eps 1e-8). The
turn-level PPO of the suite (`scpo.credit.ppo`) is these formulas with one value per turn.
"""

from __future__ import annotations

import torch

__all__ = ["compute_gae_advantage_return", "compute_value_loss", "masked_whiten", "aggregate_loss", "LOSS_AGG_MODES"]

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def _masked_sum(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum of values * mask, a value outside the mask never contributing (not even a NaN)."""
    return (torch.where(mask.bool(), values, torch.zeros_like(values)) * mask).sum()


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return _masked_sum(values, mask) / (mask.sum() + 1e-8)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(x - m) / sqrt(v + 1e-8): m the mean over the mask, v the unbiased variance over it (at least 2 entries)."""
    n = mask.sum()
    if n < 2:
        raise ValueError(f"whitening needs at least 2 positions in the mask, got {int(n)}")
    mean = _masked_mean(values, mask)
    var = _masked_mean((values - mean) ** 2, mask) * (n / (n - 1))
    return (values - mean) * torch.rsqrt(var + 1e-8)


@torch.no_grad()
def compute_gae_advantage_return(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float | torch.Tensor,
    lam: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both (batch, response_length), from rewards, values and mask of that shape (module
    docstring): GAE skipping masked positions, returns = A + V, advantages whitened over the mask."""
    if not (token_level_rewards.shape == values.shape == response_mask.shape):
        raise ValueError(
            f"token_level_rewards {tuple(token_level_rewards.shape)}, values {tuple(values.shape)} and response_mask "
            f"{tuple(response_mask.shape)} must have one shape (batch, response_length)"
        )
    inside = response_mask.bool()
    next_value = torch.zeros_like(values[:, 0])
    next_adv = torch.zeros_like(values[:, 0])
    columns = []
    for t in range(values.shape[1] - 1, -1, -1):
        delta = token_level_rewards[:, t] + gamma * next_value - values[:, t]
        adv_here = delta + gamma * lam * next_adv
        next_value = torch.where(inside[:, t], values[:, t], next_value)
        next_adv = torch.where(inside[:, t], adv_here, next_adv)
        columns.append(next_adv)
    advantages = torch.stack(columns[::-1], dim=1)
    returns = advantages + values
    return masked_whiten(advantages, response_mask), returns


def aggregate_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_agg_mode: str) -> torch.Tensor:
    """verl's `agg_loss` on one rank: token-mean = sum / tokens; seq-mean-token-sum = mean over sequences with a token
    of their sums; seq-mean-token-mean = the same of their token means; seq-mean-token-sum-norm = sum / the mask's
    width (response_length)."""
    if loss_agg_mode == "token-mean":
        return _masked_sum(loss_mat, loss_mask) / loss_mask.sum()
    tokens = loss_mask.sum(dim=1)
    has_tokens = tokens > 0
    seq = (loss_mat * loss_mask).sum(dim=1)
    if loss_agg_mode == "seq-mean-token-sum":
        return _masked_sum(seq, has_tokens) / has_tokens.sum()
    if loss_agg_mode == "seq-mean-token-mean":
        return _masked_sum(seq / (tokens + 1e-8), has_tokens) / has_tokens.sum()
    if loss_agg_mode == "seq-mean-token-sum-norm":
        return seq.sum() / loss_mask.shape[1]
    raise ValueError(f"loss_agg_mode={loss_agg_mode!r} is not one of {', '.join(LOSS_AGG_MODES)}")


def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float,
    loss_agg_mode: str = "token-mean",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(vf_loss, vf_clipfrac): PPO's clipped value loss of the new predictions `vpreds` against `returns`, the update
    of each value held within `cliprange_value` of the old `values` (module docstring). All (batch, response_length)."""
    clipped = torch.max(torch.min(vpreds, values + cliprange_value), values - cliprange_value)
    unclipped_loss = (vpreds - returns) ** 2
    clipped_loss = (clipped - returns) ** 2
    loss = 0.5 * aggregate_loss(torch.max(unclipped_loss, clipped_loss), response_mask, loss_agg_mode)
    clipfrac = _masked_mean(torch.gt(clipped_loss, unclipped_loss).float(), response_mask)
    return loss, clipfrac
