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


# ------------------------------------------------------------------------ the fast path against plain forward passes
def _plain_score(model, prompt, cand) -> float:
    """log p(cand | prompt) from one unbatched forward pass over prompt + candidate (no cache, no mask)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([list(prompt) + list(cand)])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    return float(sum(logp[len(prompt) - 1 + j, t] for j, t in enumerate(cand)))


def _turn(tok, n_prompts=7, seed=0):
    """Prompts of different lengths (two identical rows, as siblings at their first turn) and 1-5 candidates each."""
    g = torch.Generator().manual_seed(seed)
    words = TEXT[0].split()
    pick = lambda n: " ".join(words[int(i)] for i in torch.randint(len(words), (n,), generator=g))  # noqa: E731
    prompts = [_ids(tok, pick(int(torch.randint(3, 30, (1,), generator=g)))) for _ in range(n_prompts)]
    cands = [
        [_ids(tok, pick(int(torch.randint(1, 6, (1,), generator=g))), eos=True) for _ in range(1 + i % 5)]
        for i in range(n_prompts)
    ]
    prompts[3], cands[3] = prompts[1], cands[1]
    return prompts, cands


@pytest.mark.parametrize("tau", [5.0, 0.5])
def test_a_token_temperature_divides_every_tokens_logits(tiny, tau):
    """token_temperature=tau: each token's log-prob is log softmax(z / tau), as one plain pass with its logits divided
    would give (HCAPO's hindsight scores, tau = 5); 1 leaves the scores as they are."""
    tok, model = tiny
    prompts, cands = _turn(tok, seed=2)
    with torch.no_grad():
        scores = candidate_scores(model, prompts, cands, tok.pad_token_id, token_temperature=tau)
        plain = candidate_scores(model, prompts, cands, tok.pad_token_id)
        assert torch.equal(plain, candidate_scores(model, prompts, cands, tok.pad_token_id, token_temperature=1.0))
        for b, (p, cs) in enumerate(zip(prompts, cands)):
            for k, y in enumerate(cs):
                logits = model(input_ids=torch.tensor([p + y])).logits[0, len(p) - 1 : -1].float() / tau
                want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(y)[:, None]).sum()
                assert scores[b, k].item() == pytest.approx(want.item(), abs=1e-5)
    assert not torch.allclose(scores, plain)
    with pytest.raises(ValueError, match="token_temperature=0"):
        candidate_scores(model, prompts, cands, tok.pad_token_id, token_temperature=0)


@pytest.mark.parametrize("token_budget", [32768, 60])  # one chunk, or one distinct row per chunk
def test_scores_equal_plain_unbatched_forward_passes(tiny, token_budget):
    tok, model = tiny
    prompts, cands = _turn(tok)
    with torch.no_grad():
        scores = candidate_scores(model, prompts, cands, tok.pad_token_id, token_budget=token_budget)
    for b, (p, cs) in enumerate(zip(prompts, cands)):
        want = torch.tensor([_plain_score(model, p, c) for c in cs])
        assert torch.allclose(scores[b, : len(cs)], want, atol=1e-5, rtol=0), (b, scores[b], want)
        assert torch.all(torch.isinf(scores[b, len(cs) :]))
    assert torch.equal(scores[1], scores[3])  # the duplicate row is the same computation


def test_duplicate_rows_pass_their_gradient_to_the_weights(tiny):
    """A row scored once for two identical inputs gets the gradient of both: it equals the gradient of the same loss
    computed with every row scored alone."""
    tok, model = tiny
    prompts, cands = _turn(tok, seed=1)
    weights = torch.linspace(0.5, 2.0, len(prompts))
    model.zero_grad(set_to_none=True)
    scores = candidate_scores(model, prompts, cands, tok.pad_token_id)
    (weights * torch.log_softmax(scores, -1)[:, 0]).sum().backward()
    fast = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    for b, (p, cs) in enumerate(zip(prompts, cands)):
        alone = candidate_scores(model, [p], [cs], tok.pad_token_id, token_budget=1)
        (weights[b] * torch.log_softmax(alone, -1)[0, 0]).backward()
    for g_fast, p in zip(fast, model.parameters()):
        assert torch.allclose(g_fast, p.grad, atol=1e-5, rtol=1e-4)
    model.zero_grad(set_to_none=True)


def test_the_sampler_records_the_log_prob_it_drew_with_and_draws_from_the_models_distribution(tiny):
    """The admissible-choice engine draws candidate k with probability softmax(s / T)[k] of the plain forward passes'
    scores, and records log pi(k | x) of the draw (the update's old log-prob)."""
    from scpo.policy.profiles import Policy
    from scpo.rollout.engine import TransformersEngine

    tok, model = tiny
    policy = Policy(model=model, tokenizer=tok, profile="tiny")
    engine = TransformersEngine(policy, max_prompt_tokens=64, max_new_tokens=8, action_choice="admissible")
    commands = ["go east", "go west", "look", "open door"]
    prompt = "room 1 of 3 look"
    ids = policy.encode_prompts([prompt], 64)[0]
    answers = [_ids(tok, f"<action>{c}</action>", eos=True) for c in commands]
    plain = torch.tensor([_plain_score(model, ids, a) for a in answers])
    for temperature in (1.0, 0.5):
        expected = torch.softmax(plain / temperature, -1)
        torch.manual_seed(0)
        gens = engine.generate([prompt] * 2000, temperature=temperature, admissible=[commands] * 2000)
        counts = torch.bincount(torch.tensor([commands.index(g.text[8:-9]) for g in gens]), minlength=4)
        assert torch.allclose(counts / 2000.0, expected, atol=0.035), (counts, expected)
        for g in gens[:20]:
            k = commands.index(g.text[8:-9])
            assert g.candidate_ids == answers and g.response_ids == answers[k]
            assert abs(g.choice_logprob - float(torch.log(expected[k]))) < 1e-5


