"""The vLLM engine against the stand-in `vllm` package of checks/gpu/standin (no GPU here): only vLLM's public `LLM`
API, the engine core in this process; prompts truncated like the CPU engine's, sampling outside autocast with the
sampler's log-probs kept, the V1 model runner unless asked otherwise, and a weight sync that runs in the worker
(`collective_rpc`) under no_grad in vLLM's config context with detached tensors in the engine's dtype, skips tied
weights, merges LoRA out of place, checks `reset_prefix_cache()`, and is verified by an exact parameter comparison and
the log-probs of answers it sampled, failing loudly; sleep mode frees vLLM's memory for the update and the sync brings
the weights back."""

from __future__ import annotations

import copy
import os
import sys

import pytest
import torch

from scpo.policy import Policy, PromptTooLongError
from scpo.policy.tiny import build_tiny_model, train_tokenizer

from helpers import REPO

STANDIN = REPO / "checks" / "gpu" / "standin"

CORPUS = [
    "You are in room 1 of 3. Admissible actions: look, go east, go west",
    "You see a key here. Your task is to: open the door at the end with the key",
] * 5


def _drop_vllm_modules() -> None:
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


@pytest.fixture
def standin(monkeypatch):
    """The stand-in vllm package for one test (gone from sys.modules and sys.path afterwards), fresh faults; vLLM's
    environment variables restored after the test."""
    _drop_vllm_modules()
    monkeypatch.syspath_prepend(str(STANDIN))
    import vllm

    assert vllm.__version__.endswith("+standin")
    vllm.reset_faults()
    vllm.INSTANCES.clear()
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # vLLM's default
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    yield vllm
    _drop_vllm_modules()


def _policy(tie: bool = True, seed: int = 0, layers: int = 1) -> Policy:
    tok = train_tokenizer(CORPUS, vocab_size=300)
    model = build_tiny_model(tok, hidden_size=16, layers=layers, heads=2, seed=seed)
    if not tie:  # an untied output layer: lm_head is a parameter of its own
        model.config.tie_word_embeddings = False
        model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone() + 0.01)
    return Policy(model=model, tokenizer=tok, profile="tiny")


def _engine(policy, tmp_path, **kw):
    from scpo.rollout.vllm_engine import VLLMEngine

    policy.save(tmp_path / "model")  # vLLM loads the same checkpoint the trainer starts from
    kw = {"max_prompt_tokens": 16, "max_new_tokens": 4, "dtype": "float32", **kw}
    return VLLMEngine(policy, model_dir=tmp_path / "model", **kw)


def _update(policy, scale: float = 0.05, seed: int = 0) -> None:
    torch.manual_seed(seed)
    with torch.no_grad():  # "after an update": new weights, new greedy tokens
        for p in policy.model.parameters():
            p.add_(scale * torch.randn_like(p))


def test_generate_sends_truncated_token_ids_outside_autocast(standin, tmp_path):
    policy = _policy()
    engine = _engine(policy, tmp_path, max_prompt_tokens=8, max_new_tokens=5, gpu_memory_utilization=0.3, seed=4)
    llm = standin.INSTANCES[-1]
    assert llm.kwargs["max_model_len"] == 13 and llm.kwargs["seed"] == 4 and llm.kwargs["enforce_eager"] is False
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the trainer's loop runs under autocast
        gens = engine.generate(CORPUS[:2], temperature=0.7, top_p=0.9)
    prompts, params = llm.calls[-1]
    assert llm.generate_autocast == [False]
    assert [p["prompt_token_ids"] for p in prompts] == policy.encode_prompts(CORPUS[:2], 8)
    assert all(len(p["prompt_token_ids"]) == 8 for p in prompts)
    assert (params.temperature, params.top_p, params.max_tokens, params.detokenize) == (0.7, 0.9, 5, False)
    assert gens[1].prompt_ids == prompts[1]["prompt_token_ids"] and 1 <= len(gens[1].response_ids) <= 5
    assert gens[1].text == policy.tokenizer.decode(gens[1].response_ids, skip_special_tokens=True)
    assert engine.generate([], temperature=1.0) == []


