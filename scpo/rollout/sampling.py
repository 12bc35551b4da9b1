"""Sampling from the policy the trainer scores: pi_T(y_k | x, y_<k) = softmax(logits / T)[y_k], nothing else.

The trainer's log-probs (`scpo.policy.logprobs.response_logprobs`) are log softmax(logits / T) of the model's logits.
A checkpoint's `generation_config.json` can carry logits processors that `model.generate` applies by default
(Qwen2.5-Instruct ships `repetition_penalty: 1.1`, many models `top_k`, some `no_repeat_ngram_size`, `bad_words_ids`,
`suppress_tokens`, `min_new_tokens`, ...), and transformers fills every field a caller leaves unset from it
(`GenerationMixin._prepare_generation_config`: the model's values first, then the global defaults, which include
`top_k=50`). So the transformers engine generates with `plain_sampling(model)`: for the call, the model's generation
config is a bare one (only its special token ids kept), and top-k is switched off explicitly; every processor
transformers knows is then off, and the sampler draws from softmax(logits / T) (top-p applied where `top_p < 1`).

vLLM does the same by construction: the engine passes `generation_config="vllm"` (vLLM's neutral defaults, never the
model's `generation_config.json`) and a `SamplingParams` with every penalty and cut-off at its neutral value
(`neutral_sampling_kwargs`). vLLM reads a model's sampling defaults only when `LLM.generate` is called without
`SamplingParams` (`LLM.get_default_sampling_params`, `ModelConfig.get_diff_sampling_param`); from an explicit one it
takes the model's end-of-sequence ids only (`SamplingParams.update_from_generation_config`).

Both engines stop at the same tokens (`stop_token_ids`): the tokenizer's EOS and the generation config's EOS ids (what
vLLM stops at; Qwen2.5-Instruct's `<|im_end|>` and `<|endoftext|>`).

`SampledLogprobs` records the sampler's own log-prob of each sampled token in the transformers engine (what vLLM returns
as `processed_logprobs`), so the two can be checked against the trainer's recomputation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["plain_sampling", "stop_token_ids", "neutral_sampling_kwargs", "SampledLogprobs", "PLAIN_GENERATE_KWARGS"]

# what a sampling `generate` gets besides a bare generation config: transformers' global default top_k=50 off
PLAIN_GENERATE_KWARGS = {"top_k": 0}

_SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


@contextmanager
def plain_sampling(model) -> Iterator[None]:
    """For the duration, `model.generation_config` (a peft model's: its base model's) is a bare `GenerationConfig`
    holding the original's special token ids only, so `model.generate` applies no logits processor the checkpoint
    configured (module docstring); restored afterwards (a checkpoint saved later keeps its own generation config)."""
    from transformers import GenerationConfig

    target = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft: the model that generates
    saved = getattr(target, "generation_config", None)
    ids = {k: getattr(saved, k, None) for k in _SPECIAL_IDS}
    target.generation_config = GenerationConfig(**{k: v for k, v in ids.items() if v is not None})
    try:
        yield
    finally:
        target.generation_config = saved


def stop_token_ids(tokenizer, model) -> list[int]:
    """The tokens that end an answer: the tokenizer's EOS first, then the model's generation-config EOS ids (one id or
    a list), each once."""
    ids: list[int] = []
    config = getattr(model, "generation_config", None)
    extra = getattr(config, "eos_token_id", None)
    for i in [tokenizer.eos_token_id, *(extra if isinstance(extra, (list, tuple)) else [extra])]:
        if i is not None and int(i) not in ids:
            ids.append(int(i))
    return ids


def neutral_sampling_kwargs() -> dict:
    """vLLM `SamplingParams` fields that could move sampling away from softmax(logits / T), each at its neutral value
    (vLLM 0.25.1's own defaults, stated so that no default elsewhere can change them)."""
    return {
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "top_k": 0,
        "min_p": 0.0,
        "min_tokens": 0,
        "logit_bias": None,
        "allowed_token_ids": None,
        "bad_words": None,
    }


class SampledLogprobs:
    """A transformers logits processor that divides the scores by the temperature T (in place of transformers' own
    `TemperatureLogitsWarper`: `generate` then gets temperature 1) and records log softmax(scores / T) of each token
    the sampler then draws: at call t it reads the token drawn after call t-1 from `input_ids[:, -1]` (one [B, V]
    tensor held, not one per step); `finish(last_tokens)` adds the last step's. -> [B, steps] float32.

    With `top_p < 1` transformers' top-p cut comes after this processor: the recorded log-probs are then those before
    the cut (the trainer's), not the sampler's."""

    def __init__(self, temperature: float):
        if temperature <= 0:
            raise ValueError(f"SampledLogprobs needs a sampling temperature > 0, got {temperature}")
        self.temperature = temperature
        self.previous = None
        self.steps: list = []

    def __call__(self, input_ids, scores):
        import torch

        if self.previous is not None:
            self.steps.append(self.previous.gather(-1, input_ids[:, -1:]).squeeze(-1))
        if self.temperature != 1.0:
            scores = scores / self.temperature
        self.previous = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_tokens):
        """-> [B, steps]: every step's log-prob, the last step's read from `last_tokens` [B]."""
        import torch

        if self.previous is not None:
            self.steps.append(self.previous.gather(-1, last_tokens.view(-1, 1)).squeeze(-1))
            self.previous = None
        return torch.stack(self.steps, dim=1) if self.steps else torch.zeros(len(last_tokens), 0)
