"""Qwen2 models of the paper's architecture, built locally with random weights (no download).

`qwen2.5-1.5b` is Qwen2.5-1.5B-Instruct's exact configuration (its config.json: 28 layers, hidden 1536, MLP 8960,
12 query / 2 key-value heads with q/k/v biases, vocabulary 151,936, tied embeddings, RoPE theta 1e6, RMSNorm eps 1e-6);
`qwen2-small` keeps the architecture and the vocabulary with 2 narrow layers, for CPU checks; `qwen2-cpu` (4 layers
of width 512, 8 query / 2 key-value heads) is the memory plan's CPU measurement (`benchmarks/memory_plan.py`). The
outputs are meaningless; what they measure is the paper architecture's path through vLLM (fused q/k/v with biases, tied
output layer, its weight sync) and its real cost per token and per iteration. The tokenizer is SmolLM2's (49,152
tokens, every id valid in the larger vocabulary; ids above it decode to nothing), with its chat template. Checks that
need sensible text use SmolLM2 itself (`scpo.policy.smollm2`).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["QWEN25_15B", "SHAPES", "qwen2_config", "build_random_qwen2"]

QWEN25_15B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "max_window_layers": 21,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "use_sliding_window": False,
    "tie_word_embeddings": True,
    "vocab_size": 151936,
    "initializer_range": 0.02,
    "use_cache": True,
    "torch_dtype": "bfloat16",
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
SHAPES = {
    "qwen2.5-1.5b": {},
    "qwen2.5-7b": {  # Qwen2.5-7B-Instruct's config.json (the memory plan's 7B numbers; never built here)
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "max_window_layers": 28,
        "tie_word_embeddings": False,
        "vocab_size": 152064,
    },
    "qwen2-small": {
        "hidden_size": 128,
        "intermediate_size": 384,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_window_layers": 2,
    },
    "qwen2-cpu": {
        "hidden_size": 512,
        "intermediate_size": 1536,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "max_window_layers": 4,
    },
}


def qwen2_config(shape: str = "qwen2.5-1.5b", **tokens):
    """The `Qwen2Config` of `shape`; `tokens` (bos/eos/pad_token_id) replace Qwen's special-token ids."""
    from transformers import Qwen2Config

    if shape not in SHAPES:
        raise ValueError(f"shape={shape!r} is not one of {sorted(SHAPES)}")
    values = {**QWEN25_15B, **SHAPES[shape], **tokens}
    values.pop("architectures"), values.pop("model_type")
    return Qwen2Config(**values)


def build_random_qwen2(
    out_dir: str | Path,
    tokenizer_dir: str | Path,
    shape: str = "qwen2.5-1.5b",
    seed: int = 0,
    dtype: str = "bfloat16",
    device: str = "cpu",
) -> Path:
    """Write a randomly initialised Qwen2 of `shape` (safetensors in `dtype`) with the tokenizer of `tokenizer_dir` to
    `out_dir`, once (an existing complete folder is returned as it is). Built on `device` (cuda: seconds for 1.5B)."""
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    out = Path(out_dir)
    if (out / "model.safetensors").exists() or (out / "model.safetensors.index.json").exists():
        return out
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    config = qwen2_config(
        shape, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=pad
    )
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    model = model.to(getattr(torch, dtype))
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / "policy.json").write_text(json.dumps({"profile": f"random-{shape}", "chat": True}, indent=2))
    tmp.replace(out)
    return out
