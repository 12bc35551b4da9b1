"""The trainer's weights as vLLM takes them, and an exact comparison of vLLM's weights with the trainer's after a sync.

    weights = trainer_weights(model)                  # name -> tensor on demand; LoRA merged out of place
    llm_model.load_weights(cast_weights(weights.items(), torch.bfloat16, device))
    report = compare_with_trainer(llm_model, model, torch.bfloat16)   # max |diff|, NaNs, what could not be matched

Names are the checkpoint's (Hugging Face) names, the form vLLM's `load_weights` expects, as TRL's colocate weight sync
sends them (`trl.generation.vllm_generation.VLLMGeneration._iter_named_params`: `named_parameters()`, so a tied
`lm_head.weight` is not sent; PEFT's `base_model.model.` prefix and `.base_layer` removed, adapter tensors left out).
A LoRA layer's weight is sent merged out of place (`scpo.policy.merged_weights`): the base weights are never merged in
place, so a bfloat16 base is not rounded by a merge / unmerge per sync (TRL merges and unmerges in place), and no merged
copy of the model is held.

vLLM fuses some projections: a parameter named by a key of the model's `packed_modules_mapping` (Llama, Qwen2:
`qkv_proj` <- q/k/v_proj, `gate_up_proj` <- gate/up_proj) holds its parts concatenated along dim 0 (one GPU, no tensor
parallelism). The comparison rebuilds that from the trainer's tensors cast to vLLM's dtype, so a correct sync gives a
difference of exactly 0. vLLM's CPU backend moves linear weights into oneDNN kernels and leaves an empty parameter; such
a weight is read back through the kernel itself: x = I (identity) gives x W^T = W^T exactly (each output is one product
by 1 plus products by 0). Written here because neither vLLM nor TRL offers a check of the synced weights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import torch

from scpo.policy.merged_weights import named_trainer_tensors, trainer_weights

__all__ = [
    "trainer_weights",
    "named_trainer_tensors",
    "cast_weights",
    "vllm_tensors",
    "compare_with_trainer",
    "vllm_model_dtype",
]


def cast_weights(
    named: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype, device: torch.device | str
) -> Iterator[tuple[str, torch.Tensor]]:
    """Detached copies in vLLM's dtype on vLLM's device, one at a time (a 1.5B model is not copied whole at once)."""
    for name, param in named:
        with torch.no_grad():  # per tensor: a no_grad block around a yield would hold for the consumer too
            tensor = param.detach().to(device=device, dtype=dtype)
        yield name, tensor


def vllm_model_dtype(llm_model, fallback: torch.dtype = torch.float32) -> torch.dtype:
    """The dtype of vLLM's weights: that of its first non-empty floating-point parameter."""
    for p in llm_model.parameters():
        if p.numel() and p.is_floating_point():
            return p.dtype
    return fallback


def _read_back(module, dtype: torch.dtype) -> torch.Tensor | None:
    """A linear weight vLLM's CPU backend moved into its kernel (`module.cpu_linear`): W = (I W^T)^T, exact."""
    kernel = getattr(module, "cpu_linear", None)
    size = getattr(module, "input_size_per_partition", None) or getattr(module, "input_size", None)
    if kernel is None or size is None:
        return None
    eye = torch.eye(int(size), dtype=dtype)
    with torch.no_grad():
        return kernel(eye, None, None).t().contiguous()


def vllm_tensors(llm_model) -> Iterator[tuple[str, torch.Tensor, bool]]:
    """(name, tensor, read_back) for every parameter of vLLM's model; empty (repacked) ones read back via the kernel."""
    dtype = vllm_model_dtype(llm_model)
    modules = dict(llm_model.named_modules())
    for name, param in llm_model.named_parameters():
        if param.numel() == 0:
            module_name, _, leaf = name.rpartition(".")
            tensor = _read_back(modules.get(module_name), dtype) if leaf == "weight" else None
            yield name, (tensor if tensor is not None else param.detach()), tensor is not None
        else:
            yield name, param.detach(), False


