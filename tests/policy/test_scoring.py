"""The candidate scorer shared by the admissible-choice sampler and the trainer: batched, KV-cache-shared scores equal
the plain per-candidate sums of answer-token log-probs."""

from __future__ import annotations

import pytest
import torch

from scpo.policy.logprobs import response_logprobs
from scpo.policy.scoring import candidate_scores, choice_log_distribution
from scpo.policy.tiny import build_tiny_model, train_tokenizer

TEXT = ["go east go west open door look take apple 1 from table 1 room of"] * 4


@pytest.fixture(scope="module")
def tiny():
    tok = train_tokenizer(TEXT, vocab_size=300)
    return tok, build_tiny_model(tok, hidden_size=32, layers=2, heads=2, seed=0).eval()


def _ids(tok, text, eos=False):
    return tok(text, add_special_tokens=False)["input_ids"] + ([tok.eos_token_id] if eos else [])


def test_batched_scores_equal_per_candidate_logprob_sums(tiny):
    tok, model = tiny
    prompts = [_ids(tok, "room 1 of 3 look"), _ids(tok, "go")]  # different lengths: left padding
    cands = [
        [_ids(tok, c, eos=True) for c in ("go east", "open door look", "take apple 1 from table 1")],
        [_ids(tok, c, eos=True) for c in ("look", "go west")],
    ]  # 3 and 2 candidates, lengths 3..8 tokens
    with torch.no_grad():
        scores = candidate_scores(model, prompts, cands, tok.pad_token_id)
        for b in range(2):
            lp, _, _ = response_logprobs(model, [prompts[b]] * len(cands[b]), cands[b], tok.pad_token_id)
            assert torch.allclose(scores[b, : len(cands[b])], lp.sum(-1), atol=1e-4)
    assert scores.shape == (2, 3) and scores[1, 2] == float("-inf")


def test_choice_distribution_is_a_tempered_softmax_over_present_candidates():
    scores = torch.tensor([[-1.0, -2.0, float("-inf")]])
    log_pi = choice_log_distribution(scores, temperature=0.5)
    expected = torch.log_softmax(torch.tensor([-2.0, -4.0]), -1)
    assert torch.allclose(log_pi[0, :2], expected) and log_pi[0, 2] == float("-inf")
    assert torch.allclose(choice_log_distribution(scores, 0.0), choice_log_distribution(scores, 1.0))


def test_scores_carry_gradients(tiny):
    tok, model = tiny
    scores = candidate_scores(
        model, [_ids(tok, "room 1")], [[_ids(tok, "go east", eos=True), _ids(tok, "look")]], tok.pad_token_id
    )
    scores[0, 0].backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    model.zero_grad(set_to_none=True)


def test_bad_inputs_name_the_problem(tiny):
    tok, model = tiny
    with pytest.raises(ValueError, match="2 prompts but 1 candidate lists"):
        candidate_scores(model, [[1], [2]], [[[3]]], tok.pad_token_id)
    with pytest.raises(ValueError, match="at least one candidate"):
        candidate_scores(model, [[1]], [[]], tok.pad_token_id)
