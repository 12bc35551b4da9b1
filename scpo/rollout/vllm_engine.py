"""vLLM generation engine (GPU; vLLM's CPU build runs it too). Imported only when `rollout.engine: vllm`.

Generation: vLLM's offline API (`vllm.LLM.generate` on token-id prompts, the prompts encoded and truncated exactly as
the transformers engine does), outside the trainer's autocast; vLLM returns token ids only (`detokenize=False`) and the
answer text is decoded by the policy's tokenizer, as in the transformers engine.

Weight sync, after every update, follows TRL's colocate path (`trl.generation.vllm_generation.VLLMGeneration`: the
engine core in this process, each trainer parameter pushed under its checkpoint name into the model's `load_weights`,
then `reset_prefix_cache()`), with what the H200 run of vLLM 0.24 (0 % agreement after a sync,
checks/gpu/results/vllm_engine_check) showed missing:
- vLLM's V1 model runner unless asked otherwise (`model_runner="v1"` sets VLLM_USE_V2_MODEL_RUNNER=0): from vLLM 0.24
  dense models default to the V2 runner, whose weight sync no GPU run has verified yet;
- the load runs under `torch.no_grad()`, outside any autocast, inside vLLM's `set_current_vllm_config` (as at load
  time), with detached tensors already in vLLM's dtype and on its device; tied weights are sent once (`lm_head` not at
  all); CUDA is synchronised before the engine is used again;
- `reset_prefix_cache()` must return True (False: requests still held KV blocks computed with the old weights);
- every sync is verified: vLLM's parameters are compared with the trainer's cast to vLLM's dtype (max |diff| must be
  exactly 0, no NaN, every parameter matched: `scpo.rollout.vllm_weights`), then the greedy next token on probe prompts
  (>= 50 % agreement). Any failure raises `WeightSyncError`, so a run never samples from another policy.
Where vLLM repacks weights at load (its CPU backend moves linear weights into oneDNN kernels) the model's `load_weights`
cannot reach them; `sync_path="auto"` then uses the worker's `reload_weights`, which restores the checkpoint layout,
loads and re-runs the post-load processing.

Why not TRL's `VLLMGeneration` itself: it is built around an accelerate `Accelerator` and fixed sampling settings per
instance (TRL's trainers), while this trainer is a plain loop that samples at several temperatures; its sync has none of
the checks above. The calls it makes into vLLM are the same.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path

from scpo.policy.interface import PolicyLike
from scpo.rollout.generation import Generation

__all__ = ["VLLMEngine", "WeightSyncError", "SYNC_PROBES", "MIN_SYNC_AGREEMENT", "outside_autocast"]

SYNC_PROBES = 8  # prompts whose next token is compared after every weight sync
MIN_SYNC_AGREEMENT = 0.5  # below this share of agreeing probes the sync is taken as failed


class WeightSyncError(RuntimeError):
    """vLLM does not hold the trainer's weights after a sync."""


@contextmanager
def outside_autocast():
    """Autocast off on CPU and CUDA for the duration (the trainer's loop runs under autocast to policy.dtype)."""
    import torch

    with ExitStack() as stack:
        stack.enter_context(torch.autocast("cpu", enabled=False))
        if torch.cuda.is_available():
            stack.enter_context(torch.autocast("cuda", enabled=False))
        yield


