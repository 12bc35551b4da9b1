"""Sequence log-likelihoods of candidate answers, batched over prompts: the one scorer behind both the admissible-choice
sampler (`TransformersEngine`, no grad) and the trainer's choice log-probs (`scpo.train.update`, with grad).

    s_bk = log p(y_bk | x_b) = sum_j log softmax(z_j)[y_bk,j]          (candidate k of prompt b, EOS included)
    log pi(k | x_b) = log softmax_k(s_b / T)[k]                          (the sampler's distribution, temperature T)

How it is computed (the cost is the arithmetic of one pass over each distinct prompt and its candidates):
- rows with the same prompt and the same candidates (siblings of a group at their first turns, or after the same
  actions) are scored once; duplicates read the same values, and gradients reach the weights through that one row;
- the distinct rows go in chunks of similar length (at most `token_budget` padded tokens per forward pass);
- per chunk, pass 1 runs the right-padded prompts through the decoder (causal attention, no mask: a real token sees
  only earlier, real tokens) and keeps their KV cache; pass 2 runs each
  prompt's candidates concatenated in one row after it, with a block mask: candidate k's tokens attend to the prompt
  and to their own earlier tokens only, at positions that continue the prompt's (as if each candidate followed the
  prompt alone). The prompt's KV cache is never copied per candidate;
- the output head is applied only where a candidate token is predicted (the prompt's last position and each
  candidate's own positions), not at every prompt position.
Absent candidates (prompts with fewer than K) score -inf. Any decoder-only transformers model that takes a 4D boolean
attention mask with a KV cache works (Llama, Qwen2, SmolLM2; LoRA-wrapped too); the trained model's autocast
(`scpo.policy.placement.autocast_each_forward`) is applied here because the decoder is called directly.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch

from scpo.policy.padding import right_pad
from scpo.policy.placement import forward_precision

__all__ = ["candidate_scores", "choice_log_distribution", "TOKEN_BUDGET"]

TOKEN_BUDGET = 4096  # padded tokens (prompts + candidates) per forward pass: small chunks of similar rows pad least


def candidate_scores(
    model,
    prompt_ids: Sequence[Sequence[int]],
    candidates: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    *,
    token_budget: int = TOKEN_BUDGET,
) -> torch.Tensor:
    """-> s [B, K] (float32, on the model's device): the log-likelihood of every candidate answer, -inf where absent.

    Gradients flow unless called under `torch.no_grad()`.
    """
    if len(prompt_ids) != len(candidates):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(candidates)} candidate lists")
    if any(not c for c in candidates) or any(not y for c in candidates for y in c):
        raise ValueError("every prompt needs at least one candidate, and every candidate at least one token")
    device = next(model.parameters()).device
    k_max = max(len(c) for c in candidates)
    keys = [(tuple(p), tuple(tuple(y) for y in c)) for p, c in zip(prompt_ids, candidates)]
    distinct: dict[tuple, int] = {}
    row_of = [distinct.setdefault(key, len(distinct)) for key in keys]
    rows = list(distinct)
    lengths = [len(p) + sum(len(y) for y in c) for p, c in rows]
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i][0]), lengths[i]))  # by prompt length, then the rest
    parts: list[tuple[list[int], torch.Tensor]] = []
    start = 0
    while start < len(order):  # chunks of similar length within the token budget
        end = start + 1
        while end < len(order) and (end + 1 - start) * max(lengths[i] for i in order[start : end + 1]) <= token_budget:
            end += 1
        chunk = order[start:end]
        with forward_precision(model):
            parts.append((chunk, _score_chunk(model, [rows[i] for i in chunk], k_max, pad_id, device)))
        start = end
    scores = torch.cat([p for _, p in parts])
    position = torch.empty(len(rows), dtype=torch.long)
    position[torch.tensor([i for chunk, _ in parts for i in chunk])] = torch.arange(len(rows))
    return scores[position[torch.tensor(row_of)].to(device)]


def _score_chunk(model, rows: list[tuple], k_max: int, pad_id: int, device) -> torch.Tensor:
    """s [len(rows), k_max] for distinct (prompt ids, candidates) rows: the two passes of the module docstring."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    b = len(rows)
    prompt, attention = right_pad([p for p, _ in rows], pad_id)
    width_p = prompt.shape[1]
    lengths = attention.sum(-1)
    # right-padded prompts need no mask: under causal attention a real token sees only earlier (real) tokens
    out = decoder(
        input_ids=prompt.to(device),
        position_ids=torch.arange(width_p)[None].expand(b, width_p).to(device),
        use_cache=True,
    )
    last = out.last_hidden_state[torch.arange(b), (lengths - 1).to(device)]
    first = torch.log_softmax(head(last).float(), -1)  # [B, V]: each candidate's first token

    # the candidates of each row, concatenated: token ids, segment (candidate index, -1 on padding), offset in it
    width_c = max(sum(len(y) for y in c) for _, c in rows)
    ids = torch.full((b, width_c), pad_id, dtype=torch.long)
    segment = torch.full((b, width_c), -1, dtype=torch.long)
    offset = torch.zeros((b, width_c), dtype=torch.long)
    for r, (_, cands) in enumerate(rows):
        flat = [t for y in cands for t in y]
        ids[r, : len(flat)] = torch.tensor(flat, dtype=torch.long)
        segment[r, : len(flat)] = torch.repeat_interleave(
            torch.arange(len(cands)), torch.tensor([len(y) for y in cands])
        )
        offset[r, : len(flat)] = torch.cat([torch.arange(len(y)) for y in cands])
    real = segment >= 0
    same = segment[:, :, None] == segment[:, None, :]
    causal = torch.tril(torch.ones((width_c, width_c), dtype=torch.bool))
    own = (same & causal & real[:, :, None]) | torch.eye(width_c, dtype=torch.bool)  # padding attends to itself
    to_prompt = attention.bool()[:, None, :].expand(b, width_c, width_p) & real[:, :, None]
    mask = torch.cat([to_prompt, own], dim=-1)[:, None]  # [B, 1, Tc, P + Tc], True: may attend
    positions = lengths[:, None] + offset
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    rest = decoder(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        position_ids=positions.to(device),
        use_cache=False,
        **{_cache_argument_name(decoder): cache},
    )

    # token log-probs: offset 0 from the prompt's last position, offset j > 0 from the candidate's token j - 1
    scores = torch.zeros(b * k_max, device=device, dtype=torch.float32)
    slot = (torch.arange(b)[:, None] * k_max + segment.clamp(min=0)).to(device)
    starts = real & (offset == 0)
    sb, st = starts.nonzero(as_tuple=True)
    scores = scores.index_add(0, slot[sb, st], first[sb.to(device), ids[sb, st].to(device)])
    inner = real & (offset > 0)
    ib, it = inner.nonzero(as_tuple=True)
    if len(ib):
        hidden = rest.last_hidden_state[ib.to(device), (it - 1).to(device)]
        logp = torch.log_softmax(head(hidden).float(), -1).gather(-1, ids[ib, it].to(device)[:, None]).squeeze(-1)
        scores = scores.index_add(0, slot[ib, it], logp)
    present = torch.zeros(b * k_max, dtype=torch.bool)
    present[(torch.arange(b)[:, None] * k_max + segment.clamp(min=0))[starts]] = True
    return scores.view(b, k_max).masked_fill(~present.view(b, k_max).to(device), float("-inf"))


def _cache_argument_name(decoder) -> str:
    """transformers >= 5.2x names the KV-cache argument `cache` (`past_key_values` is deprecated); older: the latter."""
    return "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"


def choice_log_distribution(scores: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log pi(k | x) = log_softmax(s / T) over the present candidates (-inf stays -inf); T = 0 is read as T = 1."""
    return torch.log_softmax(scores / (temperature or 1.0), dim=-1)