def test_over_long_prompts_are_an_error_when_asked():
    """policy.prompt_overflow=error (verl's data.truncation='error'): the error names the length and the limit."""
    policy = _policy()
    assert len(policy.encode_prompts(CORPUS[:1], 8)[0]) == 8  # truncate_left keeps the last 8 tokens
    n = len(policy.encode_prompts(CORPUS[:1], 10_000)[0])
    with pytest.raises(PromptTooLongError, match=rf"a prompt of {n} tokens is over policy.max_prompt_tokens=8"):
        policy.encode_prompts(CORPUS[:1], 8, overflow="error")
    assert policy.encode_prompts(CORPUS[:1], n, overflow="error")[0] == policy.encode_prompts(CORPUS[:1], n)[0]


@pytest.mark.parametrize("runner, env, kind", [("v1", "0", "v1"), ("default", None, "v2")])
def test_v1_model_runner_unless_asked_otherwise(standin, tmp_path, runner, env, kind):
    """vLLM >= 0.24 runs dense models on its V2 model runner; the engine asks for V1 (VLLM_USE_V2_MODEL_RUNNER=0)
    until a GPU check verifies the sync on V2, and reports the runner the worker actually uses."""
    engine = _engine(_policy(), tmp_path, model_runner=runner)
    assert os.environ.get("VLLM_USE_V2_MODEL_RUNNER") == env
    assert engine.model_runner_kind == kind
    with pytest.raises(ValueError, match="model_runner='v3'"):
        _engine(_policy(), tmp_path, model_runner="v3")


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_sync_loads_detached_weights_in_the_engine_dtype_under_no_grad(standin, tmp_path, tie):
    """Every trainer parameter under its checkpoint name, once: a tied lm_head is not sent (vLLM ties it itself), an
    untied one is; tensors detached, already in vLLM's dtype (bfloat16 from float32 trainer weights); the load runs
    under no_grad, outside autocast and inside vLLM's config context; the prefix cache is reset."""
    policy = _policy(tie=tie)
    engine = _engine(policy, tmp_path, dtype="bfloat16")
    _update(policy)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        engine.sync_weights(policy)
    llm = standin.INSTANCES[-1]
    call = llm.model.calls[-1]
    names = [n for n, _ in policy.model.named_parameters()]
    assert call["names"] == names and ("lm_head.weight" in names) == (not tie)
    assert len(names) == len(policy.model.state_dict()) - int(tie)
    assert call["dtypes"] == {torch.bfloat16} and call["requires_grad"] is False
    assert (call["grad"], call["autocast_cpu"]) == (False, False)
    assert call["config"] is llm.worker.vllm_config
    assert llm.prefix_resets == 1 and engine.last_sync["path"] == "load_weights"
    report = engine.last_sync["parameters"]
    assert report["max_abs_diff"] == 0.0 and report["nan"] == 0 and not report["unmatched"] and not report["unused"]
    assert report["tensors"] == len(list(llm.model.parameters()))  # fused q/k/v and gate/up compared as vLLM holds them


def test_parameter_comparison_is_exact_and_sees_the_fused_layout(standin, tmp_path):
    """After a sync vLLM's weights equal the trainer's cast to vLLM's dtype exactly (0.0); before it they differ by the
    update; the fused qkv_proj is compared against q, k and v concatenated."""
    from scpo.rollout.vllm_weights import compare_with_trainer

    policy = _policy()
    engine = _engine(policy, tmp_path, dtype="bfloat16")
    _update(policy, scale=0.5)
    stale = compare_with_trainer(engine.vllm_model(), policy.model, torch.bfloat16)
    assert stale["max_abs_diff"] > 0.1 and stale["nan"] == 0 and not stale["unmatched"] and not stale["unused"]
    engine.sync_weights(policy)
    fresh = compare_with_trainer(engine.vllm_model(), policy.model, torch.bfloat16)
    assert fresh["max_abs_diff"] == 0.0 and fresh["tensors"] == stale["tensors"]
    qkv = [n for n, _ in engine.vllm_model().named_parameters() if "qkv_proj" in n]
    assert qkv and "model.layers.0.self_attn.q_proj.weight" not in dict(engine.vllm_model().named_parameters())


