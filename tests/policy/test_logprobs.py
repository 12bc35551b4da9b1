"""Answer log-probs of the update and SFT (scpo.policy.logprobs): the last layer computed at the answer positions only
gives the log-probs and gradients of the model's full forward pass, batched with padding or one row at a time."""

from __future__ import annotations

import pytest
import torch

from scpo.policy.last_layer import pre_norm_decoder
from scpo.policy.logprobs import answer_logits, pack, response_logprobs
from scpo.policy.placement import autocast_each_forward
from scpo.policy.tiny import build_tiny_model, train_tokenizer

TEXT = ["go east go west open door look take apple 1 from table 1 room of cabinet 2 put in on"] * 4


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(TEXT, vocab_size=300)


def _model(tok, arch: str):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1)
    common = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64, "pad_token_id": tok.pad_token_id}
    if arch == "tiny":
        return build_tiny_model(tok, hidden_size=32, layers=2, heads=2, seed=0)
    if arch == "llama_gqa":
        return LlamaForCausalLM(
            LlamaConfig(num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, **common)
        )
    return Qwen2ForCausalLM(Qwen2Config(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, **common))


def _rows(tok, seed: int = 0):
    """Prompts of 3-14 tokens and answers of 1-6 tokens (left and right padding both occur)."""
    g = torch.Generator().manual_seed(seed)
    words = TEXT[0].split()

    def text(lo, hi):
        n = int(torch.randint(lo, hi, (1,), generator=g))
        return " ".join(words[int(i)] for i in torch.randint(0, len(words), (n,), generator=g))

    prompts = [tok(text(3, 12), add_special_tokens=False)["input_ids"] for _ in range(6)]
    answers = [tok(text(1, 5), add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for _ in range(6)]
    return prompts, answers


def _plain_logprobs(model, prompts, answers, pad_id):
    """The model's own forward pass over the same padded batch (what `answer_logits` replaces)."""
    input_ids, attention, resp, mask = pack(prompts, answers, pad_id)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=False)
    logits = out.logits[:, -resp.shape[1] - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, resp[..., None])[..., 0] * mask


@pytest.mark.parametrize("arch", ["tiny", "llama_gqa", "qwen2"])
def test_answer_logprobs_and_gradients_equal_the_full_forward_pass(tok, arch):
    model = _model(tok, arch).train()  # training mode, as in the update (no dropout in these models)
    assert pre_norm_decoder(model.model)
    prompts, answers = _rows(tok)
    weights = torch.linspace(-1.0, 2.0, len(prompts))[:, None]

    logp, mask, _ = response_logprobs(model, prompts, answers, tok.pad_token_id)
    (weights * logp).sum().backward()
    fast = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)

    plain = _plain_logprobs(model, prompts, answers, tok.pad_token_id)
    (weights * plain).sum().backward()
    assert torch.allclose(logp, plain, atol=1e-5, rtol=0)
    assert mask.sum() == sum(len(a) for a in answers)
    for g_fast, p in zip(fast, model.parameters()):
        assert p.grad is not None and torch.allclose(g_fast, p.grad, atol=1e-5, rtol=1e-4)
    # one row at a time, no padding at all: the same log-probs
    with torch.no_grad():
        for i, (p, a) in enumerate(zip(prompts, answers)):
            alone, _, _ = response_logprobs(model, [p], [a], tok.pad_token_id)
            assert torch.allclose(alone[0], logp[i, : len(a)].detach(), atol=1e-5, rtol=0)


def test_a_model_the_shortcut_does_not_know_runs_its_own_forward_pass(tok):
    model = _model(tok, "llama_gqa").eval()
    prompts, answers = _rows(tok, seed=1)
    with torch.no_grad():
        fast, _, _ = response_logprobs(model, prompts, answers, tok.pad_token_id)
        model.config.attention_dropout = 0.1  # not reproduced by the shortcut; in eval mode no dropout is drawn
        assert not pre_norm_decoder(model.model)
        plain, _, _ = response_logprobs(model, prompts, answers, tok.pad_token_id)
    assert torch.allclose(fast, plain, atol=1e-5, rtol=0)


def test_the_shortcut_runs_under_the_models_autocast(tok):
    """A model whose forward passes run in bfloat16 (autocast_each_forward): the shortcut, which does not call that
    forward, computes in bfloat16 too, and agrees with the wrapped forward pass to bfloat16's precision."""
    model = autocast_each_forward(_model(tok, "tiny").eval(), torch.device("cpu"), "bfloat16")
    prompts, answers = _rows(tok, seed=2)
    input_ids, attention, resp, _ = pack(prompts, answers, tok.pad_token_id)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = answer_logits(model, input_ids, attention, positions, resp.shape[1] + 1)
        fast, _, _ = response_logprobs(model, prompts, answers, tok.pad_token_id)
        plain = _plain_logprobs(model, prompts, answers, tok.pad_token_id)
    assert logits.dtype == torch.bfloat16
    assert torch.allclose(fast, plain, atol=0.05, rtol=0)


def test_bf16_answer_logprobs_after_optimizer_steps_equal_a_fresh_models(tok):
    """Under the model's bf16 autocast, each call casts the current weights: after two optimizer steps the shortcut's
    log-probs equal those of a fresh model loaded with the updated weights (no stale cast of the old ones)."""
    model = autocast_each_forward(_model(tok, "tiny").train(), torch.device("cpu"), "bfloat16")
    prompts, answers = _rows(tok, seed=3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(2):
        logp, _, _ = response_logprobs(model, prompts, answers, tok.pad_token_id)
        optimizer.zero_grad(set_to_none=True)
        (-logp.sum()).backward()
        optimizer.step()
    fresh = autocast_each_forward(_model(tok, "tiny").train(), torch.device("cpu"), "bfloat16")
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        after, _, _ = response_logprobs(model, prompts, answers, tok.pad_token_id)
        want, _, _ = response_logprobs(fresh, prompts, answers, tok.pad_token_id)
        before, _, _ = response_logprobs(_model(tok, "tiny"), prompts, answers, tok.pad_token_id)
    assert torch.equal(after, want)
    assert not torch.allclose(after, before, atol=1e-3)