def test_candidates_sharing_prefixes_score_and_backpropagate_as_their_own_forward_passes(tiny):
    """ALFWorld-like commands (`<action> take apple 1 from table 1`, `... 3`, `<action> go east`, ...) share prefixes
    fed once (scpo.policy.candidate_trie): their scores and the gradient of a loss over them equal those of one plain
    forward pass per candidate."""
    tok, model = tiny
    commands = [
        ["take apple 1 from table 1", "take apple 1 from table 3", "go east", "go west", "look", "go east go west"],
        ["open door", "open door look", "look"],
    ]
    prompts = [_ids(tok, "room 1 of 3 look go east"), _ids(tok, "table 1 of apple")]
    cands = [[_ids(tok, f"<action>{c}</action>", eos=True) for c in cs] for cs in commands]
    weights = torch.tensor([[0.3, -1.2, 0.5, 2.0, -0.7, 1.1], [0.9, -0.4, 0.2, 0.0, 0.0, 0.0]])
    model.zero_grad(set_to_none=True)
    scores = candidate_scores(model, prompts, cands, tok.pad_token_id)
    (weights * torch.log_softmax(scores, -1).nan_to_num(neginf=0.0)).sum().backward()
    fast = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    for b, (p, cs) in enumerate(zip(prompts, cands)):
        plain = []
        for y in cs:
            logits = model(input_ids=torch.tensor([p + y])).logits[0, len(p) - 1 : -1].float()
            plain.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(y)[:, None]).sum())
        plain = torch.stack(plain)
        assert torch.allclose(scores[b, : len(cs)].detach(), plain.detach(), atol=1e-5, rtol=0)
        (weights[b, : len(cs)] * torch.log_softmax(plain, -1)).sum().backward()
    for g_fast, p in zip(fast, model.parameters()):
        assert torch.allclose(g_fast, p.grad, atol=1e-5, rtol=1e-4)
    model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("arch", ["llama_gqa", "qwen2"])
def test_the_prompt_pass_shortcut_matches_plain_forward_passes_of_other_llama_style_models(tiny, arch):
    """The last layer computed at the last prompt token only (scpo.policy.prompt_pass) on a grouped-query Llama and a
    Qwen2 (biased q/k/v projections): the same scores as one plain forward pass per candidate, and a model the
    shortcut does not know (an eager-attention model with dropout) takes the full forward pass with the same result."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from scpo.policy.last_layer import pre_norm_decoder

    tok, _ = tiny
    common = {
        "vocab_size": len(tok),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 3,
        "pad_token_id": 0,
    }
    torch.manual_seed(1)
    if arch == "llama_gqa":
        model = LlamaForCausalLM(LlamaConfig(num_attention_heads=4, num_key_value_heads=2, **common)).eval()
    else:
        model = Qwen2ForCausalLM(Qwen2Config(num_attention_heads=4, num_key_value_heads=4, **common)).eval()
    assert pre_norm_decoder(model.get_decoder())
    prompts, cands = _turn(tok, seed=2)
    with torch.no_grad():
        scores = candidate_scores(model, prompts, cands, tok.pad_token_id)
        for b, (p, cs) in enumerate(zip(prompts, cands)):
            want = torch.tensor([_plain_score(model, p, c) for c in cs])
            assert torch.allclose(scores[b, : len(cs)], want, atol=1e-5, rtol=0), (b, scores[b], want)
        # dropout is not reproduced by the shortcut: the plain decoder runs (in eval mode, so without dropout)
        model.config.attention_dropout = 0.1
        assert not pre_norm_decoder(model.get_decoder())
        assert torch.allclose(candidate_scores(model, prompts, cands, tok.pad_token_id), scores, atol=1e-5, rtol=0)


def test_single_token_candidates_need_no_tree_pass(tiny):
    """Candidates of one token each are predicted from the prompt alone: a chunk with no tree nodes scores them as
    plain forward passes do, beside a row whose candidates have nodes."""
    tok, model = tiny
    prompts = [_ids(tok, "room 1 of 3"), _ids(tok, "go west")]
    cands = [[[tok.eos_token_id], _ids(tok, "look")[:1]], [_ids(tok, "go east", eos=True), [tok.eos_token_id]]]
    with torch.no_grad():
        alone = candidate_scores(model, prompts[:1], cands[:1], tok.pad_token_id)
        both = candidate_scores(model, prompts, cands, tok.pad_token_id, token_budget=1)
    for b, (p, cs) in enumerate(zip(prompts, cands)):
        want = torch.tensor([_plain_score(model, p, c) for c in cs])
        assert torch.allclose(both[b], want, atol=1e-5, rtol=0)
    assert torch.allclose(alone[0], both[0], atol=1e-6, rtol=0)
