"""A pre-norm Llama-style decoder's last layer computed only at the positions whose output is read.

The next layer needs nothing of the last one, so a position's last-layer output matters only where logits are taken.
Every position still contributes its keys and values. At query positions `at` [B, n]:

    x = RMSNorm_in(h),  K, V = rope(W_k x), W_v x  (every position),  q = rope(W_q x_at)
    h'_at = h_at + W_o softmax(q K^T / sqrt(d) + mask) V,        out = h'_at + MLP(RMSNorm_post(h'_at))

the same arithmetic as the model's own layer (`LlamaDecoderLayer`, `Qwen2DecoderLayer`) at those positions; the
model's final norm is left to the caller. Used by the scorer's prompt pass (`scpo.policy.prompt_pass`: the last
prompt token) and by the answers' log-probs of the update and SFT (`scpo.policy.logprobs`: the answer positions).
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

__all__ = ["PRE_NORM_LAYERS", "pre_norm_decoder", "last_layer_at"]

PRE_NORM_LAYERS = ("LlamaDecoderLayer", "Qwen2DecoderLayer")  # residual + attention, residual + MLP, RMSNorm before


def pre_norm_decoder(decoder) -> bool:
    """Whether `decoder`'s layers are the pre-norm Llama-style layers `last_layer_at` reproduces (no sliding window,
    no attention dropout, SDPA or eager attention)."""
    layers = getattr(decoder, "layers", None)
    config = getattr(decoder, "config", None)
    return (
        layers is not None
        and len(layers) > 0
        and all(type(layer).__name__ in PRE_NORM_LAYERS for layer in layers)
        and not getattr(config, "use_sliding_window", False)
        and not getattr(config, "attention_dropout", 0.0)
        and getattr(config, "_attn_implementation", "sdpa") in ("sdpa", "eager")
    )


def last_layer_at(
    layer, hidden: torch.Tensor, position_embeddings, at: torch.Tensor, visible: torch.Tensor, cache=None
):
    """-> [B, n, H]: `layer`'s output at positions `at` [B, n] of `hidden` [B, T, H] (what enters the layer).

    `position_embeddings`: the model's (cos, sin) [B, T, d] for all T positions; `visible` [B, 1, n, T] bool: which
    keys each query attends to; `cache`: a KV cache that receives this layer's keys and values (all T positions)."""
    attn = layer.self_attn
    rotate_half = sys.modules[type(attn).__module__].rotate_half  # the model's own rope: x cos + rotate_half(x) sin
    cos, sin = position_embeddings
    b, width, _ = hidden.shape
    n = at.shape[1]
    rows = torch.arange(b, device=hidden.device)[:, None]
    head_dim = attn.head_dim
    x = layer.input_layernorm(hidden)
    keys = attn.k_proj(x).view(b, width, -1, head_dim).transpose(1, 2)
    values = attn.v_proj(x).view(b, width, -1, head_dim).transpose(1, 2)
    query = attn.q_proj(x[rows, at]).view(b, n, -1, head_dim).transpose(1, 2)
    keys = keys * cos[:, None] + rotate_half(keys) * sin[:, None]
    cos_q, sin_q = cos[rows, at][:, None], sin[rows, at][:, None]
    query = query * cos_q + rotate_half(query) * sin_q
    if cache is not None:
        keys, values = cache.update(keys, values, attn.layer_idx)
    groups = query.shape[1] // keys.shape[1]  # grouped-query attention: each key/value head serves `groups` queries
    keys, values = keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)
    heads = F.scaled_dot_product_attention(query, keys, values, attn_mask=visible, scale=attn.scaling)
    h = hidden[rows, at] + attn.o_proj(heads.transpose(1, 2).reshape(b, n, -1))
    return h + layer.mlp(layer.post_attention_layernorm(h))
