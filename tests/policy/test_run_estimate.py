"""The run estimate (scpo.policy.run_estimate) against hand-computed figures, vLLM's sizes from the memory plan, and
SmolLM2's shape known before its conversion (so the plan and the estimate do not change once the model is converted)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scpo.config import load_config
from scpo.policy.memory_plan import ModelShape, known_config, model_shape, plan_memory, vllm_sizes
from scpo.policy.qwen2_shapes import qwen2_config
from scpo.policy.run_estimate import Assumptions, estimate_run, preflight_lines

ROOT = Path(__file__).resolve().parents[2]
SHAPE = ModelShape(params=10**9, linear_params=9 * 10**8, lora_params=0, layers=10, hidden=1000, kv_width=100,
                   intermediate=4000, vocab=50_000)  # fmt: skip
FLAT = Assumptions(flops=1e15, bandwidth=1e12, copy_bandwidth=1e12, mfu_train=0.5, mfu_prefill=0.5, eta_vllm=0.5,
                   eta_hf=0.25, tau_hf=1e-3, mean_steps_share=0.5, prompt_tokens=(("alfworld", 1000),),
                   answer_tokens=100, env_step_s=0.01, update_padding=1.0, rollout_bytes_per_token=8.0)  # fmt: skip


def _gpu(**overrides):
    return load_config(ROOT / "params.yaml", profile="gpu", overrides={"env.name": "alfworld", **overrides})


def test_vllm_estimate_by_hand():
    """16 x 8 = 128 episodes of 25 steps (0.5 x 50): 3,200 step-samples of 1,000 + 100 tokens; bf16 (b = 2)."""
    est = estimate_run(_gpu(**{"rollout.engine": "vllm"}), SHAPE, assume=FLAT)
    samples, b, n = 128 * 25, 2, 10**9
    kv = 10 * 2 * 100 * b  # bytes per token
    step = (b * n + 128 * (1000 + 50) * kv) / (1e12 * 0.5)
    decode = 25 * min(512, 200) * step
    prefill = samples * 1000 * 2 * n / (1e15 * 0.5)
    update = samples * 1100 * 2 * n * (1 + 2 + 1 + 1 + 1) / (1e15 * 0.5)  # checkpointing, old log-probs, reference
    assert est.parts["generation"] == pytest.approx(prefill + decode)
    assert est.parts["update"] == pytest.approx(update)
    assert est.parts["environment"] == pytest.approx(samples * 0.01)
    assert est.parts["sync"] == pytest.approx(2 * b * n / 1e12)
    assert est.run_s == pytest.approx(150 * est.iteration_s)
    assert est.sweep_s(48, 8) == pytest.approx(6 * est.run_s) and est.sweep_s(9, 8) == pytest.approx(2 * est.run_s)


def test_transformers_engine_decodes_in_batches_with_launch_overhead():
    est = estimate_run(_gpu(**{"rollout.engine": "transformers", "rollout.batch_size": 64}), SHAPE, assume=FLAT)
    b, n, kv = 2, 10**9, 10 * 2 * 100 * 2
    step = (b * n + 64 * 1050 * kv) / (1e12 * 0.25) + 10 * 1e-3
    prefill = 128 * 25 * 1000 * 2 * n / (1e15 * 0.5)
    assert est.parts["generation"] == pytest.approx(prefill + 25 * 2 * 200 * step)
    assert est.parts["sync"] == 0.0


def test_disk_per_run_by_hand():
    """A checkpoint holds float32 weights and AdamW's two moments: 12 N bytes (18.5 GB for Qwen2.5-1.5B); the run keeps
    train.keep_checkpoints of them, the final model and every saved iteration's rollouts."""
    cfg = _gpu()
    est = estimate_run(cfg, SHAPE, assume=FLAT)
    assert est.checkpoint_bytes == 12 * 10**9 and est.final_model_bytes == 4 * 10**9
    assert est.kept_checkpoints == cfg.train.keep_checkpoints == 3
    assert est.rollout_bytes == 150 * 128 * 25 * 1100 * 8
    assert est.disk_bytes == 3 * 12 * 10**9 + 4 * 10**9 + est.rollout_bytes
    qwen = estimate_run(cfg, model_shape(qwen2_config("qwen2.5-1.5b")))
    assert qwen.checkpoint_bytes == 12 * 1_543_714_304
    lora = estimate_run(_gpu(**{"policy.lora": True}), model_shape(qwen2_config("qwen2.5-7b"), lora_r=16))
    shape7 = model_shape(qwen2_config("qwen2.5-7b"), lora_r=16)
    assert lora.final_model_bytes == 2 * shape7.params  # merged into the bfloat16 base
    assert lora.checkpoint_bytes == 2 * shape7.params + 8 * shape7.lora_params


