"""Answers' token log-probabilities with no padding: a micro-batch's sequences packed into rows (padding-free packing).

Each step's `prompt + answer` tokens are concatenated with others into a row, position ids restarting at 0 for every
sequence and no attention mask: transformers' `DataCollatorWithFlattening` layout. The model reads the packing from
the position ids: `transformers.masking_utils.find_packed_sequence_indices` numbers the sequences (a new one wherever
the position does not grow by 1) and `create_causal_mask` restricts the causal mask to each sequence (a
block-diagonal mask for SDPA and eager attention; flash attention 2 runs its variable-length kernel from the same
position ids). With position ids restarting at 0, each sequence's rotary phases are those of the padded layout (whose
position ids count tokens only), so every logit is that of the padded path, up to floating-point summation order.

Rows (`packed_rows`): first fit in decreasing length into rows of at most C tokens, C the micro-batch's longest
sequence by default, each row one forward pass of batch size 1, so no padding is processed at all. Why not one row
per micro-batch: SDPA with a block-diagonal mask scores every query-key pair of the row, masked ones included, T^2 for
a row of T tokens; 8 sequences of ~1,200 tokens in one row score 3x the padded layout's pairs (`benchmarks/packing.py`),
which at Qwen2.5-1.5B's width costs more than the padding saves. Rows of at most C tokens score sum_r T_r^2 <= C x
(real tokens) pairs, fewer than the padded B W^2 (W = longest prompt + longest answer >= C). A variable-length kernel
(flash attention 2) would score only sum_i L_i^2 / 2 in one row; the locked GPU set has none, so C stays the default.

The answer token k of sequence i (starting at offset o_i of its row) is predicted at position o_i + P_i - 1 + k,
k = 0..R_i-1; only those positions' logits are computed (`logits_to_keep` as an index tensor), and for the pre-norm
Llama-style models of `scpo.policy.last_layer` the last decoder layer runs at those positions only, as in
`scpo.policy.logprobs.answer_logits`. The values are returned in the padded path's layout ([B, R_max] with a mask), so
the loss code does not know which layout computed them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from scpo.policy.last_layer import last_layer_at, pre_norm_decoder
from scpo.policy.placement import forward_precision

__all__ = ["PackedRow", "pack_row", "packed_rows", "packed_answer_logits", "packed_response_logprobs"]

_CAUSAL_LMS = ("LlamaForCausalLM", "Qwen2ForCausalLM")  # as scpo.policy.logprobs: a pre-norm decoder and `lm_head`


@dataclass(frozen=True)
class PackedRow:
    """One packed row: `input_ids`, `position_ids` [1, T]; `at` [n]: the positions whose logits predict the answers'
    tokens, in sequence order; `targets` [n]: those tokens; `mask` [B, R_max] (float): where each answer's tokens go
    in the padded layout (row-major order = the order of `at`)."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    at: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor

    @property
    def tokens(self) -> int:
        return int(self.input_ids.shape[1])


def pack_row(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]]) -> PackedRow:
    """The steps' `prompt + answer` sequences flattened by `DataCollatorWithFlattening` (position ids restarting at 0
    per sequence), with the answer positions and tokens. Every prompt and every answer needs at least one token."""
    from transformers import DataCollatorWithFlattening

    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    if not prompt_ids:
        raise ValueError("nothing to pack: no sequences")
    empty = [i for i, (p, r) in enumerate(zip(prompt_ids, response_ids)) if not p or not r]
    if empty:
        raise ValueError(f"sequence {empty[0]} has an empty prompt or answer: packing needs both")
    flat = DataCollatorWithFlattening(return_tensors="pt", return_position_ids=True)(
        [{"input_ids": list(p) + list(r)} for p, r in zip(prompt_ids, response_ids)]
    )
    prompt_len = torch.tensor([len(p) for p in prompt_ids])
    resp_len = torch.tensor([len(r) for r in response_ids])
    offsets = torch.cumsum(prompt_len + resp_len, 0) - (prompt_len + resp_len)
    first = offsets + prompt_len - 1  # the position predicting each answer's first token
    k = torch.arange(int(resp_len.max()))
    mask = k[None] < resp_len[:, None]
    at = (first[:, None] + k[None])[mask]
    ids = flat["input_ids"][0]
    return PackedRow(flat["input_ids"], flat["position_ids"], at, ids[at + 1], mask.float())


