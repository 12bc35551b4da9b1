"""vLLM generation engine (GPU). Imported only when `rollout.engine: vllm`; never on CPU.

Written against vLLM's offline API (`vllm.LLM`, `vllm.SamplingParams`, `LLM.generate` on token-id prompts), targeting
vLLM 0.6-0.10. Weight sync after each update pushes the trainer's parameters into the engine's model with the model's
own `load_weights(iterable of (name, tensor))`, the way TRL's GRPOTrainer does it; prefix caches are reset afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from scpo.rollout.engine import Generation, encode_prompts

__all__ = ["VLLMEngine"]


class VLLMEngine:
    """Sampling with vLLM on the same GPU as the trainer (`gpu_memory_utilization` leaves room for training)."""

    def __init__(self, policy, model_dir: str | Path | None, max_prompt_tokens: int, max_new_tokens: int,
                 dtype: str = "bfloat16", gpu_memory_utilization: float = 0.4, seed: int = 0):
        from vllm import LLM  # noqa: PLC0415  (GPU only)

        source = str(model_dir) if model_dir is not None else policy.profile
        self.policy = policy
        self.max_prompt_tokens = max_prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.llm = LLM(model=source, tokenizer=source, dtype=dtype, seed=seed, enable_prefix_caching=True,
                       gpu_memory_utilization=gpu_memory_utilization,
                       max_model_len=max_prompt_tokens + max_new_tokens)

    def generate(self, prompts: Sequence[str], temperature: float, top_p: float = 1.0,
                 admissible: Sequence[Sequence[str]] | None = None) -> list[Generation]:
        """Free-text sampling (`admissible` is not used: large models answer in the `<think>/<action>` format)."""
        from vllm import SamplingParams

        if not prompts:
            return []
        ids = encode_prompts(self.policy, prompts, self.max_prompt_tokens)
        params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=self.max_new_tokens)
        outputs = self.llm.generate([{"prompt_token_ids": x} for x in ids], sampling_params=params, use_tqdm=False)
        return [Generation(text=o.outputs[0].text, prompt_ids=list(p), response_ids=list(o.outputs[0].token_ids))
                for o, p in zip(outputs, ids)]

    def sync_weights(self, policy) -> None:
        """Copy the trainer's weights into vLLM's model (LoRA merged first), then drop stale prefix caches."""
        model = policy.model
        if hasattr(model, "merge_adapter"):  # peft: merge, load, unmerge (state_dict tensors are views: load them
            model.merge_adapter()            # before unmerging, which restores the base weights in place)
            try:
                state = {k.replace("base_model.model.", "").replace(".base_layer", ""): v
                         for k, v in model.state_dict().items() if "lora_" not in k}
                self._engine_model().load_weights(state.items())
            finally:
                model.unmerge_adapter()
        else:
            self._engine_model().load_weights(model.state_dict().items())
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()

    def _engine_model(self):
        """The torch model inside vLLM's (single-process) engine: V0 and V1 layouts."""
        executor = self.llm.llm_engine.model_executor
        worker = executor.driver_worker
        worker = getattr(worker, "worker", worker)  # V1 wraps the worker once more
        return worker.model_runner.model
