"""The RL objective on tokens: clipped surrogate, low-variance KL, entropy, and log-prob recomputation."""

from __future__ import annotations

import math

import pytest
import torch

from scpo.policy.logprobs import pack, response_logprobs
from scpo.train.loss import clipped_surrogate, low_var_kl, masked_mean, policy_loss


def test_clipped_surrogate_matches_hand_computed_values():
    # ratios 1.5 (A=+1: clipped to 1.2), 0.5 (A=+1: unclipped 0.5 is the min),
    #        1.5 (A=-1: -1.5 is the min), 0.5 (A=-1: clip 0.8)
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.5, 0.5]]))
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.ones(1, 4)
    loss, clipped = clipped_surrogate(logp, old, adv, mask, clip_ratio=0.2)
    assert torch.allclose(loss, torch.tensor([[-1.2, -0.5, 1.5, 0.8]]), atol=1e-6)
    assert clipped.tolist() == [[1.0, 0.0, 0.0, 1.0]]


def test_step_advantage_broadcasts_to_tokens_and_mask_drops_padding():
    logp = torch.zeros(2, 3)
    adv = torch.tensor([2.0, -1.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    loss, _ = clipped_surrogate(logp, logp, adv, mask, clip_ratio=0.2)
    assert loss.tolist() == [[-2.0, -2.0, 0.0], [1.0, 0.0, 0.0]]
    assert masked_mean(loss, mask).item() == pytest.approx((-2 - 2 + 1) / 3)


def test_low_var_kl_is_k3_and_zero_at_equality():
    logp = torch.tensor([math.log(0.5), math.log(0.2)])
    ref = torch.tensor([math.log(0.25), math.log(0.2)])
    # k3 = exp(ref - logp) - (ref - logp) - 1 = 0.5 - ln(0.5) - 1
    assert low_var_kl(logp, ref)[0].item() == pytest.approx(0.5 - math.log(0.5) - 1, abs=1e-6)
    assert low_var_kl(logp, ref)[1].item() == pytest.approx(0.0, abs=1e-7)


def test_policy_loss_adds_kl_and_subtracts_entropy():
    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    old = logp.clone()
    ref = torch.log(torch.tensor([[0.25, 0.5]]))
    entropy = torch.tensor([[1.0, 3.0]])
    mask = torch.ones(1, 2)
    adv = torch.tensor([1.0])
    loss, stats = policy_loss(logp, old, ref, adv, mask, entropy, clip_ratio=0.2, kl_coef=0.1, entropy_coef=0.01)
    kl = (0.5 - math.log(0.5) - 1 + 0.0) / 2
    assert stats["pg"] == pytest.approx(-1.0)
    assert stats["kl"] == pytest.approx(kl, abs=1e-6)
    assert stats["entropy"] == pytest.approx(2.0)
    assert loss.item() == pytest.approx(-1.0 + 0.1 * kl - 0.01 * 2.0, abs=1e-6)


def test_pack_left_pads_prompts_and_right_pads_responses():
    ids, att, resp, mask = pack([[5, 6], [7]], [[1], [2, 3]], pad_id=0)
    assert ids.tolist() == [[5, 6, 1, 0], [0, 7, 2, 3]]
    assert att.tolist() == [[1, 1, 1, 0], [0, 1, 1, 1]]
    assert resp.tolist() == [[1, 0], [2, 3]] and mask.tolist() == [[1.0, 0.0], [1.0, 1.0]]


def test_response_logprobs_equal_unpadded_forward():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=20,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            pad_token_id=0,
        )
    ).eval()
    prompts, responses = [[3, 4, 5, 6], [7, 8]], [[9, 10], [11, 12, 13]]
    with torch.no_grad():
        logp, mask, ent = response_logprobs(model, prompts, responses, pad_id=0, temperature=2.0, with_entropy=True)
        for i, (p, r) in enumerate(zip(prompts, responses)):
            full = torch.log_softmax(model(torch.tensor([p + r])).logits[0] / 2.0, -1)
            expect = [full[len(p) - 1 + k, tok].item() for k, tok in enumerate(r)]
            assert logp[i, : len(r)].tolist() == pytest.approx(expect, abs=1e-5)
            assert mask[i].sum().item() == len(r)
    assert (ent[mask > 0] > 0).all() and (ent[mask == 0] == 0).all()


def test_dual_clip_bounds_negative_advantage_tokens_by_hand():
    """Dual clip (c = 3, verl's clip_ratio_c): where A < 0 the loss is min(max(-rA, -clip(r)A), -cA).
    r = 5, A = -1: plain loss 5, dual 3 (bounded); r = 2, A = -1: 2 < 3, unchanged; r = 5, A = +1: positive advantages
    are untouched (-1.2); r = 0.5, A = -2: max(1.0, 1.6) = 1.6 < 6, unchanged."""
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[5.0, 2.0, 5.0, 0.5]]))
    adv = torch.tensor([[-1.0, -1.0, 1.0, -2.0]])
    mask = torch.ones(1, 4)
    plain, _ = clipped_surrogate(logp, old, adv, mask, clip_ratio=0.2)
    assert torch.allclose(plain, torch.tensor([[5.0, 2.0, -1.2, 1.6]]), atol=1e-6)
    dual, clipped, lower = clipped_surrogate(logp, old, adv, mask, clip_ratio=0.2, dual_clip_c=3.0, with_lower=True)
    assert torch.allclose(dual, torch.tensor([[3.0, 2.0, -1.2, 1.6]]), atol=1e-6)
    assert lower.tolist() == [[1.0, 0.0, 0.0, 0.0]] and clipped.tolist() == [[0.0, 0.0, 1.0, 1.0]]
    loss, stats = policy_loss(
        logp[:, :1],
        old[:, :1],
        None,
        adv[0, :1],
        mask[:, :1],
        None,
        clip_ratio=0.2,
        kl_coef=0.0,
        entropy_coef=0.0,
        dual_clip_c=3.0,
    )
    assert loss.item() == pytest.approx(3.0) and stats["clipfrac_lower"] == 1.0
    with pytest.raises(ValueError, match="dual_clip_c=1.0 must be > 1"):
        clipped_surrogate(logp, old, adv, mask, clip_ratio=0.2, dual_clip_c=1.0)


def test_dual_clipped_tokens_give_no_gradient():
    """In the dual-clipped region the loss is the constant -cA: its gradient with respect to the log-prob is 0, while
    without dual clip it is -rA = 5 (the token's probability keeps being pushed down at full strength)."""
    for c, grad in ((3.0, 0.0), (None, 5.0)):
        logp = torch.log(torch.tensor([[5.0]])).requires_grad_(True)
        loss, _ = clipped_surrogate(logp, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1), 0.2, c)
        loss.sum().backward()
        assert logp.grad.item() == pytest.approx(grad, abs=1e-6)
