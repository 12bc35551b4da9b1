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


# ------------------------------------------------------------------------------------ autocast scoped to each forward
def _fresh_context_forward(model, x: torch.Tensor, dtype=torch.bfloat16) -> torch.Tensor:
    """`model(x)` as a fresh autocast block computes it from the current weights: a copy of the model (new weight
    tensors, which no weight-cast cache holds) run under a new autocast block, its own forward wrapper bypassed."""
    import copy

    clone = copy.deepcopy(model)
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
        return type(clone).forward(clone, x)


def test_autocast_each_forward_sees_every_optimizer_step():
    from scpo.policy.placement import autocast_each_forward

    torch.manual_seed(0)
    layer = autocast_each_forward(torch.nn.Linear(16, 16), torch.device("cpu"), "bfloat16")
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-2)
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    before = layer(x).detach()
    assert before.dtype == torch.bfloat16
    for _ in range(3):
        opt.zero_grad()
        layer(x).float().pow(2).mean().backward()
        opt.step()
    after = layer(x).detach()
    assert not torch.equal(after, before)  # the steps show ...
    assert torch.equal(after, _fresh_context_forward(layer, x))  # ... exactly as a fresh autocast block sees them


def test_autocast_each_forward_leaves_float32_alone_and_refuses_a_second_wrap():
    from scpo.policy.placement import autocast_each_forward, forward_precision

    plain = torch.nn.Linear(4, 4)
    assert autocast_each_forward(plain, torch.device("cpu"), "float32").forward.__func__ is torch.nn.Linear.forward
    with forward_precision(plain):
        assert plain(torch.randn(1, 4)).dtype == torch.float32
    mixed = autocast_each_forward(torch.nn.Linear(4, 4), torch.device("cpu"), "bfloat16")
    with pytest.raises(ValueError, match="already runs its forward passes under"):
        autocast_each_forward(mixed, torch.device("cpu"), "bfloat16")


def _bf16_corridor_cfg(dtype: str, **extra):
    from scpo.config import load_config

    from helpers.runs import CORRIDOR

    return load_config(
        "params.yaml",
        profile="smoke",
        overrides={**CORRIDOR, "policy.dtype": dtype, "train.torch_threads": 1, **extra},
    )


def test_the_trainers_forward_after_updates_equals_a_fresh_context(tmp_path, monkeypatch):
    """Inside the RL loop, after each iteration's optimizer steps, a bfloat16 forward of the trained model gives what
    a fresh autocast block gives with the current weights (one autocast block around the loop would serve the first
    forward's weight casts for the whole run)."""
    import scpo.train.trainer as runner
    from scpo.train.run import run_training

    checks = []
    real_update = runner.ppo_update

    def update_then_probe(model, *args, **kwargs):
        out = real_update(model, *args, **kwargs)
        x = torch.tensor([[3, 5, 7, 9, 11, 13]])
        with torch.no_grad():
            in_loop = model(input_ids=x).logits
        checks.append((out["n_updates"], torch.equal(in_loop, _fresh_context_forward(model, x).logits)))
        return out

    monkeypatch.setattr(runner, "ppo_update", update_then_probe)
    cfg = _bf16_corridor_cfg("bfloat16", **{"train.iterations": 3})
    run_training(cfg, stage="rl", out_dir=tmp_path / "run")
    assert len(checks) == 3 and all(n > 0 for n, _ in checks)
    assert all(same for _, same in checks), checks


def test_sft_in_bfloat16_lowers_the_loss_as_float32_does(tmp_path):
    """Behaviour cloning of the tiny policy (corridor demos, 24 optimizer steps) in bfloat16 autocast ends near the
    float32 run's loss; with stale weight casts it stayed at the first epoch's loss."""
    from scpo.train.run import run_training

    sft = {"train.sft.n_demos": 24, "train.sft.epochs": 6, "train.sft.batch_size": 8}
    ratios = {}
    for dtype in ("float32", "bfloat16"):
        bc = run_training(_bf16_corridor_cfg(dtype, **sft), stage="sft", out_dir=tmp_path / dtype)["bc"]
        ratios[dtype] = bc["loss_last_epoch"] / bc["loss_first_epoch"]
    assert ratios["float32"] < 0.6, ratios
    assert ratios["bfloat16"] < 0.6 and abs(ratios["bfloat16"] - ratios["float32"]) < 0.15, ratios
