"""What a generation engine returns (`Generation`) and the interface every engine implements (`GenerationEngine`):
`generate(prompts, temperature, top_p, admissible) -> list[Generation]`, and `sync_weights(policy)` after each update.
The engines: `scpo.rollout.engine.TransformersEngine` (CPU) and `scpo.rollout.vllm_engine.VLLMEngine` (GPU)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Generation", "GenerationEngine"]


@dataclass
class Generation:
    """One sampled answer: decoded `text`, the (truncated) prompt token ids it was conditioned on and the answer's ids.

    `candidate_ids` are the token ids of every answer the sampler chose among (admissible choice only; `response_ids` is
    one of them), so the trainer can compute the probability of the choice that was actually sampled;
    `choice_logprob` is that probability's log as the sampler drew it, log pi(k | x) at the sampling temperature.
    `sampler_logprobs` (vLLM only): the sampler's log-prob of each answer token after temperature, for the
    importance-sampling correction of the sampler / trainer mismatch (`train.rollout_correction`).
    """

    text: str
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    candidate_ids: list[list[int]] | None = None
    choice_logprob: float | None = None
    sampler_logprobs: list[float] | None = None


class GenerationEngine(Protocol):
    """Samples answers for a batch of prompts; `admissible[i]` are prompt i's admissible commands (engines that choose
    among them use it, free-text engines ignore it). An engine may say which prompts its path takes (`prompt_style`:
    "verl_agent" for free text, "scpo" when absent: `scpo.rollout.collector.prompt_style`)."""

    def generate(
        self,
        prompts: Sequence[str],
        temperature: float,
        top_p: float = 1.0,
        admissible: Sequence[Sequence[str]] | None = None,
    ) -> list[Generation]: ...

    def sync_weights(self, policy) -> None:
        """Make the next `generate` sample from `policy`'s current weights."""
