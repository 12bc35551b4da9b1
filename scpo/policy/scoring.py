"""Sequence log-likelihoods of candidate answers, batched over prompts: the one scorer behind both the admissible-choice
sampler (`TransformersEngine`, no grad) and the trainer's choice log-probs (`scpo.train.update`, with grad).

    s_bk = log p(y_bk | x_b) = sum_j log softmax(z_j / tau)[y_bk,j]    (candidate k of prompt b, EOS included)
    log pi(k | x_b) = log softmax_k(s_b / T)[k]                          (the sampler's distribution, temperature T)

tau is a per-token temperature, 1 everywhere but HCAPO's hindsight scores (`scpo.policy.hindsight`, tau = 5).

How it is computed (the cost is the arithmetic of one pass over each distinct prompt and its candidates):
- rows with the same prompt and the same candidates (siblings of a group at their first turns, or after the same
  actions) are scored once; duplicates read the same values, and gradients reach the weights through that one row;
- the distinct rows go in chunks of similar length (at most `token_budget` padded tokens per forward pass);
- per chunk, pass 1 runs the right-padded prompts through the decoder (causal attention, no mask: a real token sees
  only earlier, real tokens) and keeps their KV cache; pass 2 runs each prompt's candidates as a prefix tree after it
  (`scpo.policy.candidate_trie`): every distinct candidate prefix is fed once (the shared `<action> go to cabinet` of
  six commands, once), attending to the prompt and to its own ancestors only, at the position that continues the
  prompt's (as if each candidate followed the prompt alone); a candidate's last token (EOS) is predicted, never fed.
  The prompt's KV cache is never copied per candidate;
- the output head is applied only where a candidate token is predicted (the prompt's last position and each trie
  node), not at every prompt position.
Absent candidates (prompts with fewer than K) score -inf. Any decoder-only transformers model that takes a 4D boolean
attention mask with a KV cache works (Llama, Qwen2, SmolLM2; LoRA-wrapped too); the trained model's autocast
(`scpo.policy.placement.autocast_each_forward`) is applied here because the decoder is called directly.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from transformers import DynamicCache

from scpo.policy.candidate_trie import trie_of
from scpo.policy.padding import right_pad
from scpo.policy.placement import forward_precision
from scpo.policy.prompt_pass import prompt_states

__all__ = ["candidate_scores", "choice_log_distribution", "TOKEN_BUDGET"]

TOKEN_BUDGET = 4096  # padded tokens (prompts + candidates) per forward pass: small chunks of similar rows pad least


def candidate_scores(
    model,
    prompt_ids: Sequence[Sequence[int]],
    candidates: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    *,
    token_budget: int = TOKEN_BUDGET,
    token_temperature: float = 1.0,
) -> torch.Tensor:
    """-> s [B, K] (float32, on the model's device): the log-likelihood of every candidate answer, -inf where absent,
    each token's log-prob taken from its logits divided by `token_temperature` (tau of the module docstring).

    Gradients flow unless called under `torch.no_grad()`.
    """
    if not token_temperature > 0:
        raise ValueError(f"token_temperature={token_temperature!r}: must be > 0")
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
    lengths = [len(p) + trie_of(c).n_nodes for p, c in rows]  # the positions each row feeds
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i][0]), lengths[i]))  # by prompt length, then the rest
    parts: list[tuple[list[int], torch.Tensor]] = []
    start = 0
    while start < len(order):  # chunks of similar length within the token budget
        end = start + 1
        while end < len(order) and (end + 1 - start) * max(lengths[i] for i in order[start : end + 1]) <= token_budget:
            end += 1
        chunk = order[start:end]
        with forward_precision(model):
            scored = _score_chunk(model, [rows[i] for i in chunk], k_max, pad_id, device, token_temperature)
        parts.append((chunk, scored))
        start = end
    scores = torch.cat([p for _, p in parts])
    position = torch.empty(len(rows), dtype=torch.long)
    position[torch.tensor([i for chunk, _ in parts for i in chunk])] = torch.arange(len(rows))
    return scores[position[torch.tensor(row_of)].to(device)]


def _score_chunk(model, rows: list[tuple], k_max: int, pad_id: int, device, tau: float = 1.0) -> torch.Tensor:
    """s [len(rows), k_max] for distinct (prompt ids, candidates) rows: the two passes of the module docstring."""
    decoder, head = model.get_decoder(), model.get_output_embeddings()

    def token_logp(hidden):  # the output head where a token is predicted, in float32, at temperature tau
        logits = head(hidden).float()
        return torch.log_softmax(logits if tau == 1.0 else logits / tau, -1)

    b = len(rows)
    prompt, attention = right_pad([p for p, _ in rows], pad_id)
    width_p = prompt.shape[1]
    lengths = attention.sum(-1)
    cache, last = prompt_states(decoder, prompt.to(device), lengths, lambda: DynamicCache(config=decoder.config))
    first = token_logp(last)  # [B, V]: each candidate's first token

    tries = [trie_of(c) for _, c in rows]
    scores = torch.zeros(b * k_max, device=device, dtype=torch.float32)
    row_of_first = torch.cat([torch.full((t.n_candidates,), r, dtype=torch.long) for r, t in enumerate(tries)])
    slot_of_first = torch.cat([r * k_max + torch.arange(t.n_candidates) for r, t in enumerate(tries)])
    first_token = torch.cat([t.first for t in tries])
    scores = scores.index_add(0, slot_of_first.to(device), first[row_of_first.to(device), first_token.to(device)])

    width_n = max(t.n_nodes for t in tries)
    if width_n:  # pass 2: every row's trie nodes after its prompt, each seeing the prompt and its own ancestors
        ids = torch.full((b, width_n), pad_id, dtype=torch.long)
        positions = torch.zeros((b, width_n), dtype=torch.long)
        own = torch.eye(width_n, dtype=torch.bool).repeat(b, 1, 1)  # padding attends to itself
        real = torch.zeros((b, width_n), dtype=torch.bool)
        for r, t in enumerate(tries):
            n = t.n_nodes
            ids[r, :n] = t.tokens
            positions[r, :n] = lengths[r] + t.depth
            own[r, :n, :n] = t.ancestors
            real[r, :n] = True
        to_prompt = attention.bool()[:, None, :].expand(b, width_n, width_p) & real[:, :, None]
        mask = torch.cat([to_prompt, own], dim=-1)[:, None]  # [B, 1, N, P + N], True: may attend
        rest = decoder(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            use_cache=False,
            **{_cache_argument_name(decoder): cache},
        )
        # every node predicts at least one token: the head once per node, row-major (row, node)
        node_logp = token_logp(rest.last_hidden_state[real.to(device)])
        offsets = torch.cumsum(torch.tensor([0] + [t.n_nodes for t in tries[:-1]]), 0)
        pred_node = torch.cat([offsets[r] + t.pred_node for r, t in enumerate(tries)])
        pred_token = torch.cat([t.pred_token for t in tries])
        pred_slot = torch.cat([r * k_max + t.pred_candidate for r, t in enumerate(tries)])
        if len(pred_node):
            scores = scores.index_add(0, pred_slot.to(device), node_logp[pred_node.to(device), pred_token.to(device)])
    present = torch.zeros(b * k_max, dtype=torch.bool)
    present[slot_of_first] = True
    return scores.view(b, k_max).masked_fill(~present.view(b, k_max).to(device), float("-inf"))


def _cache_argument_name(decoder) -> str:
    """transformers >= 5.2x names the KV-cache argument `cache` (`past_key_values` is deprecated); older: the latter."""
    return "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"


def choice_log_distribution(scores: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log pi(k | x) = log_softmax(s / T) over the present candidates (-inf stays -inf); T = 0 is read as T = 1."""
    return torch.log_softmax(scores / (temperature or 1.0), dim=-1)
