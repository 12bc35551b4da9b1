"""The memory plan (scpo.policy.memory_plan): its parameter counts are the architecture's, its estimate of a small
Qwen2's RL update on the CPU is within 25 % of the memory that update measures, the run's plan prints the estimated peak
and refuses in one line a run over its device's memory, and vLLM's planned share follows weights + KV cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scpo.config import load_config
from scpo.policy.memory_plan import GIB, MemoryPlanError, model_shape, plan_memory, vllm_memory_utilization
from scpo.policy.qwen2_shapes import qwen2_config
from scpo.run.inputs import check_memory, critic_lines, estimate_lines, start_models

from helpers.runs import CORRIDOR

ROOT = Path(__file__).resolve().parents[2]
H200 = 141 * 10**9  # bytes of HBM (nominal)


def test_parameter_count_is_qwen25_15bs():
    """Counted on the meta device, equal to the sum over the architecture's tensors (q/k/v with biases, tied
    embedding, RMSNorm weights)."""
    c = qwen2_config("qwen2.5-1.5b")
    h, f, n_layers, v = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
    kv = c.num_key_value_heads * (h // c.num_attention_heads)
    per_layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * f + 2 * h
    shape = model_shape(c)
    assert shape.params == v * h + n_layers * per_layer + h == 1_543_714_304
    assert shape.kv_width == 256 and shape.layers == 28
    assert model_shape(c, lora_r=16).lora_params == 16 * n_layers * (
        (h + h) + 2 * (h + kv) + (h + h) + 2 * (h + f) + (f + h)
    )


def _gpu(**overrides):
    return load_config(ROOT / "params.yaml", profile="gpu", overrides=overrides)


def test_gpu_profile_at_qwen25_15b_fits_one_h200_only_with_gradient_checkpointing():
    """Without checkpointing the micro-batch's activations (~80 GB) and vLLM's old fixed 0.4 share do not fit an
    H200; with the profile's settings (checkpointing, vLLM's share from the plan) the run fits with room to spare."""
    shape = model_shape(qwen2_config("qwen2.5-1.5b"))
    plan = plan_memory(_gpu(**{"rollout.engine": "vllm"}), shape, H200)
    assert plan.fits and 40 * GIB < plan.peak < 70 * GIB, plan.line()
    assert 8 * GIB < plan.engine["vllm_kv_cache"] < 10 * GIB  # 128 sequences x 2,560 tokens x 28 KiB
    old = plan_memory(_gpu(**{"rollout.engine": "vllm", "train.gradient_checkpointing": False}), shape, H200)
    assert old.update["activations"] > 70 * GIB
    assert old.peak - sum(old.engine.values()) + 0.4 * H200 > H200  # the recipe before: does not fit
    share = vllm_memory_utilization(_gpu(**{"rollout.engine": "vllm"}), qwen2_config("qwen2.5-1.5b"), H200)
    assert 0.1 < share < 0.2 and share * H200 >= sum(plan.engine.values())
    fixed = _gpu(**{"rollout.engine": "vllm", "rollout.vllm_gpu_memory_utilization": 0.3})
    assert vllm_memory_utilization(fixed, qwen2_config("qwen2.5-1.5b"), H200) == 0.3


def test_sleep_mode_and_lora_shrink_the_peak():
    """Sleep mode frees vLLM during the update (peak = held + the larger phase); LoRA drops the float32 master weights,
    gradients and AdamW state of the base, and the reference (the adapter disabled)."""
    shape = model_shape(qwen2_config("qwen2.5-1.5b"), lora_r=16)
    awake = plan_memory(_gpu(**{"rollout.engine": "vllm"}), shape, H200)
    asleep = plan_memory(_gpu(**{"rollout.engine": "vllm", "rollout.vllm_sleep_mode": True}), shape, H200)
    assert asleep.peak < awake.peak
    lora = plan_memory(_gpu(**{"rollout.engine": "vllm", "policy.lora": True}), shape, H200)
    assert lora.trainer["reference"] == 0 and lora.update["casts"] == 0
    assert lora.trainer["adamw"] == 8 * shape.lora_params and lora.peak < awake.peak


def test_the_plan_prints_the_peak_and_refuses_what_does_not_fit(tmp_path):
    import torch

    cfg = load_config("params.yaml", profile="smoke", overrides={**CORRIDOR, "train.device": "cpu"})
    start, _ = start_models(cfg, tmp_path / "run")
    line = check_memory(cfg, start, torch.device("cpu"))
    assert line.startswith("memory plan: estimated peak ") and "GiB per CPU (RAM) of " in line
    with pytest.raises(MemoryPlanError, match=r"^memory plan: estimated peak .* over the device's memory; lower"):
        check_memory(cfg, start, torch.device("cpu"), capacity=1024)


def test_the_preflight_estimates_time_and_disk_from_the_memory_plans_model(tmp_path):
    """The lines a GPU run's preflight prints beside the memory plan: time per iteration and per run, disk per run."""
    cfg = load_config("params.yaml", profile="smoke", overrides={**CORRIDOR, "train.device": "cpu"})
    start, _ = start_models(cfg, tmp_path / "run")
    lines = estimate_lines(cfg, start)
    assert len(lines) == 2
    assert lines[0].startswith("time estimate (H200, ") and " per iteration (" in lines[0]
    assert f" for {cfg.train.iterations} iterations" in lines[0]
    assert lines[1].startswith("disk estimate: ") and " GB per run (" in lines[1]


