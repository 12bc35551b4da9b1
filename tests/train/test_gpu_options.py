"""The gpu profile's training options on the tiny model: the LoRA KL reference is the adapter disabled (the frozen
base, no second model), a LoRA policy is saved merged without touching or copying the trained model, gradient
checkpointing leaves the gradient as it was, and the truncated importance-sampling correction weights each token's
policy-gradient loss by min(exp(old - sampler), cap) and needs the sampler's log-probs."""

from __future__ import annotations

import pytest
import torch

from scpo.config import ConfigError, load_config
from scpo.policy import Policy, load_policy
from scpo.policy.profiles import enable_gradient_checkpointing, reference_for, trained_dtype, with_lora
from scpo.policy.tiny import build_tiny_model, train_tokenizer
from scpo.train.loss import policy_loss
from scpo.train.update import StepSample, batched_logprobs, ppo_update, reference_logprobs

CORPUS = ["go east go west open door look", "take key from table, open door with key"] * 4


def _tiny(seed: int = 0):
    tok = train_tokenizer(CORPUS, vocab_size=280)
    return tok, build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=seed)


def _samples(tok, n: int = 3, sampler_shift: float | None = None):
    prompt = tok("room 1 of 3", add_special_tokens=False)["input_ids"]
    answer = tok("<action>go east</action>", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    return [StepSample(prompt, answer, 1.0 - i) for i in range(n)]


def _adapted(model):
    lora = with_lora(model, r=2, alpha=4)
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.fill_(0.05)  # adapters that change the output
    return lora


def test_lora_reference_is_the_adapter_disabled(tmp_path):
    """reference_for gives the trained peft model itself when its base is the start; its reference log-probs are the
    base model's exactly, and differ from the adapted model's. Starting from a checkpoint, a separate frozen model."""
    tok, base = _tiny()
    base_lp = batched_logprobs(base, _samples(tok), tok.pad_token_id, 8)
    policy = Policy(model=_adapted(base), tokenizer=tok, profile="tiny")
    cfg = load_config(None, overrides={"policy.lora": True}).policy
    reference = reference_for(policy, tmp_path, same_start=True, cfg=cfg)
    assert reference is policy.model
    ref_lp = reference_logprobs(policy.model, reference, _samples(tok), tok.pad_token_id, 8)
    mine = batched_logprobs(policy.model, _samples(tok), tok.pad_token_id, 8)
    assert all(torch.equal(a, b) for a, b in zip(ref_lp, base_lp))
    assert not all(torch.allclose(a, b) for a, b in zip(mine, base_lp))
    policy.save(tmp_path / "start")
    separate = reference_for(policy, tmp_path / "start", same_start=False, cfg=cfg)
    assert separate is not policy.model and not any(p.requires_grad for p in separate.parameters())
    assert trained_dtype(cfg) == "float32" and trained_dtype(cfg.model_copy(update={"dtype": "bfloat16"})) == "bfloat16"


def test_lora_policy_saves_merged_without_changing_or_copying_the_model(tmp_path, monkeypatch):
    import copy

    tok, base = _tiny()
    policy = Policy(model=_adapted(base), tokenizer=tok, profile="tiny")
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    real = copy.deepcopy

    def no_model_copies(obj, *args, **kwargs):
        if isinstance(obj, torch.nn.Module):
            pytest.fail("Policy.save deep-copied the model")
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(copy, "deepcopy", no_model_copies)
    policy.save(tmp_path / "m")
    monkeypatch.undo()
    assert all(torch.equal(before[n], p) for n, p in policy.model.named_parameters())  # adapters still separate
    saved = load_policy(tmp_path / "m").model
    merged = copy.deepcopy(policy.model).merge_and_unload()
    ids = torch.tensor([tok("go east open door", add_special_tokens=False)["input_ids"]])
    assert torch.allclose(saved(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-6)


def test_gradient_checkpointing_leaves_the_gradient_unchanged():
    tok, plain = _tiny()
    _, ckpt = _tiny()
    enable_gradient_checkpointing(ckpt)
    assert ckpt.is_activation_checkpointing and not plain.is_activation_checkpointing
    ids = torch.tensor([tok("go east go west open door", add_special_tokens=False)["input_ids"]])
    for model in (plain, ckpt):
        model.train()
        model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), ckpt.named_parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-6), name
    gpu = load_config("params.yaml", profile="gpu")
    assert gpu.train.gradient_checkpointing and not load_config("params.yaml").train.gradient_checkpointing
    # a LoRA model on a bfloat16 base (policy.lora), checkpointed and under autocast: float32 adapters get gradients
    from scpo.policy.placement import autocast_each_forward

    lora = with_lora(_tiny()[1].to(torch.bfloat16), r=2, alpha=4)
    autocast_each_forward(lora, torch.device("cpu"), "bfloat16")
    enable_gradient_checkpointing(lora)
    lora.train()
    lora(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    adapters = [p for n, p in lora.named_parameters() if p.requires_grad]
    assert adapters and all(p.dtype == torch.float32 and p.grad is not None for p in adapters)


def test_tis_weights_each_tokens_policy_gradient_by_the_truncated_ratio():
    """w = min(exp(old - sampler), cap): equal log-probs give w = 1 (the plain loss); a sampler 3 nats below the
    trainer gives exp(3) capped at 2, doubling the policy-gradient term; the weight carries no gradient."""
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    old, mask, adv = logp.detach().clone(), torch.ones(1, 2), torch.tensor([1.0])
    kw = {"clip_ratio": 0.2, "kl_coef": 0.0, "entropy_coef": 0.0}
    plain, _ = policy_loss(logp, old, None, adv, mask, None, **kw)
    ones, _ = policy_loss(logp, old, None, adv, mask, None, is_weight=torch.ones(1, 2), **kw)
    capped = torch.exp(old - (old - 3.0)).clamp(max=2.0)
    doubled, _ = policy_loss(logp, old, None, adv, mask, None, is_weight=capped, **kw)
    assert torch.equal(plain, ones) and torch.allclose(doubled, 2 * plain)


def test_tis_in_the_update_needs_the_samplers_logprobs_and_the_vllm_engine():
    tok, model = _tiny()
    train = load_config(None, overrides={"train.rollout_correction": "tis", "rollout.engine": "vllm",
                                         "policy.profile": "x", "rollout.action_choice": "generate"}).train  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with pytest.raises(ValueError, match="rollout_correction=tis needs the sampler's token log-probs, which 3 of 3"):
        ppo_update(model, None, opt, _samples(tok), pad_id=tok.pad_token_id, train_cfg=train, progress=False)
    samples = _samples(tok)
    old = batched_logprobs(model, samples, tok.pad_token_id, 8)
    for s, lp in zip(samples, old):
        s.sampler_logprobs = lp.tolist()  # the sampler agreed with the trainer: weight 1
    stats = ppo_update(model, None, opt, samples, pad_id=tok.pad_token_id, train_cfg=train, progress=False)
    assert stats["rollout_is_weight"] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ConfigError, match="rollout_correction='tis' weights by the sampler's log-probs"):
        load_config(None, overrides={"train.rollout_correction": "tis"})