@pytest.mark.parametrize(
    "fault, message",
    [
        ("drop_weights", r"max \|diff\| [0-9.]+ \(must be 0\)"),
        ("nan", r"1 NaN"),
        ("reset_returns", r"did not reset its prefix cache"),
    ],
)
def test_a_failed_sync_stops_with_an_error(standin, tmp_path, fault, message):
    from scpo.rollout.vllm_engine import WeightSyncError

    policy = _policy()
    engine = _engine(policy, tmp_path)
    _update(policy)
    standin.FAULTS[fault] = fault != "reset_returns"
    with pytest.raises(WeightSyncError, match=message):
        engine.sync_weights(policy)


@pytest.mark.parametrize("broken", [False, True], ids=["in_sync", "weights_not_taken"])
def test_each_sync_is_checked_on_the_logprobs_of_sampled_answers(standin, tmp_path, broken):
    """After a sync, vLLM's log-probs of answers it sampled must be the trainer's within the dtype's tolerance (checked
    even with the parameter comparison off)."""
    from scpo.rollout.vllm_engine import WeightSyncError

    policy = _policy()
    engine = _engine(policy, tmp_path, check_parameters=False)
    engine.generate([f"{c} step {i}" for i, c in enumerate(CORPUS * 2)], temperature=1.0)
    assert len(engine.probes.probes) == 4  # per call: 4 of its distinct prompts
    torch.manual_seed(0)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.copy_(torch.randn_like(p))
    standin.FAULTS["drop_weights"] = broken
    if broken:
        with pytest.raises(WeightSyncError, match=r"log-probs of 4 sampled answers .* differ from the trainer's by"):
            engine.sync_weights(policy)
        assert engine.last_sync["probe"]["mean_abs_diff"] > 0.1
    else:
        engine.sync_weights(policy)
        assert engine.last_sync["probe"]["mean_abs_diff"] < 1e-4 and "parameters" not in engine.last_sync


def test_repacked_weights_go_through_reload_and_are_read_back_exactly(standin, tmp_path):
    """vLLM's CPU backend moves linear weights into kernels and leaves empty parameters: `auto` syncs through the
    worker's reload_weights (the model's load_weights cannot reach them), and the comparison reads them back through the
    kernel (x = I), exactly. Forcing load_weights fails."""
    policy = _policy()
    standin.FAULTS["repack"] = True
    engine = _engine(policy, tmp_path)
    assert engine.dtype == torch.float32
    assert any(p.numel() == 0 for p in engine.vllm_model().parameters())
    _update(policy)
    engine.sync_weights(policy)
    report = engine.last_sync["parameters"]
    assert engine.last_sync["path"] == "reload_weights" and standin.INSTANCES[-1].worker.reloads == 1
    assert report["read_back"] > 0 and report["max_abs_diff"] == 0.0
    engine.sync_path = "load_weights"
    with pytest.raises(RuntimeError, match="repacked"):
        engine.sync_weights(policy)
    assert torch.is_grad_enabled()  # a sync abandoned half-way leaves no no_grad block behind (its weight generators)


