"""The vLLM engine's glue, against a stand-in `vllm` module (no GPU here): token-id prompts truncated like the CPU
engine's, sampling parameters passed through, outputs mapped to `Generation`s, and weight sync handing vLLM's model every
trainer parameter under the names vLLM expects (LoRA merged, adapter tensors left out)."""

from __future__ import annotations

import os
import sys
import types

import pytest
import torch

from scpo.policy import Policy
from scpo.policy.tiny import build_tiny_model, train_tokenizer

CORPUS = ["You are in room 1 of 3. Admissible actions: look, go east, go west",
          "You see a key here. Your task is to: open the door at the end with the key"] * 5


class _FakeModel:
    def __init__(self, twin=None):
        self.loaded: dict[str, torch.Tensor] = {}
        self.twin = twin  # a torch model standing for vLLM's copy of the weights (None: no forward pass)

    def load_weights(self, weights):
        weights = {name: t.detach().clone() for name, t in weights}
        self.loaded.update(weights)
        if self.twin is not None and not _FakeLLM.drop_weights:
            self.twin.load_state_dict(weights, strict=False)


class _FakeLLM:
    instances: list["_FakeLLM"] = []
    reloads = True  # whether the worker has reload_weights
    twin = None  # a copy of the policy's model: vLLM's weights, used for max_tokens=1 greedy steps
    drop_weights = False  # a broken sync: the twin keeps its weights

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list[tuple[list, object]] = []
        self.prefix_resets = 0
        self.reloaded = 0
        self.model = _FakeModel(_FakeLLM.twin)
        runner = types.SimpleNamespace(model=self.model)
        inner = types.SimpleNamespace(model_runner=runner)
        if self.reloads:  # vLLM >= 0.11: the worker reloads checkpoint-format weights layer by layer
            inner.reload_weights = self._reload
        worker = types.SimpleNamespace(worker=inner)  # V1: worker wrapped once
        if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0":  # like vLLM 0.24's V1 LLMEngine
            self.llm_engine = types.SimpleNamespace(model_executor=types.SimpleNamespace(driver_worker=worker))
        else:  # engine core in a child process: no model_executor here
            self.llm_engine = types.SimpleNamespace()
        _FakeLLM.instances.append(self)

    def _reload(self, weights_iterator, is_checkpoint_format):
        assert is_checkpoint_format
        self.reloaded += 1
        self.model.load_weights(weights_iterator)

    def generate(self, prompts, sampling_params, use_tqdm=True):
        if sampling_params.max_tokens == 1 and self.model.twin is not None:  # greedy next token from vLLM's weights
            with torch.no_grad():
                return [types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=(int(self.model.twin(
                    input_ids=torch.tensor([p["prompt_token_ids"]])).logits[0, -1].argmax()),))]) for p in prompts]
        self.calls.append((prompts, sampling_params))
        return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"<action>look {i}</action>",
                                                                     token_ids=(7, i, 2))])
                for i, _ in enumerate(prompts)]

    def reset_prefix_cache(self):
        self.prefix_resets += 1


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = _FakeLLM
    module.SamplingParams = lambda **kw: types.SimpleNamespace(**kw)
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(_FakeLLM, "reloads", True)
    monkeypatch.setattr(_FakeLLM, "twin", None)
    monkeypatch.setattr(_FakeLLM, "drop_weights", False)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # vLLM's default; restored after the test
    _FakeLLM.instances.clear()
    return module


@pytest.fixture
def policy():
    tok = train_tokenizer(CORPUS, vocab_size=300)
    return Policy(model=build_tiny_model(tok, hidden_size=16, layers=1, heads=2), tokenizer=tok, profile="tiny")


def test_generate_sends_truncated_token_ids_and_maps_outputs(fake_vllm, policy, tmp_path):
    from scpo.rollout.vllm_engine import VLLMEngine

    engine = VLLMEngine(policy, model_dir=tmp_path, max_prompt_tokens=8, max_new_tokens=5, dtype="float32",
                        gpu_memory_utilization=0.3, seed=4)
    llm = _FakeLLM.instances[-1]
    assert llm.kwargs["model"] == str(tmp_path) and llm.kwargs["max_model_len"] == 13 and llm.kwargs["seed"] == 4
    assert llm.kwargs["enforce_eager"] is False
    gens = engine.generate(CORPUS[:2], temperature=0.7, top_p=0.9)
    prompts, params = llm.calls[-1]
    assert [p["prompt_token_ids"] for p in prompts] == policy.encode_prompts(CORPUS[:2], 8)
    assert all(len(p["prompt_token_ids"]) == 8 for p in prompts)
    assert (params.temperature, params.top_p, params.max_tokens) == (0.7, 0.9, 5)
    assert [g.text for g in gens] == ["<action>look 0</action>", "<action>look 1</action>"]
    assert gens[1].response_ids == [7, 1, 2] and gens[1].prompt_ids == prompts[1]["prompt_token_ids"]
    assert engine.generate([], temperature=1.0) == []


