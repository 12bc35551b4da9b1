"""Both engines sample the policy the trainer scores, whatever the checkpoint's generation_config.json says: a tiny
model saved with `repetition_penalty: 1.1`, `top_k: 5` and `no_repeat_ngram_size: 2` (loaded as `load_policy` loads
a start model, so `model.generation_config` carries them), then
- the transformers engine's own log-prob of each sampled token equals the trainer's recomputation
  (`scpo.policy.logprobs.response_logprobs`, float32, 1e-5), and the sampled first tokens' frequencies match
  softmax(logits / T) (a chi-square test, fixed seed, 4,000 draws);
- the vLLM engine (stand-in) asks vLLM for its neutral defaults (`generation_config="vllm"`) and sends every penalty and
  cut-off at its neutral value, and its sampler log-probs equal the trainer's;
- a planted penalty in vLLM's sampler is seen by the sampler / trainer comparison."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from scipy import stats

from scpo.policy import Policy, load_policy
from scpo.policy.logprobs import response_logprobs
from scpo.policy.tiny import build_tiny_model, train_tokenizer
from scpo.rollout.engine import TransformersEngine

from helpers import REPO

STANDIN = REPO / "checks" / "gpu" / "standin"
CORPUS = ["go to desk 1 then take key 2 from desk 1 and open door 3 with key 2"] * 10
PROMPT = "go to desk 1 then take key 2 from desk 1"  # "desk 1" twice: no_repeat_ngram_size=2 bans "1" after "desk"
# as Qwen2.5-Instruct's generation_config.json (do_sample, temperature 0.7, top_p 0.8, repetition_penalty 1.1), with
# top_k 5 and no_repeat_ngram_size 2
PENALTIES = {"do_sample": True, "temperature": 0.7, "top_p": 0.8, "repetition_penalty": 1.1, "top_k": 5,
             "no_repeat_ngram_size": 2}  # fmt: skip


@pytest.fixture(scope="module")
def penalised(tmp_path_factory):
    """A saved tiny policy whose generation config carries penalties, loaded back; its output layer scaled so that
    the next-token distribution is far from uniform (a penalty then moves it visibly)."""
    tok = train_tokenizer(CORPUS, vocab_size=120)
    model = build_tiny_model(tok, hidden_size=32, layers=1, heads=2, seed=3)
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(8.0)  # tied: the output layer too
    for key, value in PENALTIES.items():
        setattr(model.generation_config, key, value)
    folder = tmp_path_factory.mktemp("penalised")
    Policy(model=model, tokenizer=tok, profile="tiny").save(folder)
    policy = load_policy(folder)
    assert policy.model.generation_config.repetition_penalty == 1.1  # the start model keeps them
    return policy, folder


def _trainer_logprobs(policy, gens, temperature):
    """The trainer's recomputation, float32: log softmax(logits / T) of each answer token."""
    with torch.no_grad():
        logp, _, _ = response_logprobs(
            policy.model,
            [g.prompt_ids for g in gens],
            [g.response_ids for g in gens],
            policy.tokenizer.pad_token_id,
            temperature,
        )
    return logp


def _next_token_distribution(policy, prompt_ids, temperature):
    with torch.no_grad():
        logits = policy.model(input_ids=torch.tensor([prompt_ids])).logits[0, -1].float()
    p = torch.softmax(logits.double() / temperature, -1).numpy()
    return p / p.sum()


def test_transformers_engine_logprobs_are_the_trainers(penalised):
    policy, _ = penalised
    engine = TransformersEngine(policy, 64, 8, batch_size=4, record_logprobs=True)
    torch.manual_seed(0)
    prompts = [PROMPT, "open door 3 with key 2", "take key 2 from desk 1 and go to desk 1", "go to desk 1"]
    gens = engine.generate(prompts, temperature=0.7)
    assert all(g.sampler_logprobs is not None and len(g.sampler_logprobs) == len(g.response_ids) for g in gens)
    mine = _trainer_logprobs(policy, gens, 0.7)
    for row, g in enumerate(gens):
        np.testing.assert_allclose(g.sampler_logprobs, mine[row, : len(g.response_ids)].numpy(), atol=1e-5, rtol=0)
    # the recorded log-probs are finite everywhere: no token the sampler drew was banned (-inf) by a processor
    assert all(np.isfinite(g.sampler_logprobs).all() for g in gens)


def test_transformers_engine_draws_from_softmax_of_logits_over_t(penalised):
    """4,000 first tokens after one prompt at T = 1: a chi-square goodness-of-fit test against softmax(logits / T)
    (tokens expected fewer than 5 times pooled). With the checkpoint's penalties applied, the token after "desk" that
    the prompt already followed it with is banned and the prompt's tokens are pushed down: p far below 1e-6."""
    policy, _ = penalised
    engine = TransformersEngine(policy, 64, 1, batch_size=1000)
    prompt_ids = policy.encode_prompts([PROMPT], 64)[0]
    torch.manual_seed(1)
    gens = engine.generate([PROMPT] * 4000, temperature=1.0)
    pad = policy.tokenizer.pad_token_id  # an engine that drops a sampled padding token returns an empty answer
    draws = [g.response_ids[0] if g.response_ids else pad for g in gens]
    p = _next_token_distribution(policy, prompt_ids, 1.0)
    observed = np.bincount(draws, minlength=len(p)).astype(float)
    expected = p * len(draws)
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    chi2, pvalue = stats.chisquare(obs, exp)
    assert big.sum() >= 5, "the test needs a spread-out next-token distribution"
    assert pvalue > 1e-3, f"chi2 {chi2:.1f} over {big.sum()} bins, p = {pvalue:.2g}: the engine samples another policy"
    assert all(len(g.response_ids) == 1 for g in gens)  # a sampled padding token is an answer token like any other


