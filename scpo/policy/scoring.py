"""Sequence log-likelihoods of candidate answers, batched over prompts: the one scorer behind both the admissible-choice
sampler (`TransformersEngine`, no grad) and the trainer's choice log-probs (`scpo.train.update`, with grad), so the
PPO ratio's old log-prob is computed by the very function the sampler drew from.

    s_bk = log p(y_bk | x_b) = sum_j log softmax(z_j)[y_bk,j]          (candidate k of prompt b, EOS included)
    log pi(k | x_b) = log softmax_k(s_b / T)[k]                          (the sampler's distribution, temperature T)

One forward pass over the (left-padded) prompts fills a KV cache; it is repeated K times and all candidates are scored
in a second pass, so a prompt is encoded once however many candidates it has. Absent candidates (prompts with fewer than
K) score -inf.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from functools import cache

import torch

from scpo.policy.padding import left_pad, right_pad

__all__ = ["candidate_scores", "choice_log_distribution"]


def candidate_scores(
    model, prompt_ids: Sequence[Sequence[int]], candidates: Sequence[Sequence[Sequence[int]]], pad_id: int
) -> torch.Tensor:
    """-> s [B, K] (float32, on the model's device): the log-likelihood of every candidate answer, -inf where absent.

    Gradients flow unless called under `torch.no_grad()`.
    """
    if len(prompt_ids) != len(candidates):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(candidates)} candidate lists")
    if any(not c for c in candidates) or any(not y for c in candidates for y in c):
        raise ValueError("every prompt needs at least one candidate, and every candidate at least one token")
    device = next(model.parameters()).device
    b = len(prompt_ids)
    k = max(len(c) for c in candidates)
    width = max(len(y) for c in candidates for y in c)
    prompt, attention = left_pad(prompt_ids, pad_id)
    cand, cand_mask = right_pad([c[j] if j < len(c) else () for c in candidates for j in range(k)], pad_id, width)
    cand, cand_mask = cand.view(b, k, width), cand_mask.view(b, k, width)
    present = cand_mask[:, :, 0].bool().to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)

    out = model(
        input_ids=prompt.to(device),
        attention_mask=attention.to(device),
        position_ids=positions.to(device),
        use_cache=True,
    )
    first = torch.log_softmax(out.logits[:, -1].float(), -1)  # [B, V]
    scores = first.gather(1, cand[:, :, 0].to(device))  # [B, K]
    if width > 1:
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        cache.batch_repeat_interleave(k)
        flat, flat_mask = cand.view(b * k, width), cand_mask.view(b * k, width)
        rest_attention = torch.cat([attention.repeat_interleave(k, 0), flat_mask[:, :-1]], dim=1)
        rest_positions = attention.sum(-1).repeat_interleave(k)[:, None] + torch.arange(width - 1)[None, :]
        rest = model(
            input_ids=flat[:, :-1].to(device),
            attention_mask=rest_attention.to(device),
            position_ids=rest_positions.to(device),
            use_cache=False,
            **_cache_kwarg(cache),
        )
        logp = torch.log_softmax(rest.logits.float(), -1).gather(-1, flat[:, 1:, None].to(device)).squeeze(-1)
        scores = scores + (logp * flat_mask[:, 1:].to(device)).sum(-1).view(b, k)
    return scores.masked_fill(~present, float("-inf"))


def choice_log_distribution(scores: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log pi(k | x) = log_softmax(s / T) over the present candidates (-inf stays -inf); T = 0 is read as T = 1."""
    return torch.log_softmax(scores / (temperature or 1.0), dim=-1)


@cache
def _cache_argument_name() -> str:
    """transformers >= 5.2x names the KV-cache argument `cache` (`past_key_values` is deprecated); older: the latter."""
    from transformers import LlamaForCausalLM

    return "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


def _cache_kwarg(cache) -> dict:
    return {_cache_argument_name(): cache}