def packed_answer_logits(model, input_ids: torch.Tensor, positions: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
    """-> logits [n, V] at positions `at` [n] of the packed row `input_ids` [1, T] (`positions` [1, T] restarting per
    sequence): the model's forward pass with no attention mask, or, for a pre-norm Llama-style causal LM, the layers
    up to the last one everywhere and the last one at `at` only (`scpo.policy.last_layer`)."""
    decoder = getattr(model, "model", None)
    if type(model).__name__ not in _CAUSAL_LMS or not pre_norm_decoder(decoder):
        return model(input_ids=input_ids, position_ids=positions, logits_to_keep=at, use_cache=False).logits[0]
    from transformers.masking_utils import create_causal_mask

    width = input_ids.shape[1]
    with forward_precision(model):
        hidden = decoder.embed_tokens(input_ids)
        mask = create_causal_mask(
            config=decoder.config, inputs_embeds=hidden, attention_mask=None, cache=None, position_ids=positions
        )
        cos_sin = decoder.rotary_emb(hidden, position_ids=positions)
        *early, final = decoder.layers
        for layer in early:
            hidden = layer(hidden, attention_mask=mask, position_ids=positions, position_embeddings=cos_sin)
        if mask is None:  # one sequence: causal attention
            visible = (torch.arange(width, device=hidden.device)[None] <= at[:, None])[None, None]
        else:
            visible = mask[:, :, at, :]
        h = last_layer_at(final, hidden, cos_sin, at[None], visible)
        return model.lm_head(decoder.norm(h))[0]


def packed_rows(lengths: Sequence[int], capacity: int | None = None) -> list[list[int]]:
    """Indices of `lengths` grouped into rows of at most `capacity` tokens (default: the longest sequence), first fit
    in decreasing length; rows in the order they were opened, each row's indices ascending. A sequence longer than
    `capacity` gets a row of its own."""
    capacity = max(lengths, default=0) if capacity is None else capacity
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        fit = next((r for r, left in enumerate(room) if lengths[i] <= left), None)
        if fit is None:
            rows.append([i])
            room.append(capacity - lengths[i])
        else:
            rows[fit].append(i)
            room[fit] -= lengths[i]
    return [sorted(r) for r in rows]


def packed_response_logprobs(
    model,
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    temperature: float = 1.0,
    with_entropy: bool = False,
    row_tokens: int | None = None,
):
    """`scpo.policy.logprobs.response_logprobs` computed over packed rows, one forward pass each (`packed_rows`: at
    most `row_tokens` tokens a row, default the longest sequence's): (logp [B, R], mask [B, R], entropy [B, R] or
    None), zeros where the mask is 0. Gradients flow unless called under `torch.no_grad()`."""
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    device = next(model.parameters()).device
    lengths = [len(p) + len(r) for p, r in zip(prompt_ids, response_ids)]
    per_sequence: list[tuple[torch.Tensor, torch.Tensor | None]] = [None] * len(lengths)  # type: ignore[list-item]
    for idx in packed_rows(lengths, row_tokens):
        row = pack_row([prompt_ids[i] for i in idx], [response_ids[i] for i in idx])
        ids, positions, at, targets = (t.to(device) for t in (row.input_ids, row.position_ids, row.at, row.targets))
        logits = packed_answer_logits(model, ids, positions, at).float()
        if temperature and temperature != 1.0:
            logits = logits / temperature
        log_probs = torch.log_softmax(logits, dim=-1)
        logp = log_probs.gather(-1, targets[:, None]).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1) if with_entropy else None
        sizes = [len(response_ids[i]) for i in idx]
        logps = logp.split(sizes)
        entropies = entropy.split(sizes) if entropy is not None else [None] * len(idx)
        for i, lp, ent in zip(idx, logps, entropies):
            per_sequence[i] = (lp, ent)
    k = torch.arange(max(len(r) for r in response_ids))
    mask = (k[None] < torch.tensor([len(r) for r in response_ids])[:, None]).float().to(device)
    where = mask.bool()

    def padded(values: list[torch.Tensor]) -> torch.Tensor:  # per sequence -> [B, R], row-major into the mask's ones
        flat = torch.cat(values)
        return torch.zeros(mask.shape, dtype=flat.dtype, device=device).masked_scatter(where, flat)

    logp = padded([v[0] for v in per_sequence])
    entropy = padded([v[1] for v in per_sequence]) if with_entropy else None
    return logp, mask, entropy