def test_preflight_lines_name_the_estimates_and_their_basis():
    lines = preflight_lines(_gpu(**{"rollout.engine": "vllm"}), model_shape(qwen2_config("qwen2.5-1.5b")))
    assert len(lines) == 2
    assert lines[0].startswith("time estimate (H200, vllm engine, assumed throughput): ")
    assert " per iteration (generation " in lines[0] and " for 150 iterations" in lines[0]
    assert lines[1].startswith("disk estimate: ") and "3 checkpoints of 18.5 GB" in lines[1]


def test_vllm_is_sized_by_the_plan():
    """max_num_seqs = one iteration's sequences, max_num_batched_tokens = min(n_seq S, max(S, 16,384)), the KV cache of
    n_seq full sequences; the plan's vLLM terms are built from the same sizes."""
    cfg = _gpu(**{"rollout.engine": "vllm"})
    shape = model_shape(qwen2_config("qwen2.5-1.5b"))
    sizes = vllm_sizes(cfg, shape)
    assert (sizes.max_num_seqs, sizes.step_tokens) == (128, 16384)
    assert sizes.kv_cache_bytes == 128 * 2560 * 28 * 2 * 256 * 2
    plan = plan_memory(cfg, shape)
    assert plan.engine["vllm_kv_cache"] == sizes.kv_cache_bytes
    assert plan.engine["vllm_activations"] == 16384 * (3 * 8960 + 3 * 1536 + 2 * 256) * 2
    assert plan.engine["vllm_logits"] == (512 + 32) * 151_936 * 10  # the probe's prompt log-probs: the larger
    small = vllm_sizes(
        load_config(ROOT / "params.yaml", overrides={"rollout.n_tasks": 4, "rollout.group_size": 8}), shape
    )
    assert small.max_num_seqs == 4 * 8 and small.step_tokens == min(32 * (1024 + 32), 16384)
    assert sizes.engine_kwargs() == {"max_num_seqs": 128, "max_num_batched_tokens": 16384,
                                     "kv_cache_memory_bytes": sizes.kv_cache_bytes}  # fmt: skip


@pytest.mark.slow
def test_smollm2s_shape_is_known_before_its_conversion():
    """The shipped config equals the GGUF file's metadata (llama.* keys), so the plan and the estimate of a SmolLM2 run
    are the same before the first conversion and after it."""
    import gguf

    from scpo.policy.smollm2 import gguf_path

    fields = gguf.GGUFReader(gguf_path()).fields

    def value(key):
        return fields[key].contents()

    config = known_config("smollm2-135m")
    assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size) == (
        value("llama.block_count"),
        value("llama.embedding_length"),
        value("llama.feed_forward_length"),
    )
    assert (config.num_attention_heads, config.num_key_value_heads) == (
        value("llama.attention.head_count"),
        value("llama.attention.head_count_kv"),
    )
    assert config.vocab_size == value("llama.vocab_size") == len(fields["tokenizer.ggml.tokens"].data)
    assert config.head_dim == value("llama.rope.dimension_count")
    assert math.isclose(config.rope_parameters["rope_theta"], value("llama.rope.freq_base"))
    assert model_shape(config).params == 134_515_008  # vLLM's count of SmolLM2's elements (experiments/vllm_sync_cpu)
    assert known_config("tiny") is None


def test_a_critic_adds_its_passes_and_its_checkpoint_bytes_by_hand():
    """PPO's critic (a float32 copy of the start model): one forward pass over the batch's prompts for its values, then
    train.critic.epochs of forward + backward (+ a recomputation with checkpointing) over them; a checkpoint holds its
    weights and AdamW moments (12 N bytes more). Every other method: no critic part."""
    est = estimate_run(_gpu(**{"credit.method": "ppo", "train.critic.epochs": 2}), SHAPE, assume=FLAT)
    samples, n = 128 * 25, 10**9
    values = samples * 1000 * 2 * n / (1e15 * 0.5)
    fit = 2 * samples * 1000 * 2 * n * (1 + 2 + 1) / (1e15 * 0.5)
    assert est.parts["critic"] == pytest.approx(values + fit)
    assert est.checkpoint_bytes == 12 * 10**9 + 12 * 10**9
    plain = estimate_run(_gpu(), SHAPE, assume=FLAT)
    assert plain.parts["critic"] == 0.0 and plain.checkpoint_bytes == 12 * 10**9
    assert est.parts["update"] == plain.parts["update"] and est.parts["generation"] == plain.parts["generation"]
    line = preflight_lines(_gpu(**{"credit.method": "ppo"}), model_shape(qwen2_config("qwen2.5-1.5b")))[0]
    assert ", critic " in line