def _expected(
    name: str, mine: dict[str, Callable[[], torch.Tensor]], packed: dict[str, list[str]]
) -> torch.Tensor | None:
    """The trainer tensor (or concatenation of tensors) vLLM's parameter `name` should hold; None if none matches."""
    if name in mine:
        return mine[name]()
    prefix, _, rest = name.rpartition(".")  # "model.layers.0.self_attn.qkv_proj" + "weight"
    owner, _, module = prefix.rpartition(".")
    parts = packed.get(module)
    if parts:
        names = [f"{owner}.{p}.{rest}" if owner else f"{p}.{rest}" for p in parts]
        if all(n in mine for n in names):
            return torch.cat([mine[n]() for n in names], dim=0)
    return None


def compare_with_trainer(llm_model, trainer_model, dtype: torch.dtype | None = None, top: int = 3) -> dict:
    """Compare every parameter of vLLM's model with the trainer's weights cast to vLLM's dtype.

    -> {"max_abs_diff", "nan" (NaN count in vLLM's weights), "tensors", "elements", "read_back" (weights read through
    the CPU kernel), "unmatched" (vLLM parameters no trainer weight maps to), "unused" (trainer weights no vLLM
    parameter took), "largest" ([name, max |diff|] of the `top` largest), "shape_mismatch"}. A correct sync:
    max_abs_diff 0.0, nan 0, nothing unmatched, unused or mismatched. Vocabulary rows vLLM pads the embedding with are
    not compared."""
    dtype = dtype or vllm_model_dtype(llm_model)
    packed = dict(getattr(llm_model, "packed_modules_mapping", {}) or {})
    out = {
        "max_abs_diff": 0.0,
        "nan": 0,
        "tensors": 0,
        "elements": 0,
        "read_back": 0,
        "unmatched": [],
        "unused": [],
        "shape_mismatch": [],
        "largest": [],
    }
    diffs = []
    mine = trainer_weights(trainer_model)
    with torch.no_grad():
        used: set[str] = set()
        for name, theirs, read_back in vllm_tensors(llm_model):
            ref = _expected(name, mine, packed)
            if ref is None:
                out["unmatched"].append(name)
                continue
            used.update(n for n in mine if n == name or _is_part(n, name, packed))
            ref = ref.detach().to(device=theirs.device, dtype=dtype)
            if theirs.shape[0] >= ref.shape[0] and theirs.shape[1:] == ref.shape[1:]:
                theirs = theirs[: ref.shape[0]]  # vLLM pads the vocabulary to a multiple of 64
            if theirs.shape != ref.shape:
                out["shape_mismatch"].append(f"{name}: {tuple(theirs.shape)} vs {tuple(ref.shape)}")
                continue
            out["nan"] += int(torch.isnan(theirs).sum())
            diff = float((theirs.double() - ref.double()).abs().max()) if theirs.numel() else 0.0
            diffs.append((name, diff))
            out["tensors"] += 1
            out["elements"] += theirs.numel()
            out["read_back"] += int(read_back)
        out["unused"] = sorted(set(mine) - used)
    finite = [d for _, d in diffs if d == d]
    out["max_abs_diff"] = max(finite, default=0.0) if len(finite) == len(diffs) else float("nan")
    out["largest"] = [[n, d] for n, d in sorted(diffs, key=lambda x: -(x[1] if x[1] == x[1] else float("inf")))[:top]]
    return out


def _is_part(trainer_name: str, vllm_name: str, packed: dict[str, list[str]]) -> bool:
    prefix, _, rest = vllm_name.rpartition(".")
    owner, _, module = prefix.rpartition(".")
    return any(trainer_name == (f"{owner}.{p}.{rest}" if owner else f"{p}.{rest}") for p in packed.get(module, ()))
