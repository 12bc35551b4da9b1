"""A model's weights under their checkpoint names, LoRA merged out of place (the weight sync to vLLM and `Policy.save`).

    weights = trainer_weights(model)      # {name: function returning the tensor}, one tensor at a time on demand

Names are the checkpoint's (Hugging Face) names: `named_parameters()` order and names (a tied `lm_head.weight` appears
once, as the embedding), PEFT's `base_model.model.` prefix and `.base_layer` removed, adapter tensors left out (as TRL's
colocate weight sync names them). A LoRA layer's weight is W + the sum over its active adapters of peft's
`get_delta_weight` (B A x scale), computed into a new tensor: the base weights are never merged in place, so a bfloat16
base is not rounded by a merge / unmerge, and no merged copy of the whole model exists at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

__all__ = ["trainer_weights", "named_trainer_tensors"]


def _lora_layers(model) -> dict[str, object]:
    """{module path: peft LoRA layer} of a peft model (empty for a plain model)."""
    if not hasattr(model, "peft_config"):
        return {}
    from peft.tuners.lora.layer import LoraLayer

    return {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}


def _merged(layer, weight: torch.Tensor) -> torch.Tensor:
    """W + the layer's active adapters' delta (peft's get_delta_weight), as a new tensor; W itself if disabled."""
    out = weight.detach()
    if getattr(layer, "disable_adapters", False) or getattr(layer, "merged", False):
        return out
    for adapter in layer.active_adapters:
        if adapter in getattr(layer, "lora_A", {}):
            out = out + layer.get_delta_weight(adapter).to(out.device)
    return out


def trainer_weights(model) -> dict[str, Callable[[], torch.Tensor]]:
    """{checkpoint name: a function returning that weight, detached}, in `named_parameters()` order; a LoRA layer's
    weight comes merged out of place (module docstring), adapter tensors are left out.

    `named_parameters()` yields a tied parameter once (under its first name, `model.embed_tokens.weight`), so a tied
    `lm_head.weight` is skipped: vLLM ties it itself and would otherwise receive the embedding twice."""
    layers = _lora_layers(model)
    out: dict[str, Callable[[], torch.Tensor]] = {}
    for name, param in model.named_parameters():
        if "lora_" in name or "original_module" in name:
            continue
        module_path, _, leaf = name.rpartition(".")
        owner = module_path.removesuffix(".base_layer")
        clean = (
            name.removeprefix("base_model.model.").replace(".base_layer", "").replace("modules_to_save.default.", "")
        )
        if leaf == "weight" and module_path.endswith(".base_layer") and owner in layers:
            out[clean] = lambda layer=layers[owner], p=param: _merged(layer, p)
        else:
            out[clean] = lambda p=param: p.detach()
    return out


def named_trainer_tensors(model) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of `trainer_weights`, one tensor materialised at a time, under no_grad."""
    for name, get in trainer_weights(model).items():
        with torch.no_grad():  # per tensor: a no_grad block around a yield would hold for the consumer too
            tensor = get()
        yield name, tensor
