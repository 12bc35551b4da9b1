"""The packed (padding-free) layout of the update (scpo.policy.packed): one row per micro-batch, position ids restarting
per step, read by transformers as separate sequences; its log-probs, entropies and gradients equal the padded
layout's, on the tiny policy and on random Qwen2s of reduced width, through the last-layer shortcut and through the
model's own forward pass."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scpo.policy.last_layer import pre_norm_decoder
from scpo.policy.logprobs import response_logprobs
from scpo.policy.packed import pack_row, packed_response_logprobs, packed_rows
from scpo.policy.qwen2_shapes import qwen2_config
from scpo.policy.tiny import build_tiny_model, train_tokenizer

VOCAB = 500


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(["go east go west open door look take apple 1 from table 1 room of cabinet 2"] * 4, 300)


def _qwen2(dtype=torch.float32, **extra):
    """A random Qwen2 at reduced width (`qwen2-small`: 2 layers of width 128, 4 query / 2 key-value heads, q/k/v
    biases, RoPE theta 1e6) with a small vocabulary."""
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(0)
    config = qwen2_config("qwen2-small", vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2, **extra)
    return Qwen2ForCausalLM(config).to(dtype)


def _steps(prompt_lengths, answer_lengths, vocab=VOCAB, seed=0):
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in prompt_lengths]
    answers = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in answer_lengths]
    return prompts, answers


def _both(model, prompts, answers, pad_id, temperature=1.0, row_tokens=None):
    """(padded, packed): each (logp, mask, entropy, gradients of a weighted sum of log-probs and entropies)."""
    weights = torch.linspace(-1.0, 2.0, len(prompts), dtype=torch.float64)[:, None]
    out = []
    for packed in (False, True):
        model.zero_grad(set_to_none=True)
        if packed:
            logp, mask, entropy = packed_response_logprobs(
                model, prompts, answers, temperature, with_entropy=True, row_tokens=row_tokens
            )
        else:
            logp, mask, entropy = response_logprobs(model, prompts, answers, pad_id, temperature, with_entropy=True)
        ((weights * logp.double()).sum() + 0.3 * entropy.double().sum()).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        out.append((logp.detach(), mask, entropy.detach(), grads))
    return out


def _assert_equal(padded, packed, atol):
    (lp_a, m_a, e_a, g_a), (lp_b, m_b, e_b, g_b) = padded, packed
    assert torch.equal(m_a, m_b)
    assert torch.allclose(lp_a, lp_b, atol=atol, rtol=0)
    assert torch.allclose(e_a, e_b, atol=atol, rtol=0)
    for a, b in zip(g_a, g_b):
        assert torch.allclose(a, b, atol=atol, rtol=atol)


def test_the_packed_row_holds_every_token_once_and_no_padding():
    prompts, answers = _steps([5, 1, 9], [3, 7, 1])
    row = pack_row(prompts, answers)
    flat = [t for p, a in zip(prompts, answers) for t in p + a]
    assert row.input_ids[0].tolist() == flat and row.tokens == len(flat)
    assert row.position_ids[0].tolist() == [*range(8), *range(8), *range(10)]
    assert row.targets.tolist() == [t for a in answers for t in a]
    # position p predicts token p + 1: the answers' first tokens are predicted by the prompts' last tokens
    assert row.at.tolist() == [4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 24]
    assert row.mask.sum(1).tolist() == [3, 7, 1]


def test_rows_hold_every_sequence_once_within_their_capacity():
    lengths = [7, 3, 9, 2, 5, 9, 1]
    rows = packed_rows(lengths)  # capacity 9, the longest: first fit in decreasing length
    assert rows == [[2], [5], [0, 3], [1, 4, 6]]
    assert sorted(i for r in rows for i in r) == list(range(len(lengths)))
    assert packed_rows(lengths, capacity=100) == [list(range(7))]
    assert packed_rows(lengths, capacity=0) == [[2], [5], [0], [4], [1], [3], [6]]  # one sequence a row
    assert packed_rows([]) == []


def test_transformers_reads_the_row_as_separate_sequences():
    """The library's own detection (`find_packed_sequence_indices`, what `create_causal_mask` uses) numbers the
    sequences from the position ids alone, and the causal mask it builds lets no token see another sequence."""
    from transformers.masking_utils import create_causal_mask, find_packed_sequence_indices

    prompts, answers = _steps([2, 3], [1, 2])
    row = pack_row(prompts, answers)
    assert find_packed_sequence_indices(row.position_ids).tolist() == [[0, 0, 0, 1, 1, 1, 1, 1]]
    model = _qwen2()
    embeds = model.model.embed_tokens(row.input_ids)
    mask = create_causal_mask(model.config, embeds, None, cache=None, position_ids=row.position_ids)
    seq = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1])
    want = (seq[:, None] == seq[None]) & torch.ones(8, 8, dtype=torch.bool).tril()
    assert torch.equal(mask[0, 0], want)


# eager attention in float64 is left out: there the padded side's fully masked rows (left padding) overflow to -inf
# (float64's min added to the scores) and give NaN, which then reaches every row through the values
@pytest.mark.parametrize(
    "attention, dtype, atol",
    [("sdpa", torch.float32, 1e-5), ("sdpa", torch.float64, 1e-12), ("eager", torch.float32, 1e-5)],
)
@pytest.mark.parametrize("row_tokens", [None, 1000])  # rows of at most the longest sequence; all in one row
def test_qwen2_packed_logprobs_and_gradients_equal_the_padded_ones(attention, dtype, atol, row_tokens):
    model = _qwen2(dtype).train()
    model.config._attn_implementation = attention
    assert pre_norm_decoder(model.model)  # the last-layer shortcut runs on both sides
    prompts, answers = _steps([5, 17, 1, 9, 30, 2], [3, 1, 7, 4, 12, 2])
    _assert_equal(*_both(model, prompts, answers, 0, temperature=0.7, row_tokens=row_tokens), atol)


def test_a_model_the_shortcut_does_not_know_packs_through_its_own_forward_pass():
    """attention_dropout > 0 turns the shortcut off (`pre_norm_decoder`); in eval mode no dropout is drawn, so the
    model's own forward pass, given the position ids and no mask, must separate the sequences itself."""
    model = _qwen2(torch.float64, attention_dropout=0.1).eval()
    assert not pre_norm_decoder(model.model)
    prompts, answers = _steps([4, 11, 2], [6, 2, 5], seed=1)
    _assert_equal(*_both(model, prompts, answers, 0, row_tokens=1000), 1e-12)


