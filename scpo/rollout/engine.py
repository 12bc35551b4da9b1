"""Generation engines behind one interface (`scpo.rollout.generation.GenerationEngine`): `generate(prompts,
temperature, top_p) -> list[Generation]` and `sync_weights(policy)` after each update.

`TransformersEngine` (CPU, and the twin the tests exercise) calls `model.generate` on the training model itself, so
weight sync is a no-op. `VLLMEngine` (GPU) lives in `scpo.rollout.vllm_engine` and is imported only when selected.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence

from scpo.envs.prompting import action_answer
from scpo.policy.interface import PolicyLike
from scpo.rollout.generation import Generation, GenerationEngine

__all__ = ["TransformersEngine", "make_engine"]


class TransformersEngine:
    """Batched sampling with `model.generate` (left padding; prompts sorted by length to cut padding).

    `action_choice="admissible"` (an option for tiny CPU policies) samples the answer among the admissible commands
    instead: each candidate answer y_k = `<action>a_k</action>` + EOS is scored by the model's sequence log-likelihood
    log p(y_k | x) (one prompt pass, its KV cache shared by all candidates) and drawn with probability proportional to
    p(y_k | x)^(1/T) (`scpo.policy.scoring`). The distribution is the model's, renormalised over the admissible set, so
    answers are always well formed; the generations carry every candidate's ids, and the trainer computes its ratio, KL
    and entropy over this choice (`train.ratio_over`). A command list with a placeholder (WebShop's
    `search[<your query>]`) cannot be enumerated: those prompts are answered by free generation.
    """

    def __init__(
        self,
        policy: PolicyLike,
        max_prompt_tokens: int,
        max_new_tokens: int,
        batch_size: int = 64,
        action_choice: str = "generate",
        prompt_overflow: str = "truncate_left",
        record_logprobs: bool = False,
    ):
        if action_choice not in ("generate", "admissible"):
            raise ValueError(f"action_choice={action_choice!r} is not one of 'generate', 'admissible'")
        self.policy = policy
        self.prompt_overflow = prompt_overflow
        self.max_prompt_tokens = max_prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.action_choice = action_choice
        self.record_logprobs = record_logprobs
        self._answer_cache: dict[
            str, list[int]
        ] = {}  # answer text -> its token ids + EOS (the tokenizer never changes)

    @property
    def prompt_style(self) -> str:
        """verl-agent's prompts for free generation, this package's for the admissible choice
        (`scpo.rollout.collector`)."""
        return "verl_agent" if self.action_choice == "generate" else "scpo"

    def sync_weights(self, policy: PolicyLike) -> None:
        if policy.tokenizer is not self.policy.tokenizer:
            self._answer_cache.clear()
        self.policy = policy  # same model object: nothing to copy

    def memory_released(self):
        """Nothing to release: generation runs on the trained model itself."""
        return contextlib.nullcontext()

    def generate(
        self,
        prompts: Sequence[str],
        temperature: float,
        top_p: float = 1.0,
        admissible: Sequence[Sequence[str]] | None = None,
    ) -> list[Generation]:
        if not prompts:
            return []
        if self.action_choice == "admissible" and admissible is not None:
            free = [i for i, a in enumerate(admissible) if any(_PLACEHOLDER.search(c) for c in a)]
            chosen = sorted(set(range(len(prompts))) - set(free))
            out: list[Generation] = [None] * len(prompts)  # type: ignore[list-item]
            for i, gen in zip(
                chosen,
                self._choose_all([prompts[i] for i in chosen], [list(admissible[i]) for i in chosen], temperature),
            ):
                out[i] = gen
            for i, gen in zip(free, self._sample([prompts[i] for i in free], temperature, top_p)):
                out[i] = gen
            return out
        return self._sample(prompts, temperature, top_p)

    def _sample(self, prompts: Sequence[str], temperature: float, top_p: float) -> list[Generation]:
        """Free generation from softmax(logits / T) (top-p where < 1): no logits processor of the checkpoint's
        generation config applies (`scpo.rollout.sampling.plain_sampling`); answers end at `stop_token_ids`. With
        `record_logprobs` (and T > 0) each generation carries the sampler's log-prob of every answer token."""
        import torch
        from transformers import LogitsProcessorList

        from scpo.policy.padding import left_pad
        from scpo.policy.placement import forward_precision
        from scpo.rollout.sampling import PLAIN_GENERATE_KWARGS, SampledLogprobs, plain_sampling, stop_token_ids

        if not prompts:
            return []
        tok = self.policy.tokenizer
        model = self.policy.model
        ids = self.policy.encode_prompts(prompts, self.max_prompt_tokens, self.prompt_overflow)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out: list[Generation | None] = [None] * len(ids)
        pad, stops = tok.pad_token_id, stop_token_ids(tok, model)
        record = self.record_logprobs and temperature > 0
        was_training = model.training
        model.eval()
        try:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                input_ids, attention = left_pad([ids[i] for i in chunk], pad)
                width = input_ids.shape[1]
                recorder = SampledLogprobs(temperature) if record else None
                if temperature <= 0:
                    sampling = {"do_sample": False}
                elif recorder is not None:  # the recorder divides by T (transformers' warper left out)
                    sampling = {"do_sample": True, "temperature": 1.0, "top_p": top_p, **PLAIN_GENERATE_KWARGS}
                else:
                    sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p, **PLAIN_GENERATE_KWARGS}
                # one weight cast for the call's decoding steps
                with torch.no_grad(), forward_precision(model), plain_sampling(model):
                    seqs = model.generate(
                        input_ids=input_ids.to(model.device),
                        attention_mask=attention.to(model.device),
                        max_new_tokens=self.max_new_tokens,
                        pad_token_id=pad,
                        eos_token_id=stops if len(stops) > 1 else stops[0],
                        logits_processor=LogitsProcessorList([recorder] if recorder is not None else []),
                        **sampling,
                    )
                sampled = recorder.finish(seqs[:, -1]).cpu() if recorder is not None else None
                for row, i in enumerate(chunk):
                    resp = _cut_after_stop(seqs[row, width:].tolist(), stops)
                    out[i] = Generation(
                        text=tok.decode(resp, skip_special_tokens=True),
                        prompt_ids=ids[i],
                        response_ids=resp,
                        sampler_logprobs=sampled[row, : len(resp)].tolist() if sampled is not None else None,
                    )
        finally:
            model.train(was_training)
        return out  # type: ignore[return-value]

    def _choose_all(
        self, prompts: Sequence[str], commands: Sequence[Sequence[str]], temperature: float
    ) -> list[Generation]:
        """One answer per prompt drawn among its commands by sequence likelihood (see the class docstring): every
        prompt scored in one `scpo.policy.scoring.candidate_scores` call (identical rows once, similar lengths
        together), answers drawn prompt by prompt. Each generation carries `choice_logprob`, log pi(k | x) of its draw
        at the sampling temperature (T = 0: at T = 1), which the update reads as the PPO ratio's old log-prob."""
        import torch

        from scpo.policy.scoring import candidate_scores, choice_log_distribution

        if not prompts:
            return []
        tok, model = self.policy.tokenizer, self.policy.model
        prompt_ids = self.policy.encode_prompts(prompts, self.max_prompt_tokens, self.prompt_overflow)
        out: list[Generation | None] = [None] * len(prompts)
        answers = [[action_answer(c) for c in cmds] for cmds in commands]
        cands = [self._answer_ids(a) for a in answers]
        for i in (i for i, c in enumerate(cands) if not c):  # nothing to choose from: an empty (invalid) answer
            out[i] = Generation(text="", prompt_ids=prompt_ids[i], response_ids=[tok.eos_token_id])
        todo = [i for i, c in enumerate(cands) if c]
        if not todo:
            return out  # type: ignore[return-value]
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                scores = candidate_scores(
                    model, [prompt_ids[i] for i in todo], [cands[i] for i in todo], tok.pad_token_id
                )
                log_pi = choice_log_distribution(scores, temperature).cpu()
            for row, i in enumerate(todo):
                lp = log_pi[row, : len(cands[i])]
                pick = int(torch.multinomial(lp.exp(), 1)) if temperature > 0 else int(lp.argmax())
                out[i] = Generation(
                    text=answers[i][pick],
                    prompt_ids=prompt_ids[i],
                    response_ids=cands[i][pick],
                    candidate_ids=cands[i],
                    choice_logprob=float(lp[pick]),
                )
        finally:
            model.train(was_training)
        return out  # type: ignore[return-value]

    def _answer_ids(self, answers: Sequence[str]) -> list[list[int]]:
        """Token ids (+ EOS) of each answer, tokenized once per distinct answer text over the engine's life."""
        tok = self.policy.tokenizer
        new = [a for a in dict.fromkeys(answers) if a not in self._answer_cache]
        if new:
            for a, ids in zip(new, tok(new, add_special_tokens=False)["input_ids"]):
                self._answer_cache[a] = list(ids) + [tok.eos_token_id]
        return [self._answer_cache[a] for a in answers]


