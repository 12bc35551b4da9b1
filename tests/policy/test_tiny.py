"""The tiny profile (trained tokenizer + local Llama model), saving/loading, and the transformers engine."""

from __future__ import annotations

import pytest
import torch

from scpo.config import load_config
from scpo.policy import Policy, create_policy, load_policy
from scpo.policy.tiny import TAG_TOKENS, build_tiny_model, train_tokenizer
from scpo.rollout.engine import TransformersEngine

CORPUS = [
    "You are in room 1 of 3. Admissible actions: look, go east, go west",
    "You see a key here. Your task is to: open the door at the end with the key",
] * 5


@pytest.fixture(scope="module")
def policy():
    tok = train_tokenizer(CORPUS, vocab_size=300)
    return Policy(model=build_tiny_model(tok, hidden_size=16, layers=1, heads=2), tokenizer=tok, profile="tiny")


def test_tokenizer_round_trips_any_text_and_tags_are_single_tokens(policy):
    tok = policy.tokenizer
    for text in ["<think>hm</think><action>go to desk 1</action>", "Ünïcödé \x00 garbage ☃", CORPUS[0]]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    for tag in TAG_TOKENS:
        assert len(tok(tag, add_special_tokens=False)["input_ids"]) == 1
    assert tok.padding_side == "left" and tok.pad_token == "<pad>" and tok.eos_token == "</s>"


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="empty corpus"):
        train_tokenizer([])
    with pytest.raises(ValueError, match="tiny_hidden_size=30 must be divisible by policy.tiny_heads=4"):
        build_tiny_model(train_tokenizer(CORPUS, 300), hidden_size=30, heads=4)
    with pytest.raises(ValueError, match="needs a text corpus"):
        create_policy(load_config(None).policy, corpus=None)
    with pytest.raises(FileNotFoundError, match="no model"):
        load_policy("/nonexistent/run")


def test_save_and_load_give_identical_logits(policy, tmp_path):
    policy.save(tmp_path / "run" / "model")
    loaded = load_policy(tmp_path / "run")  # a run dir resolves to its model/
    ids = torch.tensor([policy.tokenizer(CORPUS[1])["input_ids"]])
    with torch.no_grad():
        assert torch.equal(policy.model(ids).logits, loaded.model(ids).logits)
    assert loaded.profile == "tiny" and not loaded.chat and loaded.format_prompt("x") == "x\n"


def test_create_policy_sizes_the_model_from_config():
    cfg = load_config(
        None,
        overrides={
            "policy.tiny_hidden_size": 24,
            "policy.tiny_layers": 3,
            "policy.tiny_heads": 2,
            "policy.tiny_vocab_size": 290,
        },
    )
    pol = create_policy(cfg.policy, corpus=CORPUS)
    c = pol.model.config
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads) == (24, 3, 2)
    assert c.vocab_size == len(pol.tokenizer) <= 290 + len(TAG_TOKENS)


def test_prompt_truncation_keeps_the_end(policy):
    full = policy.encode_prompts([CORPUS[0] * 20], 10_000)[0]
    cut = policy.encode_prompts([CORPUS[0] * 20], 12)[0]
    assert cut == full[-12:]


def test_engine_greedy_is_deterministic_and_stops_at_eos(policy):
    engine = TransformersEngine(policy, max_prompt_tokens=64, max_new_tokens=6, batch_size=2)
    prompts = [CORPUS[0], CORPUS[1], "short"]
    a = engine.generate(prompts, temperature=0.0)
    b = engine.generate(list(reversed(prompts)), temperature=0.0)
    assert [g.response_ids for g in a] == [g.response_ids for g in reversed(b)]
    eos = policy.tokenizer.eos_token_id
    for g, p in zip(a, prompts):
        assert 1 <= len(g.response_ids) <= 6
        assert eos not in g.response_ids[:-1]
        assert g.prompt_ids == policy.encode_prompts([p], 64)[0]
        assert g.text == policy.tokenizer.decode(g.response_ids, skip_special_tokens=True)