def test_plain_sampling_keeps_the_saved_generation_config(penalised, tmp_path):
    """The bare config is for the call only: the model keeps its generation config (a checkpoint saves it as it was);
    a LoRA-wrapped model's is its base model's (the one whose `generate` runs)."""
    import copy

    from peft import LoraConfig, get_peft_model

    from scpo.rollout.sampling import plain_sampling

    policy, _ = penalised
    TransformersEngine(policy, 64, 2).generate([PROMPT], temperature=1.0)
    assert policy.model.generation_config.repetition_penalty == 1.1
    assert policy.model.generation_config.no_repeat_ngram_size == 2
    lora = get_peft_model(copy.deepcopy(policy.model), LoraConfig(r=2, target_modules="all-linear"))
    with plain_sampling(lora):
        assert lora.get_base_model().generation_config.repetition_penalty is None
    assert lora.get_base_model().generation_config.repetition_penalty == 1.1


def test_answers_stop_at_every_eos_of_the_generation_config(penalised):
    """Both engines stop at the tokenizer's EOS and the generation config's EOS ids (vLLM's rule)."""
    from scpo.rollout.sampling import stop_token_ids

    policy, _ = penalised
    tok, model = policy.tokenizer, policy.model
    p = _next_token_distribution(policy, policy.encode_prompts(["go to"], 64)[0], 1.0)
    p[tok.eos_token_id] = 0
    other = int(p.argmax())  # the likeliest first token, made an end-of-sequence token
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [saved, other]
    try:
        assert stop_token_ids(tok, model) == [tok.eos_token_id, other]
        torch.manual_seed(0)
        gens = TransformersEngine(policy, 64, 12).generate(["go to"] * 40, temperature=1.0)
        for g in gens:
            stops = [k for k, t in enumerate(g.response_ids) if t in (tok.eos_token_id, other)]
            assert stops in ([], [len(g.response_ids) - 1]), g.response_ids
        assert any(g.response_ids[-1] == other for g in gens)
    finally:
        model.generation_config.eos_token_id = saved


def _drop_vllm_modules() -> None:
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


@pytest.fixture
def standin(monkeypatch):
    _drop_vllm_modules()
    monkeypatch.syspath_prepend(str(STANDIN))
    import vllm

    vllm.reset_faults()
    vllm.INSTANCES.clear()
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    yield vllm
    _drop_vllm_modules()


def test_vllm_engine_samples_without_the_checkpoints_defaults(standin, penalised):
    from scpo.rollout.sampling import neutral_sampling_kwargs
    from scpo.rollout.vllm_engine import VLLMEngine

    policy, folder = penalised
    engine = VLLMEngine(policy, folder, 64, 6, dtype="float32")
    llm = standin.INSTANCES[-1]
    assert llm.kwargs["generation_config"] == "vllm"
    gens = engine.generate([PROMPT, "open door 3 with key 2"], temperature=0.8)
    params = llm.calls[-1][1]
    assert {k: getattr(params, k) for k in neutral_sampling_kwargs()} == neutral_sampling_kwargs()
    mine = _trainer_logprobs(policy, gens, 0.8)
    for row, g in enumerate(gens):
        np.testing.assert_allclose(g.sampler_logprobs, mine[row, : len(g.response_ids)].numpy(), atol=1e-5, rtol=0)


def test_vllm_reads_a_models_defaults_only_without_sampling_params(standin, penalised):
    """What the stand-in models of vLLM: `LLM.generate(sampling_params=None)` samples with the checkpoint's
    generation_config.json unless `generation_config="vllm"`; the penalty then moves the sampler's log-probs."""
    policy, folder = penalised
    auto = standin.LLM(model=str(folder), dtype="float32")
    assert auto.get_default_sampling_params().repetition_penalty == 1.1
    neutral = standin.LLM(model=str(folder), dtype="float32", generation_config="vllm")
    assert neutral.get_default_sampling_params().repetition_penalty == 1.0


def test_a_penalty_in_vllms_sampler_shows_in_its_logprobs(standin, penalised):
    """The planted fault `sampler_penalty` (a repetition penalty of 1.1 in every request): the sampler's log-probs
    of the prompt's own tokens move away from the trainer's, which the GPU check's same-weights criterion reads."""
    from scpo.rollout.vllm_engine import VLLMEngine

    policy, folder = penalised
    standin.FAULTS["sampler_penalty"] = True
    engine = VLLMEngine(policy, folder, 64, 6, dtype="float32")
    torch.manual_seed(0)
    gens = engine.generate([PROMPT] * 4, temperature=1.0)
    mine = _trainer_logprobs(policy, gens, 1.0)
    diffs = np.concatenate(
        [np.abs(np.array(g.sampler_logprobs) - mine[r, : len(g.response_ids)].numpy()) for r, g in enumerate(gens)]
    )
    assert diffs.max() > 1e-2