def test_tiny_policy_packed_logprobs_and_gradients_equal_the_padded_ones(tok):
    model = build_tiny_model(tok, hidden_size=32, layers=2, heads=2, seed=0).train()
    prompts, answers = _steps([3, 12, 7, 1], [5, 1, 2, 9], vocab=len(tok), seed=2)
    _assert_equal(*_both(model, prompts, answers, tok.pad_token_id), 1e-5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lengths=st.lists(st.tuples(st.integers(1, 24), st.integers(1, 10)), min_size=1, max_size=6),
    seed=st.integers(0, 2**16),
    row_tokens=st.one_of(st.none(), st.integers(0, 80)),
)
def test_any_mix_of_lengths_packs_to_the_padded_logprobs(tok, lengths, seed, row_tokens):
    model = build_tiny_model(tok, hidden_size=16, layers=2, heads=2, seed=0).double()
    prompts, answers = _steps([p for p, _ in lengths], [a for _, a in lengths], vocab=len(tok), seed=seed)
    with torch.no_grad():
        padded, mask, _ = response_logprobs(model, prompts, answers, tok.pad_token_id)
        packed, packed_mask, _ = packed_response_logprobs(model, prompts, answers, row_tokens=row_tokens)
    assert torch.equal(mask, packed_mask)
    assert torch.allclose(padded, packed, atol=1e-12, rtol=0)


def test_an_empty_prompt_or_answer_is_refused():
    with pytest.raises(ValueError, match="sequence 1 has an empty prompt or answer"):
        pack_row([[3, 4], []], [[5], [6]])
    with pytest.raises(ValueError, match="2 prompts but 1 responses"):
        packed_response_logprobs(None, [[3], [4]], [[5]])