def test_sync_merges_lora_under_the_base_names(standin, tmp_path):
    from peft import LoraConfig, get_peft_model

    policy = _policy()
    base_names = [n for n, _ in policy.model.named_parameters()]
    base_q = policy.model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    engine = _engine(policy, tmp_path)
    policy.model = get_peft_model(
        policy.model, LoraConfig(r=2, lora_alpha=4, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.1)  # a non-zero adapter, so merging changes the weights
    merged = copy.deepcopy(policy.model).merge_and_unload()
    engine.sync_weights(policy)
    call = standin.INSTANCES[-1].model.calls[-1]
    assert call["names"] == base_names and not any("lora_" in n for n in call["names"])
    from scpo.rollout.vllm_weights import compare_with_trainer

    assert compare_with_trainer(engine.vllm_model(), merged, torch.float32)["max_abs_diff"] < 1e-6
    q_proj = policy.model.base_model.model.model.layers[0].self_attn.q_proj
    assert torch.allclose(q_proj.base_layer.weight, base_q, atol=1e-6)  # unmerged again after the sync
    assert not torch.allclose(merged.model.layers[0].self_attn.q_proj.weight, base_q)


def test_weight_sync_needs_the_engine_core_in_process(standin, tmp_path, monkeypatch):
    """vLLM's V1 engine runs its core in a child process by default; the engine switches that off before building LLM,
    and refuses in one line an engine whose worker is in another process anyway."""
    policy = _policy()
    _engine(policy, tmp_path, enforce_eager=True)
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    llm = standin.INSTANCES[-1]
    assert llm.kwargs["enforce_eager"] is True and llm.kwargs["logprobs_mode"] == "processed_logprobs"
    monkeypatch.setattr(standin.LLM, "collective_rpc", lambda self, fn, **kw: [os.getpid() + 1])  # another process
    with pytest.raises(RuntimeError, match="VLLM_ENABLE_V1_MULTIPROCESSING must be 0"):
        _engine(policy, tmp_path)


def test_sampler_logprobs_are_the_trainers_on_the_same_weights(standin, tmp_path):
    """Each generation carries vLLM's log-prob of every sampled token after temperature; on the trainer's weights
    (float32) they equal the trainer's temperature-scaled log-probs: what train.rollout_correction=tis divides by."""
    from scpo.policy.logprobs import response_logprobs

    policy = _policy()
    engine = _engine(policy, tmp_path, max_new_tokens=5)
    gens = engine.generate(CORPUS[:3], temperature=0.7)
    mine, mask, _ = response_logprobs(
        policy.model, [g.prompt_ids for g in gens], [g.response_ids for g in gens], policy.tokenizer.pad_token_id, 0.7
    )
    for row, g in enumerate(gens):
        assert len(g.sampler_logprobs) == len(g.response_ids) == int(mask[row].sum())
        assert torch.allclose(torch.tensor(g.sampler_logprobs), mine[row, : len(g.response_ids)].detach(), atol=1e-4)


def test_sleep_mode_frees_vllm_for_the_update_and_the_sync_restores_the_weights(standin, tmp_path):
    """memory_released(): vLLM sleeps at level 2 (weights discarded); generating is refused until sync_weights wakes it
    and loads the trainer's weights, checked exactly; without sleep mode the context does nothing."""
    from scpo.rollout.vllm_engine import WeightSyncError

    policy = _policy()
    engine = _engine(policy, tmp_path, sleep_mode=True)
    llm = standin.INSTANCES[-1]
    assert llm.kwargs["enable_sleep_mode"] is True
    with engine.memory_released():
        _update(policy)
    assert llm.sleeping == 2 and engine.asleep
    assert torch.isnan(next(llm.model.parameters())).all()  # discarded
    with pytest.raises(RuntimeError, match="sync_weights"):
        engine.generate(CORPUS[:1], temperature=1.0)
    engine.sync_weights(policy)
    assert llm.sleeping is None and not engine.asleep
    assert engine.last_sync["parameters"]["max_abs_diff"] == 0.0 and engine.generate(CORPUS[:1], temperature=1.0)
    with engine.memory_released():  # a sync that does not reach vLLM leaves the discarded weights: caught
        standin.FAULTS["skipped_sync"] = True
    with pytest.raises(WeightSyncError, match="NaN"):
        engine.sync_weights(policy)
    plain = _engine(_policy(), tmp_path / "plain")
    with plain.memory_released():
        pass
    assert standin.INSTANCES[-1].sleeping is None and not plain.asleep


@pytest.mark.parametrize("fault", ["skipped_sync", "stale_weights", "stale_layer"])
def test_the_planted_faults_of_the_gpu_check_are_caught(standin, tmp_path, fault):
    """skipped_sync (the weights never reach vLLM's model): the parameter comparison; stale_weights (the parameters
    change, generation keeps the old weights) and stale_layer (the same for one decoder layer): the probes' log-probs,
    as the parameters then match."""
    from scpo.rollout.vllm_engine import WeightSyncError

    policy = _policy(layers=2)
    engine = _engine(policy, tmp_path)
    engine.generate([f"{c} step {i}" for i, c in enumerate(CORPUS * 2)], temperature=1.0)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.copy_(torch.randn_like(p))
    standin.FAULTS[fault] = True
    match = r"max \|diff\| [0-9.e-]+ \(must be 0\)" if fault == "skipped_sync" else r"differ from the trainer's by"
    with pytest.raises(WeightSyncError, match=match) as caught:
        engine.sync_weights(policy)
    assert "\n" not in str(caught.value)  # one line


def test_lora_merge_is_out_of_place_on_a_bfloat16_base(standin, tmp_path):
    """A bfloat16 base with float32 adapters (policy.lora): the sync sends W + B A x scale without merging in place, so
    the base stays bit for bit what it was after any number of syncs (an in-place merge / unmerge rounds it)."""
    from peft import LoraConfig, get_peft_model

    from scpo.rollout.vllm_weights import compare_with_trainer

    policy = _policy()
    engine = _engine(policy, tmp_path, dtype="bfloat16")
    policy.model = get_peft_model(
        policy.model.to(torch.bfloat16), LoraConfig(r=2, lora_alpha=4, target_modules="all-linear")
    )
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.013)
    base = {n: p.detach().clone() for n, p in policy.model.named_parameters() if "base_layer" in n}
    for _ in range(3):
        engine.sync_weights(policy)
    assert all(torch.equal(base[n], p) for n, p in policy.model.named_parameters() if n in base)
    merged = policy.model.merge_and_unload()  # peft's own merge, once, as the reference
    assert compare_with_trainer(engine.vllm_model(), merged, torch.bfloat16)["max_abs_diff"] == 0.0