@pytest.mark.parametrize("reloads", [True, False], ids=["reload_weights", "load_weights"])
def test_sync_weights_pushes_every_parameter(fake_vllm, policy, tmp_path, reloads):
    """Through the worker's reload_weights where vLLM has it (0.11+), else the model's load_weights."""
    from scpo.rollout.vllm_engine import VLLMEngine

    _FakeLLM.reloads = reloads
    engine = VLLMEngine(policy, model_dir=tmp_path, max_prompt_tokens=8, max_new_tokens=4)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.5)  # "after an update"
    engine.sync_weights(policy)
    llm = _FakeLLM.instances[-1]
    state = policy.model.state_dict()
    assert set(llm.model.loaded) == set(state)
    assert all(torch.equal(llm.model.loaded[k], v) for k, v in state.items())
    assert llm.prefix_resets == 1
    assert llm.reloaded == (1 if reloads else 0)


def test_sync_weights_merges_lora_under_the_base_names(fake_vllm, policy, tmp_path):
    import copy

    from peft import LoraConfig, get_peft_model

    from scpo.rollout.vllm_engine import VLLMEngine

    base_state = copy.deepcopy(policy.model).state_dict()
    policy.model = get_peft_model(policy.model, LoraConfig(r=2, lora_alpha=4, target_modules="all-linear",
                                                           task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.1)  # a non-zero adapter, so merging changes the weights
    merged = copy.deepcopy(policy.model).merge_and_unload().state_dict()
    engine = VLLMEngine(policy, model_dir=tmp_path, max_prompt_tokens=8, max_new_tokens=4)
    engine.sync_weights(policy)
    loaded = _FakeLLM.instances[-1].model.loaded
    assert set(loaded) == set(base_state) and not any("lora_" in k for k in loaded)
    assert all(torch.allclose(loaded[k], merged[k], atol=1e-6) for k in merged)
    assert any(not torch.equal(loaded[k], base_state[k]) for k in base_state)


def test_weight_sync_needs_the_engine_core_in_process(fake_vllm, policy, tmp_path, monkeypatch):
    """vLLM's V1 engine runs its core in a child process by default; the engine switches that off before building LLM,
    and says what is wrong if the model is out of reach anyway."""
    from scpo.rollout.vllm_engine import VLLMEngine

    engine = VLLMEngine(policy, model_dir=tmp_path, max_prompt_tokens=8, max_new_tokens=4, enforce_eager=True)
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert _FakeLLM.instances[-1].kwargs["enforce_eager"] is True
    engine.llm.llm_engine = types.SimpleNamespace()  # as if built with multiprocessing on
    with pytest.raises(RuntimeError, match="VLLM_ENABLE_V1_MULTIPROCESSING"):
        engine.sync_weights(policy)


@pytest.mark.parametrize("broken", [False, True], ids=["in_sync", "weights_not_taken"])
def test_each_sync_is_checked_on_probe_prompts(fake_vllm, policy, tmp_path, broken):
    """After a sync, vLLM's greedy next token on the first prompts it served must match the trainer's; a sync that
    leaves vLLM on other weights stops training with an error instead of sampling from another policy."""
    import copy

    from scpo.rollout.vllm_engine import SYNC_PROBES, VLLMEngine

    _FakeLLM.twin = copy.deepcopy(policy.model)  # vLLM loads the same checkpoint
    _FakeLLM.drop_weights = broken
    engine = VLLMEngine(policy, model_dir=tmp_path, max_prompt_tokens=16, max_new_tokens=4)
    prompts = [f"{c} step {i}" for i, c in enumerate(CORPUS * 2)]
    engine.generate(prompts, temperature=1.0)
    assert len(engine.probe_ids) == SYNC_PROBES
    torch.manual_seed(0)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.copy_(torch.randn_like(p))  # "after an update": new weights, new greedy tokens
    if broken:
        with pytest.raises(RuntimeError, match=r"sync check failed.*agrees with the trainer's on \d+% of 8"):
            engine.sync_weights(policy)
        assert engine.last_sync_agreement < 0.5
    else:
        engine.sync_weights(policy)
        assert engine.last_sync_agreement == 1.0
