"""Token log-probabilities of answers under a causal LM, in the layout generation used.

Layout per minibatch: `[left-padded prompt | right-padded response]`, position ids from the attention mask (as
`generate` does with left padding), so the recomputed log-probs match the sampler's. Only the last `Lr + 1` logits are
materialised (`logits_to_keep`), which keeps memory at `B x Lr x V` even for 150k-token vocabularies.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from scpo.policy.padding import left_pad, right_pad

__all__ = ["pack", "response_logprobs", "bucketed_batches"]


def pack(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int):
    """-> input_ids [B, P+R], attention_mask [B, P+R], response_ids [B, R], response_mask [B, R] (float)."""
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    prompt, prompt_attention = left_pad(prompt_ids, pad_id)
    resp, resp_attention = right_pad(response_ids, pad_id, width=max(max(len(r) for r in response_ids), 1))
    input_ids = torch.cat([prompt, resp], dim=1)
    attention = torch.cat([prompt_attention, resp_attention], dim=1)
    resp_mask = resp_attention.float()
    return input_ids, attention, resp, resp_mask


def response_logprobs(
    model,
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
):
    """log pi(y_k | x, y_<k) / temperature-scaled, for every response token.

    Returns (logp [B, R], mask [B, R], entropy [B, R] or None). Gradients flow unless called under `torch.no_grad()`.
    """
    input_ids, attention, resp, mask = pack(prompt_ids, response_ids, pad_id)
    device = next(model.parameters()).device
    input_ids, attention, resp, mask = (t.to(device) for t in (input_ids, attention, resp, mask))
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    width_r = resp.shape[1]
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        logits_to_keep=width_r + 1,
        use_cache=False,
    )
    logits = out.logits[:, :-1, :].float()
    if temperature and temperature != 1.0:
        logits = logits / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    logp = log_probs.gather(-1, resp.unsqueeze(-1)).squeeze(-1) * mask
    entropy = None
    if with_entropy:
        entropy = -(log_probs.exp() * log_probs).sum(-1) * mask
    return logp, mask, entropy


def bucketed_batches(
    lengths: Sequence[int], batch_size: int, generator: torch.Generator | None = None, pool: int = 8
) -> list[list[int]]:
    """Shuffled minibatches of indices with little padding: shuffle, cut into pools of `pool` minibatches, sort each
    pool by length, slice it into minibatches, shuffle the minibatch order. Every index appears exactly once."""
    order = torch.randperm(len(lengths), generator=generator).tolist()
    batches: list[list[int]] = []
    span = batch_size * pool
    for start in range(0, len(order), span):
        chunk = sorted(order[start : start + span], key=lambda i: lengths[i])
        batches.extend(chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size))
    perm = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in perm]