class VLLMEngine:
    """Sampling with vLLM on the same GPU as the trainer (`gpu_memory_utilization` leaves room for training)."""

    def __init__(
        self,
        policy: PolicyLike,
        model_dir: str | Path | None,
        max_prompt_tokens: int,
        max_new_tokens: int,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.4,
        seed: int = 0,
        enforce_eager: bool = False,
        model_runner: str = "v1",
        sync_path: str = "auto",
        prompt_overflow: str = "truncate_left",
        check_parameters: bool = True,
    ):
        if model_runner not in ("v1", "default"):
            raise ValueError(f"model_runner={model_runner!r} is not one of 'v1', 'default'")
        if sync_path not in ("auto", "load_weights", "reload_weights"):
            raise ValueError(f"sync_path={sync_path!r} is not one of 'auto', 'load_weights', 'reload_weights'")
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in-process: sync_weights reaches its model
        if model_runner == "v1":
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
        else:
            os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)  # vLLM's own choice
        from vllm import LLM

        source = str(model_dir) if model_dir is not None else policy.profile
        self.policy = policy
        self.max_prompt_tokens = max_prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.prompt_overflow = prompt_overflow
        self.sync_path = sync_path
        self.check_parameters = check_parameters
        with outside_autocast():
            self.llm = LLM(
                model=source,
                tokenizer=source,
                dtype=dtype,
                seed=seed,
                enable_prefix_caching=True,
                gpu_memory_utilization=gpu_memory_utilization,
                enforce_eager=enforce_eager,
                max_model_len=max_prompt_tokens + max_new_tokens,
            )
        self.probe_ids: list[list[int]] = []  # the first prompts generated for, kept to check each weight sync
        self.last_sync_agreement: float | None = None
        self.last_sync: dict = {}

    # ------------------------------------------------------------------------------------------------------ generation
    def generate(
        self,
        prompts: Sequence[str],
        temperature: float,
        top_p: float = 1.0,
        admissible: Sequence[Sequence[str]] | None = None,
    ) -> list[Generation]:
        """Free-text sampling (`admissible` is not used: large models answer in the `<think>/<action>` format)."""
        from vllm import SamplingParams

        if not prompts:
            return []
        ids = self.policy.encode_prompts(prompts, self.max_prompt_tokens, self.prompt_overflow)
        if not self.probe_ids:
            self.probe_ids = [list(x) for x in ids[:SYNC_PROBES]]
        params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=self.max_new_tokens, detokenize=False)
        with outside_autocast():
            outputs = self.llm.generate([{"prompt_token_ids": x} for x in ids], sampling_params=params, use_tqdm=False)
        decode = self.policy.tokenizer.decode
        return [
            Generation(
                text=decode(list(o.outputs[0].token_ids), skip_special_tokens=True),
                prompt_ids=list(p),
                response_ids=list(o.outputs[0].token_ids),
            )
            for o, p in zip(outputs, ids)
        ]

    # ----------------------------------------------------------------------------------------------------- weight sync
    @property
    def model_runner_kind(self) -> str:
        """'v2' or 'v1': the model runner vLLM's worker actually uses."""
        worker = self._driver_worker()
        flag = getattr(worker, "use_v2_model_runner", None)
        if flag is not None:
            return "v2" if flag else "v1"
        module = type(worker.model_runner).__module__
        return "v2" if (".worker.gpu." in module or ".worker.cpu." in module) else "v1"

    def vllm_model(self):
        """vLLM's model (`nn.Module`) inside its in-process worker, unwrapped from any CUDA-graph wrapper."""
        runner = self._driver_worker().model_runner
        return runner.get_model() if hasattr(runner, "get_model") else runner.model

    def sync_weights(self, policy) -> None:
        """Push the trainer's weights into vLLM, reset its prefix cache, and verify (see the module docstring)."""
        import torch

        from scpo.rollout.vllm_weights import cast_weights, compare_with_trainer, trainer_parameters, vllm_model_dtype

        t0 = time.perf_counter()
        worker = self._driver_worker()
        model = self.vllm_model()
        dtype = _engine_dtype(worker) or vllm_model_dtype(model)
        device = _engine_device(model)
        path = self._resolve_sync_path(model, worker)
        with (
            torch.no_grad(),
            outside_autocast(),
            _vllm_config_context(worker),
            trainer_parameters(policy.model) as named,
        ):
            weights = cast_weights(named, dtype, device)
            if path == "reload_weights":
                worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
            else:
                model.load_weights(weights)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        reset = self.llm.reset_prefix_cache()
        if reset is False:
            raise WeightSyncError(
                "vLLM did not reset its prefix cache after the weight sync (reset_prefix_cache() "
                "returned False: requests still hold KV blocks computed with the old weights)"
            )
        self.last_sync = {
            "path": path,
            "runner": self.model_runner_kind,
            "dtype": str(dtype).removeprefix("torch."),
            "load_s": time.perf_counter() - t0,
            "prefix_cache_reset": reset,
        }
        if self.check_parameters:
            with outside_autocast():
                report = compare_with_trainer(self.vllm_model(), policy.model, dtype)
            self.last_sync["parameters"] = report
            bad = (
                report["max_abs_diff"] != 0.0
                or report["nan"]
                or report["unmatched"]
                or report["unused"]
                or report["shape_mismatch"]
                or not report["tensors"]
            )
            if bad:
                raise WeightSyncError(
                    f"vLLM weight sync check failed ({path}, {self.model_runner_kind} runner): vLLM's parameters vs "
                    f"the trainer's in {self.last_sync['dtype']}: max |diff| {report['max_abs_diff']:.3g} (must be 0), "
                    f"{report['nan']} NaN, {len(report['unmatched'])} unmatched {report['unmatched'][:3]}, "
                    f"{len(report['unused'])} trainer weights not taken {report['unused'][:3]}, shape mismatches "
                    f"{report['shape_mismatch'][:3]}, largest {report['largest']}. Use rollout.engine=transformers"
                )
        if self.probe_ids:
            self.last_sync_agreement = self.next_token_agreement(policy)
            self.last_sync["probe_agreement"] = self.last_sync_agreement
            if self.last_sync_agreement < MIN_SYNC_AGREEMENT:
                raise WeightSyncError(
                    f"vLLM weight sync check failed: after the trainer's weights were pushed, vLLM's greedy next token "
                    f"agrees with the trainer's on {self.last_sync_agreement:.0%} of {len(self.probe_ids)} probe "
                    f"prompts (bfloat16 rounding alone leaves ~94%); vLLM would sample from another policy. "
                    f"Use rollout.engine=transformers"
                )
        self.last_sync["total_s"] = time.perf_counter() - t0

    def next_token_agreement(self, policy: PolicyLike) -> float:
        """Share of the probe prompts whose greedy next token is the same in vLLM and in the trainer's model."""
        import torch
        from vllm import SamplingParams

        with outside_autocast():
            outs = self.llm.generate(
                [{"prompt_token_ids": x} for x in self.probe_ids],
                use_tqdm=False,
                sampling_params=SamplingParams(temperature=0.0, max_tokens=1, detokenize=False),
            )
        model = policy.model
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                mine = [
                    int(model(input_ids=torch.tensor([x], device=policy.device)).logits[0, -1].argmax())
                    for x in self.probe_ids
                ]
        finally:
            model.train(was_training)
        theirs = [o.outputs[0].token_ids[0] if o.outputs[0].token_ids else -1 for o in outs]
        return sum(a == b for a, b in zip(mine, theirs)) / len(mine)

    def _resolve_sync_path(self, model, worker) -> str:
        """`auto`: reload_weights where vLLM left a parameter empty at load (weights repacked into kernels, its CPU
        backend) and the worker can reload; the model's load_weights (TRL's path) otherwise."""
        if self.sync_path != "auto":
            if self.sync_path == "reload_weights" and not hasattr(worker, "reload_weights"):
                raise WeightSyncError("sync_path='reload_weights' but this vLLM's worker has no reload_weights")
            return self.sync_path
        repacked = any(p.numel() == 0 for p in model.parameters())
        return "reload_weights" if repacked and hasattr(worker, "reload_weights") else "load_weights"

    def _driver_worker(self):
        """The worker inside vLLM's in-process engine (V0 layout, and V1's with multiprocessing off)."""
        executor = getattr(self.llm.llm_engine, "model_executor", None)
        if executor is None:
            raise RuntimeError(
                "vLLM's engine core runs in another process, so weights cannot be pushed into it; "
                "VLLM_ENABLE_V1_MULTIPROCESSING must be 0 when vllm.LLM is built"
            )
        worker = executor.driver_worker
        return getattr(worker, "worker", worker)  # V1 wraps the worker once more


def _engine_dtype(worker):
    """vLLM's model dtype from its config (None if the worker does not say)."""
    config = getattr(worker, "vllm_config", None)
    return getattr(getattr(config, "model_config", None), "dtype", None)


def _engine_device(model):
    import torch

    for p in model.parameters():
        if p.numel():
            return p.device
    return torch.device("cpu")


def _vllm_config_context(worker):
    """vLLM's `set_current_vllm_config(worker.vllm_config)`, as when it loaded the model (a no-op where absent)."""
    config = getattr(worker, "vllm_config", None)
    try:
        from vllm.config import set_current_vllm_config
    except ImportError:
        return nullcontext()
    return set_current_vllm_config(config) if config is not None else nullcontext()
