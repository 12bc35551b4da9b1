"""How long a run takes and how much disk it fills, estimated before it starts (pure functions of the config, the
model's shape and stated hardware assumptions; no measurement). `preflight_lines` is what `scpo train`'s preflight
prints beside the memory plan.

Work per iteration, for E = tasks x group size episodes of s steps on average (s <= max_steps), prompts of p tokens and
answers of a tokens on average, answers of at most R tokens, N parameters (T trained), b bytes per 16-bit value:

    step-samples          n = E s
    prefill tokens        n p                     (a turn's prompts are rebuilt, not extended: no prefix reuse assumed)
    decode steps          vLLM: s R_turn           (every episode's turn in one call, continuous batching; a turn
                                                    lasts as long as its longest answer, R_turn = min(R, 2 a))
                          transformers: s ceil(E / batch_size) R_turn   (calls of batch_size prompts, one after another)
    decode step time      vLLM: (b N + E c kv) / (BW eta_vllm)          (memory-bound: the weights and every
                          transformers: (b N + B c kv) / (BW eta_hf) + L tau     sequence's KV cache read once a step;
                                                                        tau: kernel launches per layer, no CUDA graphs)
                          with c = p + a / 2 the mean context, kv = L 2 k b bytes per token, B = min(E, batch_size)
    prefill time          n p 2 N / (F mfu_prefill)
    update time           n (p + a) x_pad 2 N (1 + w + g + 1 + r) / (F mfu_train)
                          (a forward pass, its backward w = 2 forward passes' work, w = 1 with LoRA: no weight
                          gradients of the base; g = 1 more with gradient checkpointing, 1 for the old log-probs,
                          r = 1 for the KL reference; x_pad: the padding the padded update processes)
    environment time      n t_env
    sync                  2 b N / BW_copy (vLLM only: the trainer's weights cast and copied into vLLM)
    critic                n p 2 N / (F mfu_prefill)                          (PPO's critic, `cfg.trains_critic`: its
                          + epochs_c n p x_pad 2 N (1 + 2 + g) / (F mfu_train)  values of the batch's prompts, then
                                                                        its epochs of forward and backward passes)

    per run    = iterations x per iteration;   a sweep of K runs on G GPUs (one run per GPU): ceil(K / G) x per run
    disk       model      = 4 N (float32 weights; LoRA: b N, the base's dtype, adapters merged)
               checkpoint = model + 8 T (AdamW's two float32 moments)  + 12 N with a critic (its float32
                            weights and AdamW moments)
               per run    = keep_checkpoints x checkpoint + model (the final one)
                            + iterations / save_rollouts_every x n (p + a) x bytes_per_token (saved rollouts)

Every throughput figure is an assumption (`Assumptions`, with its source), not a measurement: the numbers are
estimates to plan a run, and `checks/gpu/run.sh` measures the real ones on a GPU. docs/gpu.md tabulates them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Assumptions", "H200", "RunEstimate", "estimate_run", "preflight_lines", "duration_text", "GB"]

GB = 10**9


@dataclass(frozen=True)
class Assumptions:
    """Hardware and workload assumptions of the estimate (none measured here; sources in the comments)."""

    gpu: str = "H200"
    flops: float = 989e12  # dense bfloat16 tensor FLOP/s of an H200 SXM (NVIDIA's data sheet)
    bandwidth: float = 4.8e12  # HBM3e bytes/s of an H200 (data sheet)
    copy_bandwidth: float = 1.0e12  # device-to-device copy of the weight sync, bytes/s (half the HBM's, read + write)
    mfu_train: float = 0.35  # share of peak FLOP/s the padded bf16 update reaches (typical of HF training loops)
    mfu_prefill: float = 0.5  # vLLM's prefill (large matmuls, FlashAttention)
    eta_vllm: float = 0.5  # share of HBM bandwidth a vLLM decode step reaches (CUDA graphs, paged attention)
    eta_hf: float = 0.3  # the same for transformers' eager `generate` (SDPA over a padded cache)
    # s of launch and Python overhead per layer and decode step in transformers' eager `generate` (a 1-2B model decodes
    # ~30-40 tokens/s at batch 1 with it: ~25 ms a step over 28 layers, bandwidth a small part of it)
    tau_hf: float = 0.8e-3
    mean_steps_share: float = 0.8  # s = this x max_steps (early GiGPO training: most ALFWorld episodes fail)
    # p: a prompt with 2 history pairs and the admissible list, Qwen2.5 tokens (WebShop's pages are longer)
    prompt_tokens: tuple[tuple[str, int], ...] = (("alfworld", 1000), ("webshop", 2000))
    other_prompt_tokens: int = 1000
    answer_tokens: int = 200  # a: a <think> paragraph and the action
    env_step_s: float = 0.005  # t_env: one ALFWorld step of this package's engine, s
    update_padding: float = 1.3  # x_pad: tokens the padded micro-batches process over the real ones
    rollout_bytes_per_token: float = 8.0  # saved rollouts: a token id (4 bytes) and ~4 characters of text


H200 = Assumptions()


@dataclass(frozen=True)
class RunEstimate:
    """Seconds per iteration by part, per run, and bytes on disk per run."""

    parts: dict[str, float]  # generation (prefill + decode), update, environment, sync: seconds per iteration
    iterations: int
    checkpoint_bytes: int
    kept_checkpoints: int
    final_model_bytes: int
    rollout_bytes: int

    @property
    def iteration_s(self) -> float:
        return sum(self.parts.values())

    @property
    def run_s(self) -> float:
        return self.iterations * self.iteration_s

    @property
    def disk_bytes(self) -> int:
        return self.kept_checkpoints * self.checkpoint_bytes + self.final_model_bytes + self.rollout_bytes

    def sweep_s(self, runs: int, gpus: int) -> float:
        """K runs on G GPUs, one run per GPU at a time."""
        return math.ceil(runs / gpus) * self.run_s


def estimate_run(cfg, shape, env: str | None = None, assume: Assumptions = H200) -> RunEstimate:
    """The estimate of `cfg` (a `scpo.config.Config`, for `env` or its `env.name`) for a model of `shape`
    (`scpo.policy.memory_plan.ModelShape`), under `assume` (module docstring)."""
    from scpo.policy.profiles import torch_dtype

    env = env or cfg.env.name
    b = torch_dtype(cfg.policy.dtype).itemsize
    n_params = shape.params
    trained = shape.lora_params if cfg.policy.lora else n_params
    episodes = cfg.rollout.n_tasks * cfg.rollout.group_size
    steps = assume.mean_steps_share * getattr(cfg.env, env).max_steps
    p = dict(assume.prompt_tokens).get(env, assume.other_prompt_tokens)
    a, r = assume.answer_tokens, cfg.policy.max_new_tokens
    samples = episodes * steps
    r_turn = min(r, 2 * a)
    kv = shape.layers * 2 * shape.kv_width * b
    context = p + a / 2
    if cfg.rollout.engine == "vllm":
        step_s = (b * n_params + episodes * context * kv) / (assume.bandwidth * assume.eta_vllm)
        decode_s = steps * r_turn * step_s
        sync_s = 2 * b * n_params / assume.copy_bandwidth
    else:
        batch = min(episodes, cfg.rollout.batch_size)
        step_s = (b * n_params + batch * context * kv) / (
            assume.bandwidth * assume.eta_hf
        ) + shape.layers * assume.tau_hf
        decode_s = steps * math.ceil(episodes / batch) * r_turn * step_s
        sync_s = 0.0
    prefill_s = samples * p * 2 * n_params / (assume.flops * assume.mfu_prefill)
    backward = 1 if cfg.policy.lora else 2
    passes = 1 + backward + (1 if cfg.train.gradient_checkpointing else 0) + 1 + (1 if cfg.train.kl_coef > 0 else 0)
    update_s = samples * (p + a) * assume.update_padding * 2 * n_params * passes / (assume.flops * assume.mfu_train)
    critic_s = 0.0
    critic_bytes = 0
    if getattr(cfg, "trains_critic", False):
        g = 1 if cfg.train.gradient_checkpointing else 0
        critic_s = samples * p * 2 * n_params / (assume.flops * assume.mfu_prefill) + cfg.train.critic.epochs * (
            samples * p * assume.update_padding * 2 * n_params * (3 + g) / (assume.flops * assume.mfu_train)
        )
        critic_bytes = 12 * n_params
    parts = {
        "generation": prefill_s + decode_s,
        "update": update_s,
        "environment": samples * assume.env_step_s,
        "sync": sync_s,
        "critic": critic_s,
    }
    every = cfg.train.save_rollouts_every
    saved_iterations = cfg.train.iterations // every if every else 0
    kept = cfg.train.keep_checkpoints
    checkpoints = cfg.train.iterations // cfg.train.checkpoint_every if cfg.train.checkpoint_every else 0
    model_bytes = (b if cfg.policy.lora else 4) * n_params
    return RunEstimate(
        parts=parts,
        iterations=cfg.train.iterations,
        checkpoint_bytes=model_bytes + 8 * trained + critic_bytes,
        kept_checkpoints=min(kept, checkpoints) if kept is not None else checkpoints,
        final_model_bytes=model_bytes,
        rollout_bytes=int(saved_iterations * samples * (p + a) * assume.rollout_bytes_per_token),
    )


def duration_text(seconds: float) -> str:
    """`45 s`, `12 min`, `3.5 h` or `2.1 days`."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def preflight_lines(cfg, shape, env: str | None = None, assume: Assumptions = H200) -> list[str]:
    """What the training preflight prints beside the memory plan: time per iteration (by part) and per run, disk per
    run, each marked as an estimate on `assume.gpu`."""
    est = estimate_run(cfg, shape, env, assume)
    parts = ", ".join(f"{k} {duration_text(v)}" for k, v in est.parts.items() if v >= 0.5)
    return [
        f"time estimate ({assume.gpu}, {cfg.rollout.engine} engine, assumed throughput): "
        f"{duration_text(est.iteration_s)} per iteration ({parts}), "
        f"{duration_text(est.run_s)} for {est.iterations} iterations",
        f"disk estimate: {est.disk_bytes / GB:.1f} GB per run ({est.kept_checkpoints} checkpoints of "
        f"{est.checkpoint_bytes / GB:.1f} GB, final model {est.final_model_bytes / GB:.1f} GB, saved rollouts "
        f"{est.rollout_bytes / GB:.1f} GB)",
    ]
