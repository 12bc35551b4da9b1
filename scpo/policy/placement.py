"""Where the policy runs and in which precision: `train.device` and `policy.dtype`.

The trained weights stay float32 and the forward passes run under `torch.autocast` to `policy.dtype` (mixed
precision, as transformers' Trainer does with `bf16=True`): an AdamW step moves a weight by about `lr`, and at the gpu
profile's 1e-6 that is far below a bfloat16 weight's resolution (2^-8 relative, ~1e-4 for a weight of 0.02), so
16-bit weights would not move.
"""

from __future__ import annotations

import contextlib

import torch

from scpo.policy.profiles import torch_dtype

__all__ = ["resolve_device", "compute_precision"]


def resolve_device(name: str) -> torch.device:
    """`train.device`: 'auto' -> cuda when torch sees a GPU, else cpu; 'cuda' without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "train.device='cuda' but torch sees no GPU (torch.cuda.is_available() is False); "
            "use train.device=auto or cpu"
        )
    if name not in ("cpu", "cuda"):
        raise ValueError(f"train.device={name!r} is not one of 'auto', 'cpu', 'cuda'")
    return torch.device(name)


def compute_precision(device: torch.device, dtype: str):
    """A context running forward passes in `dtype` over float32 weights (autocast), or a no-op for float32."""
    compute_dtype = torch_dtype(dtype)  # ValueError naming policy.dtype if unknown
    if compute_dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=compute_dtype)