def test_make_engine_sizes_vllm_by_the_memory_plan(standin, tmp_path):
    """rollout.engine=vllm builds vLLM with the plan's max_num_seqs (one iteration's sequences),
    max_num_batched_tokens and KV cache bytes (`scpo.policy.memory_plan.vllm_sizes`), never the checkpoint's sampling
    defaults."""
    from scpo.config import load_config
    from scpo.policy.memory_plan import model_shape, vllm_sizes
    from scpo.rollout.engine import make_engine

    policy = _policy()
    policy.save(tmp_path / "model")
    cfg = load_config(
        REPO / "params.yaml",
        overrides={"rollout.engine": "vllm", "policy.profile": str(tmp_path / "model"), "policy.dtype": "float32",
                   "rollout.n_tasks": 3, "rollout.group_size": 4, "policy.max_prompt_tokens": 24,
                   "policy.max_new_tokens": 8, "rollout.action_choice": "generate"},
    )  # fmt: skip
    make_engine(cfg, policy, tmp_path / "model")
    kwargs = standin.INSTANCES[-1].kwargs
    sizes = vllm_sizes(cfg, model_shape(policy.model.config))
    assert (
        (kwargs["max_num_seqs"], kwargs["max_num_batched_tokens"])
        == (12, 12 * 32)
        == (
            sizes.max_num_seqs,
            sizes.step_tokens,
        )
    )
    assert kwargs["kv_cache_memory_bytes"] == sizes.kv_cache_bytes == 12 * 32 * 1 * 2 * 16 * 4
    assert kwargs["generation_config"] == "vllm" and kwargs["max_model_len"] == 32
