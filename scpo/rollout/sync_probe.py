"""The check of every vLLM weight sync on answers: vLLM's log-probs of sampled answers against the trainer's.

After a sync, vLLM must score text as the trainer does. The probes are (prompt, answer) pairs the engine sampled in
its recent `generate` calls: distinct prompts only (a task's rollouts reset identically, so one call holds each of
its first prompts many times), a few from each call, evenly spread over the call's distinct prompts (episodes are
ordered task by task, so that spreads over tasks), the newest kept (later calls are later steps of the episodes).
Each probe's answer is scored at its positions past the answer format's opening tag (`<think>`, which the format forces,
so its log-prob is ~0 under any weights), at most `answer_tokens` of them, after the last `context` tokens of its prompt
(both sides score the same token sequence, so a cut prompt is as good a test of the weights; vLLM's prompt log-probs
cost (context + answer) x vocabulary floats per probe, scored one probe at a time: `scpo.policy.memory_plan`):

    vLLM:    log p_vLLM(y_k | x, y_<k)      prompt log-probs of x + y (`SamplingParams(prompt_logprobs=0)`), T = 1
    trainer: log p_theta(y_k | x, y_<k)     `scpo.policy.logprobs.response_logprobs`, as the update computes them
    failed when  mean_k |vLLM - trainer| > tolerance(vLLM's dtype)

Log-probs rather than greedy tokens: a near-tie flips a greedy token under bfloat16 rounding alone, and a forced
token agrees under any weights. The tolerance is 0.1 nats in bfloat16: 2.4 times the mean |difference| on the same
weights measured on an H200 (SmolLM2, vLLM 0.24, bfloat16 vLLM vs the float32 trainer under bfloat16 autocast: 0.042,
p99 0.19; `checks/gpu/results/vllm_engine_check/engine.json`); 1e-3 in float32, where the two compute the same
function to rounding. The exact parameter comparison (`scpo.rollout.vllm_weights`) sees a weight that is off by one
update; this check sees vLLM serving other weights than it holds (a stale layer in its kernels, a cache not reset).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scpo.policy.memory_plan import PROBE_ANSWER, PROBE_CONTEXT

__all__ = ["Probe", "SyncProbes", "probe_tolerance", "TOLERANCE"]

TOLERANCE = {"float32": 1e-3, "bfloat16": 0.1, "float16": 0.05}  # mean |log-prob difference| allowed, nats


def probe_tolerance(dtype) -> float:
    """The tolerance for vLLM's dtype (a torch dtype or its name)."""
    name = str(dtype).removeprefix("torch.")
    if name not in TOLERANCE:
        raise ValueError(f"no sync-probe tolerance for dtype {name!r} (one of {', '.join(TOLERANCE)})")
    return TOLERANCE[name]


@dataclass(frozen=True)
class Probe:
    """A prompt, an answer sampled for it, and the first answer position compared (`skip`)."""

    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]
    skip: int


def _gap(a, b) -> float:
    """|a - b|, infinite when either is not finite (a NaN never passes)."""
    d = abs(float(a) - float(b))
    return d if math.isfinite(d) else math.inf


def _skip(answer: Sequence[int], opening: Sequence[int]) -> int:
    """The answer's leading positions the format forces: its opening tag's tokens when it starts with them."""
    n = len(opening)
    return n if n and tuple(answer[:n]) == tuple(opening) else 0


class SyncProbes:
    """Up to `size` probes from the newest `generate` calls (module docstring); `per_call` of each call's distinct
    prompts are taken, evenly spaced; `opening` is the token ids of the answer format's opening tag."""

    def __init__(
        self,
        size: int = 16,
        per_call: int = 4,
        answer_tokens: int = PROBE_ANSWER,
        context: int = PROBE_CONTEXT,
        opening: Sequence[int] = (),
    ):
        if min(size, per_call, answer_tokens, context) < 1:
            raise ValueError(f"size={size}, per_call={per_call}, answer_tokens={answer_tokens}, context={context}: "
                             "each must be >= 1")  # fmt: skip
        self.size, self.per_call, self.answer_tokens, self.context = size, per_call, answer_tokens, context
        self.opening = tuple(opening)
        self.probes: list[Probe] = []

    def offer(self, prompt_ids: Sequence[Sequence[int]], answer_ids: Sequence[Sequence[int]]) -> None:
        """One `generate` call's prompts and sampled answers: up to `per_call` new distinct prompts join the probes
        (evenly spread over the call's distinct prompts), the oldest leave when more than `size` are held."""
        held = {p.prompt_ids for p in self.probes}
        fresh: dict[tuple[int, ...], Probe] = {}
        for prompt, answer in zip(prompt_ids, answer_ids):
            key = tuple(prompt[-self.context :])
            if key in held or key in fresh:
                continue
            skip = _skip(answer, self.opening)
            cut = tuple(answer[: skip + self.answer_tokens])
            if len(cut) > skip:  # something to compare past the opening tag
                fresh[key] = Probe(key, cut, skip)
        candidates = list(fresh.values())
        if not candidates:
            return
        take = min(self.per_call, len(candidates))
        picked = [candidates[(k * len(candidates)) // take] for k in range(take)]
        self.probes = (self.probes + picked)[-self.size :]

    def compare(self, vllm_logprobs: Sequence[Sequence[float]], trainer_logprobs: Sequence[Sequence[float]]) -> dict:
        """Per-token log-probs of each probe's answer (all of its tokens, in order) from vLLM and from the trainer ->
        {"probes", "tokens", "mean_abs_diff", "max_abs_diff", "worst_probe_mean"} over the positions past `skip`."""
        diffs, worst = [], 0.0
        for probe, theirs, mine in zip(self.probes, vllm_logprobs, trainer_logprobs):
            d = [_gap(a, b) for a, b in zip(theirs[probe.skip :], mine[probe.skip :])]
            if d:
                diffs += d
                worst = max(worst, sum(d) / len(d))
        if not diffs:
            return {"probes": 0, "tokens": 0, "mean_abs_diff": 0.0, "max_abs_diff": 0.0, "worst_probe_mean": 0.0}
        return {
            "probes": len(self.probes),
            "tokens": len(diffs),
            "mean_abs_diff": sum(diffs) / len(diffs),
            "max_abs_diff": max(diffs),
            "worst_probe_mean": worst,
        }
