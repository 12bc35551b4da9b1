"""vLLM generation engine (GPU). Imported only when `rollout.engine: vllm`; never on CPU.

Written against vLLM's offline API (`vllm.LLM`, `vllm.SamplingParams`, `LLM.generate` on token-id prompts). Weight sync
after each update pushes the trainer's (HF-named) parameters into the engine's model, the way TRL's GRPOTrainer does in
colocate mode, and resets the prefix cache. That needs the engine core in this process: vLLM's V1 engine runs it in a
child process unless `VLLM_ENABLE_V1_MULTIPROCESSING=0`, which the engine sets before building `LLM`.

Measured on one H200 with vLLM 0.24 (`checks/gpu/results/vllm_engine_check/`): generation agrees with the trainer on the
same weights (94 % same greedy first token, 0.04 nats per token log-prob difference) at 3.5x the transformers engine's
tokens per second, but after a sync vLLM's answers agreed with the updated trainer on 0 % of the prompts, through both
load paths below (the same sync works on vLLM 0.30's CPU build: `experiments/vllm_sync_cpu/vllm_sync_cpu.py`). Every
sync is therefore checked on probe prompts and a failed one stops training with an error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from scpo.policy.interface import PolicyLike
from scpo.rollout.generation import Generation

__all__ = ["VLLMEngine", "SYNC_PROBES", "MIN_SYNC_AGREEMENT"]

SYNC_PROBES = 8  # prompts whose next token is compared after every weight sync
MIN_SYNC_AGREEMENT = 0.5  # below this share of agreeing probes the sync is taken as failed


class VLLMEngine:
    """Sampling with vLLM on the same GPU as the trainer (`gpu_memory_utilization` leaves room for training)."""

    def __init__(self, policy: PolicyLike, model_dir: str | Path | None, max_prompt_tokens: int, max_new_tokens: int,
                 dtype: str = "bfloat16", gpu_memory_utilization: float = 0.4, seed: int = 0,
                 enforce_eager: bool = False):
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in-process: sync_weights reaches its model
        from vllm import LLM  # noqa: PLC0415  (GPU only)

        source = str(model_dir) if model_dir is not None else policy.profile
        self.policy = policy
        self.max_prompt_tokens = max_prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.llm = LLM(model=source, tokenizer=source, dtype=dtype, seed=seed, enable_prefix_caching=True,
                       gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
                       max_model_len=max_prompt_tokens + max_new_tokens)
        self.probe_ids: list[list[int]] = []  # the first prompts generated for, kept to check each weight sync
        self.last_sync_agreement: float | None = None

    def generate(self, prompts: Sequence[str], temperature: float, top_p: float = 1.0,
                 admissible: Sequence[Sequence[str]] | None = None) -> list[Generation]:
        """Free-text sampling (`admissible` is not used: large models answer in the `<think>/<action>` format)."""
        from vllm import SamplingParams

        if not prompts:
            return []
        ids = self.policy.encode_prompts(prompts, self.max_prompt_tokens)
        if not self.probe_ids:
            self.probe_ids = [list(x) for x in ids[:SYNC_PROBES]]
        params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=self.max_new_tokens)
        outputs = self.llm.generate([{"prompt_token_ids": x} for x in ids], sampling_params=params, use_tqdm=False)
        return [Generation(text=o.outputs[0].text, prompt_ids=list(p), response_ids=list(o.outputs[0].token_ids))
                for o, p in zip(outputs, ids)]

    def sync_weights(self, policy: PolicyLike) -> None:
        """Copy the trainer's weights into vLLM's model (LoRA merged first), then drop stale prefix caches."""
        model = policy.model
        if hasattr(model, "merge_adapter"):  # peft: merge, load, unmerge (state_dict tensors are views: load them
            model.merge_adapter()            # before unmerging, which restores the base weights in place)
            try:
                state = {k.replace("base_model.model.", "").replace(".base_layer", ""): v
                         for k, v in model.state_dict().items() if "lora_" not in k}
                self._load(state.items())
            finally:
                model.unmerge_adapter()
        else:
            self._load(model.state_dict().items())
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()
        if self.probe_ids:
            self.last_sync_agreement = self.next_token_agreement(policy)
            if self.last_sync_agreement < MIN_SYNC_AGREEMENT:
                raise RuntimeError(
                    f"vLLM weight sync check failed: after the trainer's weights were pushed, vLLM's greedy next token "
                    f"agrees with the trainer's on {self.last_sync_agreement:.0%} of {len(self.probe_ids)} probe "
                    f"prompts (bfloat16 rounding alone leaves ~94%); vLLM would sample from another policy. "
                    f"Use rollout.engine=transformers")

    def next_token_agreement(self, policy: PolicyLike) -> float:
        """Share of the probe prompts whose greedy next token is the same in vLLM and in the trainer's model."""
        import torch
        from vllm import SamplingParams

        outs = self.llm.generate([{"prompt_token_ids": x} for x in self.probe_ids], use_tqdm=False,
                                 sampling_params=SamplingParams(temperature=0.0, max_tokens=1))
        model = policy.model
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                mine = [int(model(input_ids=torch.tensor([x], device=policy.device)).logits[0, -1].argmax())
                        for x in self.probe_ids]
        finally:
            model.train(was_training)
        theirs = [o.outputs[0].token_ids[0] if o.outputs[0].token_ids else -1 for o in outs]
        return sum(a == b for a, b in zip(mine, theirs)) / len(mine)

    def _load(self, weights) -> None:
        """Checkpoint-format (HF-named) weights into the engine's model.

        vLLM >= 0.11 workers have `reload_weights`: it restores each layer's checkpoint layout, loads, and re-runs the
        layer's post-load processing. A bare `model.load_weights` on the processed model is what older vLLM needed; on
        vLLM 0.24 (H200) it left the model answering unlike the trainer's on every prompt (greedy agreement 0 %).
        """
        worker = self._driver_worker()
        if hasattr(worker, "reload_weights"):
            worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
        else:
            worker.model_runner.model.load_weights(weights)

    def _driver_worker(self):
        """The worker inside vLLM's in-process engine (V0 layout, and V1's with multiprocessing off)."""
        executor = getattr(self.llm.llm_engine, "model_executor", None)
        if executor is None:
            raise RuntimeError("vLLM's engine core runs in another process, so weights cannot be pushed into it; "
                               "VLLM_ENABLE_V1_MULTIPROCESSING must be 0 when vllm.LLM is built")
        worker = executor.driver_worker
        return getattr(worker, "worker", worker)  # V1 wraps the worker once more
