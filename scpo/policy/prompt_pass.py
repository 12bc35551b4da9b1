"""The scorer's first pass (`scpo.policy.scoring`): right-padded prompts through the decoder, keeping every layer's
KV cache and the final hidden state at each prompt's last token.

What the candidates need of a prompt is every layer's keys and values at every prompt position, and the output at
its last position only (it predicts each candidate's first token). For pre-norm Llama-style layers (Llama, SmolLM2,
Qwen2) the last layer is therefore computed at the last token only (`scpo.policy.last_layer.last_layer_at`: keys and
values at every position; about 40 % of a 2-layer prompt pass is skipped). Any other decoder runs its full forward
pass.
"""

from __future__ import annotations

import torch

from scpo.policy.last_layer import last_layer_at, pre_norm_decoder

__all__ = ["prompt_states"]


def prompt_states(decoder, prompt: torch.Tensor, lengths: torch.Tensor, new_cache):
    """-> (cache, last [B, H]) for right-padded `prompt` [B, P] whose rows hold `lengths` tokens: the KV cache of
    every layer over all P positions and the final (normed) hidden state at each row's last token. `new_cache()`
    makes the empty cache the shortcut fills (transformers' DynamicCache)."""
    b, width = prompt.shape
    device = prompt.device
    positions = torch.arange(width, device=device)[None].expand(b, width)
    last_at = (lengths - 1).to(device)
    rows = torch.arange(b, device=device)
    if not pre_norm_decoder(decoder):
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
    visible = (torch.arange(width, device=device)[None] < lengths.to(device)[:, None])[:, None, None]  # [B, 1, 1, P]
    h = last_layer_at(final, hidden, (cos, sin), last_at[:, None], visible, cache=cache)
    return cache, decoder.norm(h)[:, 0]
