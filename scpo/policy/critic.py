"""The critic of PPO for the tiny policy: a value head on the policy's trunk, read at each turn's last prompt token,
and the clipped value loss at the turn level. Spec: docs/algorithms.md, "PPO (learned critic)".

    h_t   = the trunk's final (normed) hidden state at the last token of turn t's prompt       [B, H]
    V(s_t) = ValueHead(h_t)                     (a linear score, as verl's critic and TRL's ValueHead; or an MLP)
    L_V   = 1/2 sum_t w_t max((V_t - G_t)^2, (clip(V_t, V_old_t - c, V_old_t + c) - G_t)^2) / sum_t w_t

With w_t the turn's answer token count, L_V is verl's `compute_value_loss` with "token-mean" aggregation on a critic
whose value is the same at every token of a turn's answer (scpo.integrations.verl_gae); with w_t = 1 each turn counts
once. G_t are PPO's returns (`scpo.credit.ppo`), V_old the values they were computed from, c verl's cliprange_value.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

__all__ = ["ValueHead", "prompt_last_hidden", "clipped_value_loss"]


class ValueHead(nn.Module):
    """V(s) from a hidden state [..., H] -> [...]: Linear(H, 1) with `hidden` = 0, else Linear(H, hidden), tanh,
    Linear(hidden, 1). The output layer starts at zero weight and bias, so an untrained critic predicts V = 0."""

    def __init__(self, hidden_size: int, hidden: int = 0) -> None:
        super().__init__()
        if hidden_size < 1 or hidden < 0:
            raise ValueError(f"ValueHead needs hidden_size >= 1 and hidden >= 0, got {hidden_size}, {hidden}")
        body: list[nn.Module] = [nn.Linear(hidden_size, hidden), nn.Tanh()] if hidden else []
        self.out = nn.Linear(hidden or hidden_size, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.body = nn.Sequential(*body)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(states)).squeeze(-1)


def prompt_last_hidden(model, prompt_ids: Sequence[Sequence[int]]) -> torch.Tensor:
    """[B, H]: the final (normed) hidden state of a transformers causal LM's trunk (`model.model`, e.g. Llama's
    decoder) at the last token of each prompt, right-padded in one batch: under causal attention a prompt's tokens
    never see the padding after them, so neither the pad id nor an attention mask changes their states (as
    `scpo.policy.prompt_pass`). Gradients flow unless the caller disables them (a frozen trunk: `torch.no_grad()`)."""
    if len(prompt_ids) == 0 or any(len(p) == 0 for p in prompt_ids):
        raise ValueError("prompt_last_hidden needs at least one prompt, each with at least one token")
    rows = [torch.as_tensor(list(p)) for p in prompt_ids]
    last = torch.tensor([len(r) for r in rows]) - 1  # CPU indices index a tensor on any device
    out = model.model(input_ids=pad_sequence(rows, batch_first=True).to(next(model.parameters()).device))
    return out.last_hidden_state[torch.arange(len(rows)), last]


def clipped_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor,
    cliprange_value: float,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L_V, clipfrac) over turns (module docstring); all inputs [B]; `weights` (the answers' token counts) default to
    1. clipfrac: the weighted share of turns where the clipped term is the larger."""
    if cliprange_value <= 0:
        raise ValueError(f"cliprange_value={cliprange_value} must be > 0")
    w = torch.ones_like(vpreds) if weights is None else weights.to(vpreds.dtype)
    if w.sum() <= 0:
        raise ValueError("clipped_value_loss needs a positive total weight")
    clipped = torch.max(torch.min(vpreds, old_values + cliprange_value), old_values - cliprange_value)
    unclipped_loss = (vpreds - returns) ** 2
    clipped_loss = (clipped - returns) ** 2
    loss = 0.5 * (w * torch.max(unclipped_loss, clipped_loss)).sum() / w.sum()
    clipfrac = (w * (clipped_loss > unclipped_loss)).sum() / w.sum()
    return loss, clipfrac