_PLACEHOLDER = re.compile(r"<[^<>]+>")


def _cut_after_stop(tokens: list[int], stops: list[int]) -> list[int]:
    """Keep tokens up to and including the first stop token (the answer's end): what `generate` adds after it is
    padding. A row without a stop token never finished, so `generate` padded none of it: every token was sampled and
    is kept (a sampled padding token too)."""
    for k, t in enumerate(tokens):
        if t in stops:
            return tokens[: k + 1]
    return tokens


def make_engine(cfg, policy: PolicyLike, model_dir=None) -> GenerationEngine:
    """The engine named by `cfg.rollout.engine` ('transformers' | 'vllm'); vLLM is imported only here, only if
    chosen, its scheduler and KV cache sized by the memory plan (`scpo.policy.memory_plan.vllm_sizes`)."""
    if cfg.rollout.engine == "transformers":
        return TransformersEngine(
            policy,
            cfg.policy.max_prompt_tokens,
            cfg.policy.max_new_tokens,
            cfg.rollout.batch_size,
            action_choice=cfg.rollout.action_choice,
            prompt_overflow=cfg.policy.prompt_overflow,
        )
    if cfg.rollout.engine == "vllm":
        from scpo.policy.memory_plan import model_shape, vllm_memory_utilization, vllm_sizes
        from scpo.rollout.vllm_engine import VLLMEngine

        sizes = vllm_sizes(cfg, model_shape(policy.model.config))

        return VLLMEngine(
            policy,
            model_dir=model_dir,
            max_prompt_tokens=cfg.policy.max_prompt_tokens,
            max_new_tokens=cfg.policy.max_new_tokens,
            dtype=cfg.policy.dtype,
            gpu_memory_utilization=vllm_memory_utilization(cfg, policy.model.config),
            seed=cfg.train.seed,
            enforce_eager=cfg.rollout.vllm_enforce_eager,
            model_runner=cfg.rollout.vllm_model_runner,
            sync_path=cfg.rollout.vllm_sync_path,
            prompt_overflow=cfg.policy.prompt_overflow,
            sleep_mode=cfg.rollout.vllm_sleep_mode,
            **sizes.engine_kwargs(),
        )
    raise ValueError(f"rollout.engine={cfg.rollout.engine!r} is not one of 'transformers', 'vllm'")