def test_lora_policy_saves_a_merged_model_with_the_same_outputs(tmp_path):
    cfg = load_config(
        None,
        overrides={
            "policy.tiny_hidden_size": 16,
            "policy.tiny_layers": 1,
            "policy.tiny_heads": 2,
            "policy.tiny_vocab_size": 290,
            "policy.lora": True,
            "policy.lora_r": 2,
        },
    )
    pol = create_policy(cfg.policy, corpus=CORPUS)
    assert hasattr(pol.model, "peft_config")
    trainable = [n for n, p in pol.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    with torch.no_grad():  # make the adapters non-trivial so merging matters
        for n, p in pol.model.named_parameters():
            if "lora_B" in n:
                p.fill_(0.05)
    pol.save(tmp_path / "m")
    loaded = load_policy(tmp_path / "m")
    ids = torch.tensor([pol.tokenizer(CORPUS[0])["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(pol.model(ids).logits, loaded.model(ids).logits, atol=1e-5)
    assert not hasattr(loaded.model, "peft_config")


def test_transformers_engine_never_imports_vllm(policy):
    import sys

    from scpo.rollout.engine import make_engine

    cfg = load_config(None)
    engine = make_engine(cfg, policy)
    engine.generate(["x"], temperature=1.0)
    assert isinstance(engine, TransformersEngine) and "vllm" not in sys.modules
    with pytest.raises(Exception, match="vllm"):
        load_config(None, overrides={"rollout.engine": "vllm"})  # the tiny profile cannot use vLLM


def test_admissible_choice_draws_among_commands_by_sequence_likelihood(policy):
    from scpo.train.update import StepSample, batched_logprobs

    engine = TransformersEngine(policy, max_prompt_tokens=64, max_new_tokens=6, action_choice="admissible")
    commands = ["go east", "go west", "look", "take key"]
    greedy = engine.generate([CORPUS[0]], temperature=0.0, admissible=[commands])[0]
    tok = policy.tokenizer
    answers = [
        tok(f"<action>{c}</action>", add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for c in commands
    ]
    prompt_ids = policy.encode_prompts([CORPUS[0]], 64)[0]
    full = [
        float(lp.sum())
        for lp in batched_logprobs(policy.model, [StepSample(prompt_ids, a, 0.0) for a in answers], tok.pad_token_id, 8)
    ]
    best = max(range(4), key=lambda i: full[i])
    assert greedy.text == f"<action>{commands[best]}</action>" and greedy.response_ids == answers[best]
    assert greedy.candidate_ids == answers  # what the trainer needs to compute the choice's probability
    sampled = engine.generate([CORPUS[0]] * 20, temperature=1.0, admissible=[commands] * 20)
    assert {g.text for g in sampled} <= {f"<action>{c}</action>" for c in commands}
    with pytest.raises(ValueError, match="action_choice='pick'"):
        TransformersEngine(policy, 64, 6, action_choice="pick")


def test_admissible_choice_generates_freely_when_a_command_is_a_template(policy):
    engine = TransformersEngine(policy, max_prompt_tokens=64, max_new_tokens=4, action_choice="admissible")
    out = engine.generate(
        [CORPUS[0], CORPUS[1]], temperature=0.0, admissible=[["search[<your query>]"], ["look", "go east"]]
    )
    free = TransformersEngine(policy, max_prompt_tokens=64, max_new_tokens=4).generate([CORPUS[0]], temperature=0.0)
    assert out[0].response_ids == free[0].response_ids
    assert out[1].text in ("<action>look</action>", "<action>go east</action>")


def test_object_names_are_one_shared_token_and_template_phrases_are_single_tokens():
    from scpo.envs.alfworld.prompts import PROMPT_PHRASES, build_prompt

    prompt = build_prompt(
        "cool some apple and put it in countertop.",
        "On the countertop 1, you see a apple 1.",
        ["take apple 1 from countertop 1", "go to fridge 1"],
        [],
        step=0,
    )
    tok = train_tokenizer([prompt] * 3, vocab_size=400, fixed_phrases=PROMPT_PHRASES)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == prompt
    apple = tok(" apple", add_special_tokens=False)["input_ids"]
    answer = tok("<action>take apple 1 from countertop 1</action>", add_special_tokens=False)["input_ids"]
    assert len(apple) == 1 and apple[0] in answer and ids.count(apple[0]) == 3  # goal, observation, command
    shown = [p for p in PROMPT_PHRASES if p in prompt]
    assert len(shown) >= 3
    for phrase in shown:
        assert tok.convert_tokens_to_ids(phrase) in ids
