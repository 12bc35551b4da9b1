"""`train.device` resolution and mixed precision: float32 weights, forward passes in `policy.dtype`."""

from __future__ import annotations

import pytest
import torch

from scpo.policy.placement import compute_precision, resolve_device


def test_auto_device_follows_torch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")


def test_cuda_without_a_gpu_names_the_setting(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"train.device='cuda'.*no GPU"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match=r"train.device='tpu'"):
        resolve_device("tpu")
    with pytest.raises(ValueError, match=r"policy.dtype='int8'"):
        compute_precision(torch.device("cpu"), "int8")


def _adamw_step(layer: torch.nn.Linear, precision) -> None:
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-6, weight_decay=0.0)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1)).to(layer.weight.dtype)
    with precision:
        y = layer(x)
    y.float().pow(2).mean().backward()
    opt.step()


def test_a_1e6_step_moves_float32_weights_under_autocast_but_not_bfloat16_weights():
    """Why the trained weights stay float32: AdamW moves each weight by ~lr, below bfloat16's resolution."""
    torch.manual_seed(0)
    mixed = torch.nn.Linear(16, 16)
    half = torch.nn.Linear(16, 16).to(torch.bfloat16)
    before_mixed, before_half = mixed.weight.detach().clone(), half.weight.detach().clone()

    precision = compute_precision(torch.device("cpu"), "bfloat16")
    with precision:
        assert mixed(torch.randn(2, 16)).dtype == torch.bfloat16  # forward in the compute dtype ...
    _adamw_step(mixed, compute_precision(torch.device("cpu"), "bfloat16"))
    _adamw_step(half, compute_precision(torch.device("cpu"), "float32"))

    assert mixed.weight.dtype == torch.float32  # ... over float32 weights, which moved by ~1e-6 each
    assert float((mixed.weight.detach() - before_mixed).abs().max()) == pytest.approx(1e-6, rel=0.05)
    assert torch.equal(half.weight, before_half)  # the same step is lost in bfloat16 weights
