"""The scorer's first pass (`scpo.policy.scoring`): right-padded prompts through the decoder, keeping every layer's
KV cache and the final hidden state at each prompt's last token.

What the candidates need of a prompt is every layer's keys and values at every prompt position, and the output at
its last position only (it predicts each candidate's first token). The last layer's queries, attention, output
projection and MLP at the other positions feed nothing. For pre-norm Llama-style layers (Llama, SmolLM2, Qwen2) the
last layer is therefore computed here with its own modules: keys and values at every position, the rest at the last
token only,

    x = RMSNorm_in(h),  K, V = rope(W_k x), W_v x  (all positions),  q = rope(W_q x_last)
    h'_last = h_last + W_o softmax(q K^T / sqrt(d) + mask) V,        out = RMSNorm(h'_last + MLP(RMSNorm_post(h'_last)))

the same arithmetic as the model's own layer at that position (about 40 % of a 2-layer prompt pass is skipped). Any
other decoder runs its full forward pass.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

__all__ = ["prompt_states", "last_layer_at_last_token"]

_PRE_NORM_LAYERS = ("LlamaDecoderLayer", "Qwen2DecoderLayer")  # residual + attention, residual + MLP, RMSNorm before


def last_layer_at_last_token(decoder) -> bool:
    """Whether `decoder`'s layers are the pre-norm Llama-style layers the shortcut reproduces (no sliding window, no
    attention dropout, SDPA or eager attention)."""
    layers = getattr(decoder, "layers", None)
    config = getattr(decoder, "config", None)
    return (
        layers is not None
        and len(layers) > 0
        and all(type(layer).__name__ in _PRE_NORM_LAYERS for layer in layers)
        and not getattr(config, "use_sliding_window", False)
        and not getattr(config, "attention_dropout", 0.0)
        and getattr(config, "_attn_implementation", "sdpa") in ("sdpa", "eager")
    )


def prompt_states(decoder, prompt: torch.Tensor, lengths: torch.Tensor, new_cache):
    """-> (cache, last [B, H]) for right-padded `prompt` [B, P] whose rows hold `lengths` tokens: the KV cache of
    every layer over all P positions and the final (normed) hidden state at each row's last token. `new_cache()`
    makes the empty cache the shortcut fills (transformers' DynamicCache)."""
    b, width = prompt.shape
    device = prompt.device
    positions = torch.arange(width, device=device)[None].expand(b, width)
    last_at = (lengths - 1).to(device)
    rows = torch.arange(b, device=device)
    if not last_layer_at_last_token(decoder):
        # right-padded prompts need no mask: under causal attention a real token sees only earlier (real) tokens
        out = decoder(input_ids=prompt, position_ids=positions, use_cache=True)
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        return cache, out.last_hidden_state[rows, last_at]
    cache = new_cache()
    hidden = decoder.embed_tokens(prompt)
    cos, sin = decoder.rotary_emb(hidden, position_ids=positions)
    *early, final = decoder.layers
    for layer in early:  # attention_mask None: causal attention (SDPA's is_causal)
        hidden = layer(
            hidden,
            attention_mask=None,
            position_ids=positions,
            position_embeddings=(cos, sin),
            cache=cache,
            use_cache=True,
        )
    attn = final.self_attn
    rotate_half = sys.modules[type(attn).__module__].rotate_half  # the model's own rope: x cos + rotate_half(x) sin
    head_dim = attn.head_dim
    x = final.input_layernorm(hidden)
    keys = attn.k_proj(x).view(b, width, -1, head_dim).transpose(1, 2)
    values = attn.v_proj(x).view(b, width, -1, head_dim).transpose(1, 2)
    query = attn.q_proj(x[rows, last_at][:, None]).view(b, 1, -1, head_dim).transpose(1, 2)
    keys = keys * cos[:, None] + rotate_half(keys) * sin[:, None]
    cos_q, sin_q = cos[rows, last_at][:, None, None], sin[rows, last_at][:, None, None]
    query = query * cos_q + rotate_half(query) * sin_q
    keys, values = cache.update(keys, values, attn.layer_idx)
    groups = query.shape[1] // keys.shape[1]  # grouped-query attention: each key/value head serves `groups` queries
    keys, values = keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)
    visible = (torch.arange(width, device=device)[None] < lengths.to(device)[:, None])[:, None, None]  # [B, 1, 1, P]
    heads = F.scaled_dot_product_attention(query, keys, values, attn_mask=visible, scale=attn.scaling)
    h = hidden[rows, last_at][:, None] + attn.o_proj(heads.transpose(1, 2).reshape(b, 1, -1))
    h = h + final.mlp(final.post_attention_layernorm(h))
    return cache, decoder.norm(h)[:, 0]