@pytest.mark.slow
def test_the_estimate_is_within_25_percent_of_a_measured_cpu_update():
    """benchmarks/memory_plan.py's measurement at small sizes, in a fresh process: a random Qwen2 (4 layers of 512, the
    paper's 151,936-token vocabulary), float32 weights under bf16 autocast with gradient checkpointing, a bf16
    reference, AdamW, two minibatches of `ppo_update`; peak RSS growth against the plan's trainer + update terms."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/memory_plan.py"),
            "--case",
            "bfloat16:1",
            "--micro-batch=2",
            "--prompt=96",
            "--answer=32",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert 0.75 <= row["estimate_over_measured"] <= 1.25, row


def test_ppos_critic_adds_a_trained_float32_copy_and_its_own_micro_batch():
    """The critic (credit.method ppo) holds 16 N more (float32 weights, grads, AdamW moments); its micro-batch of
    prompts (no answer, no logits) runs after the policy's update, so the peak takes the larger of the two. Qwen2.5-1.5B
    with verl-agent's recipe: 23 GiB more, still within an H200, beyond an 80 GB H100."""
    shape = model_shape(qwen2_config("qwen2.5-1.5b"))
    plain = plan_memory(_gpu(**{"rollout.engine": "vllm"}), shape, H200)
    ppo = plan_memory(_gpu(**{"rollout.engine": "vllm", "credit.method": "ppo"}), shape, H200)
    n = shape.params
    assert plain.critic_held == 0 and plain.critic_update == {}
    held = (ppo.trainer["critic_weights"], ppo.trainer["critic_grads"], ppo.trainer["critic_adamw"])
    assert held == (4 * n, 4 * n, 8 * n)
    tokens = 16 * 2048  # train.critic.micro_batch_size prompts of policy.max_prompt_tokens, gradient checkpointing
    a = 46 * shape.hidden + 12 * shape.kv_width + 8 * shape.intermediate
    assert ppo.critic_update["critic_activations"] == tokens * (shape.layers * 4 * shape.hidden + a)
    update, critic = sum(ppo.update.values()), sum(ppo.critic_update.values())
    assert ppo.peak == sum(ppo.trainer.values()) + max(update, critic) + sum(ppo.engine.values())
    assert ppo.peak - plain.peak >= 16 * n and ppo.fits and ppo.peak > 80 * 10**9
    assert "critic_weights 5.8" in ppo.line() and "critic_activations" in ppo.line()


def test_the_preflight_names_the_critics_memory_and_work_on_any_device(tmp_path):
    cfg = load_config("params.yaml", profile="smoke", overrides={**CORRIDOR, "credit.method": "ppo"})
    start, _ = start_models(cfg, tmp_path / "run")
    (line,) = critic_lines(cfg, start)
    assert line.startswith("critic (credit.method ppo): a value model from the start model's weights, +")
    assert " GiB held (float32 weights, grads, AdamW) and +" in line and "3 epoch(s) of minibatches of 32 steps" in line
    assert critic_lines(load_config("params.yaml", profile="smoke", overrides=CORRIDOR), start) == []
