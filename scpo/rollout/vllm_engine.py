"""vLLM generation engine (GPU; vLLM's CPU build runs it too). Imported only when `rollout.engine: vllm`.

Colocated with the trainer as TRL's colocate mode runs vLLM (`trl.generation.vllm_generation.VLLMGeneration`): one
`vllm.LLM` whose engine core runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, what vLLM sets for TRL's external
launcher), on the trainer's GPU, with `gpu_memory_utilization` its share of that GPU and optionally vLLM's sleep mode.
Everything goes through vLLM's public `LLM` API: `generate`, `collective_rpc` (a function run with vLLM's worker: in
this process it is called directly, nothing is pickled), `reset_prefix_cache`, `sleep` / `wake_up`; no attribute path
into vLLM's engine.

Generation: `LLM.generate` on token-id prompts (encoded and truncated exactly as the transformers engine does), outside
any autocast, `detokenize=False` (the policy's tokenizer decodes), with the log-prob of each sampled token after
temperature (`logprobs_mode="processed_logprobs"`, TRL's setting), kept on the `Generation` for the optional
importance-sampling correction (`train.rollout_correction`). It samples softmax(logits / T), the trainer's policy:
vLLM built with `generation_config="vllm"` (never the checkpoint's sampling defaults) and every penalty and cut-off of
`SamplingParams` at its neutral value (`scpo.rollout.sampling`). Its scheduler and KV cache are sized by the memory
plan (`scpo.policy.memory_plan.vllm_sizes`: `max_num_seqs` one iteration's sequences, `max_num_batched_tokens`,
`kv_cache_memory_bytes` their KV cache) where the caller passes them; else vLLM's defaults.

Weight sync, after every update, as TRL's colocate sync does it (every trainer weight under its checkpoint name into
the model's `load_weights`, then `reset_prefix_cache()`), run inside the worker through `collective_rpc` under vLLM's
`set_current_vllm_config` (as at load time), under `no_grad`, outside autocast, with detached tensors already in vLLM's
dtype and on its device, tied weights sent once, LoRA merged out of place (`scpo.rollout.vllm_weights`). Every sync is
verified: vLLM's parameters are compared with the trainer's cast to vLLM's dtype (max |diff| exactly 0, no NaN, every
parameter matched), then vLLM's log-probs of answers it sampled against the trainer's (`scpo.rollout.sync_probe`:
distinct prompts of recent calls, positions past the format's opening tag, mean |difference| within a tolerance of
vLLM's dtype); `reset_prefix_cache()` must return True. Any failure raises `WeightSyncError`, so a run never samples
from another policy. Where vLLM repacks weights at load (its CPU backend moves linear weights into oneDNN kernels) the
model's `load_weights` cannot reach them; `sync_path="auto"` then uses the worker's `reload_weights` (restores the
checkpoint layout, loads, re-runs post-load processing).

Sleep mode (`sleep_mode=True`, TRL's `enable_sleep_mode`): `with engine.memory_released(): <update>` puts vLLM to sleep
at level 2 (weights and KV cache freed) for the update, and the next `sync_weights` wakes it and loads the new weights.
TRL sleeps around every `generate`, one per step of its single-turn trainers; a multi-turn rollout calls `generate` once
per turn, so here vLLM sleeps around the update only.

Why not TRL's `VLLMGeneration` itself: it takes no `dtype` or `enforce_eager` for vLLM, fixes the sampling settings
per instance (this trainer samples at several temperatures), sleeps and re-pushes the weights around every `generate`,
and merges LoRA in place (a bfloat16 base is rounded by each merge / unmerge). Why not vLLM's weight-transfer engines
(`init_weight_transfer_engine`, `update_weights`; backends NCCL and CUDA IPC): they move weights to an engine in another
process, while the exact comparison after each sync needs vLLM's weights and the trainer's in one process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from pathlib import Path

from scpo.policy.interface import PolicyLike
from scpo.rollout.generation import Generation

__all__ = ["VLLMEngine", "WeightSyncError", "SYNC_PROBES", "outside_autocast"]

SYNC_PROBES = 16  # (prompt, answer) pairs whose log-probs are compared after every weight sync


class WeightSyncError(RuntimeError):
    """vLLM does not hold the trainer's weights after a sync."""


@contextmanager
def outside_autocast():
    """Autocast off on CPU and CUDA for the duration."""
    import torch

    with ExitStack() as stack:
        stack.enter_context(torch.autocast("cpu", enabled=False))
        if torch.cuda.is_available():
            stack.enter_context(torch.autocast("cuda", enabled=False))
        yield


# ---------------------------------------------------------------------------------------- run inside vLLM's worker
def _worker_pid(worker) -> int:
    return os.getpid()


def _worker_facts(worker) -> dict:
    """vLLM's model dtype and the model runner its worker uses ('v2' | 'v1')."""
    flag = getattr(worker, "use_v2_model_runner", None)
    if flag is None:
        module = type(worker.model_runner).__module__
        flag = ".worker.gpu." in module or ".worker.cpu." in module
    config = getattr(worker, "vllm_config", None)
    dtype = getattr(getattr(config, "model_config", None), "dtype", None)
    if dtype is None:
        from scpo.rollout.vllm_weights import vllm_model_dtype

        dtype = vllm_model_dtype(worker.get_model())
    return {"dtype": dtype, "runner": "v2" if flag else "v1"}


def _worker_model(worker):
    return worker.get_model()


def _worker_load(worker, weights: Iterator, path: str) -> str:
    """Load `weights` into the worker's model (`load_weights`, TRL's path) or through `reload_weights`; -> the path.
    `path="auto"`: reload_weights where vLLM left a parameter empty at load (repacked into kernels) and can reload."""
    import torch

    model = worker.get_model()
    if path == "auto":
        repacked = any(p.numel() == 0 for p in model.parameters())
        path = "reload_weights" if repacked and hasattr(worker, "reload_weights") else "load_weights"
    if path == "reload_weights" and not hasattr(worker, "reload_weights"):
        raise WeightSyncError("sync_path='reload_weights' but this vLLM's worker has no reload_weights")
    with torch.no_grad(), outside_autocast(), _vllm_config_context(worker):
        if path == "reload_weights":
            worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
        else:
            model.load_weights(weights)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    return path


def _worker_device(worker):
    import torch

    for p in worker.get_model().parameters():
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


class VLLMEngine:
    """Sampling with vLLM on the same GPU as the trainer (module docstring)."""

    prompt_style = "verl_agent"  # free text: verl-agent's prompts and projection (scpo.rollout.collector)

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
        sleep_mode: bool = False,
        max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None,
        kv_cache_memory_bytes: int | None = None,
    ):
        if model_runner not in ("v1", "default"):
            raise ValueError(f"model_runner={model_runner!r} is not one of 'v1', 'default'")
        if sync_path not in ("auto", "load_weights", "reload_weights"):
            raise ValueError(f"sync_path={sync_path!r} is not one of 'auto', 'load_weights', 'reload_weights'")
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process (TRL's colocate mode)
        if model_runner == "v1":
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
        else:
            os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)  # vLLM's own choice
        from vllm import LLM

        from scpo.envs.prompting import ANSWER_TAGS
        from scpo.policy.profiles import torch_dtype
        from scpo.rollout.sync_probe import SyncProbes

        source = str(model_dir) if model_dir is not None else policy.profile
        self.policy = policy
        self.max_prompt_tokens = max_prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.prompt_overflow = prompt_overflow
        self.sync_path = sync_path
        self.check_parameters = check_parameters
        self.sleep_mode = sleep_mode
        self.asleep = False
        sizes = {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
                 "kv_cache_memory_bytes": kv_cache_memory_bytes}  # fmt: skip
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
                enable_sleep_mode=sleep_mode,
                logprobs_mode="processed_logprobs",
                generation_config="vllm",  # vLLM's neutral sampling defaults, never the checkpoint's
                **{k: v for k, v in sizes.items() if v is not None},
            )
        if self._on_worker(_worker_pid) != os.getpid():
            raise RuntimeError(
                "vLLM's engine core runs in another process, so the trainer's weights cannot be loaded and checked "
                "there; VLLM_ENABLE_V1_MULTIPROCESSING must be 0 when vllm.LLM is built"
            )
        facts = self._on_worker(_worker_facts)
        self.dtype, self.model_runner_kind = facts["dtype"], facts["runner"]
        if self.dtype != torch_dtype(dtype):
            raise ValueError(f"vLLM runs the model in {self.dtype} but policy.dtype={dtype!r} was asked")
        opening = policy.tokenizer(ANSWER_TAGS[0], add_special_tokens=False)["input_ids"]
        self.probes = SyncProbes(size=SYNC_PROBES, opening=opening)  # answers it sampled, to check each sync
        self.last_sync: dict = {}

    def _on_worker(self, fn, *args):
        """fn(worker, *args) in vLLM's worker (`LLM.collective_rpc`; one worker, in this process)."""
        return self.llm.collective_rpc(fn, args=args)[0]

    # ------------------------------------------------------------------------------------------------------ generation
    def generate(
        self,
        prompts: Sequence[str],
        temperature: float,
        top_p: float = 1.0,
        admissible: Sequence[Sequence[str]] | None = None,
    ) -> list[Generation]:
        """Free-text sampling from softmax(logits / T) (`admissible` is not used: large models answer in the
        `<think>/<action>` format); each Generation carries vLLM's log-prob of every sampled token (`sampler_logprobs`).
        The answers are offered to the sync probes."""
        from vllm import SamplingParams

        from scpo.rollout.sampling import neutral_sampling_kwargs

        if not prompts:
            return []
        if self.asleep:
            raise RuntimeError("vLLM sleeps (memory_released); sync_weights() wakes it with the new weights")
        ids = self.policy.encode_prompts(prompts, self.max_prompt_tokens, self.prompt_overflow)
        params = SamplingParams(
            temperature=temperature,
            top_p=top_p,
            max_tokens=self.max_new_tokens,
            detokenize=False,
            logprobs=0,
            **neutral_sampling_kwargs(),
        )
        with outside_autocast():
            outputs = self.llm.generate([{"prompt_token_ids": x} for x in ids], sampling_params=params, use_tqdm=False)
        decode = self.policy.tokenizer.decode
        out = []
        for o, p in zip(outputs, ids):
            tokens = list(o.outputs[0].token_ids)
            steps = o.outputs[0].logprobs
            logprobs = [float(d[t].logprob) for t, d in zip(tokens, steps)] if steps is not None else None
            out.append(
                Generation(
                    text=decode(tokens, skip_special_tokens=True),
                    prompt_ids=list(p),
                    response_ids=tokens,
                    sampler_logprobs=logprobs,
                )
            )
        self.probes.offer([g.prompt_ids for g in out], [g.response_ids for g in out])
        return out

    # ------------------------------------------------------------------------------------------------ memory, sync
    @contextmanager
    def memory_released(self):
        """With sleep mode: vLLM sleeps at level 2 (weights and KV cache freed) until the next `sync_weights`."""
        if self.sleep_mode and not self.asleep:
            self.llm.sleep(level=2)
            self.asleep = True
        yield

    def vllm_model(self):
        """vLLM's model (`nn.Module`) inside its in-process worker."""
        return self._on_worker(_worker_model)

    def parameter_report(self, policy: PolicyLike) -> dict:
        """`compare_with_trainer` of vLLM's weights with `policy`'s, in vLLM's dtype."""
        from scpo.rollout.vllm_weights import compare_with_trainer

        with outside_autocast():
            return compare_with_trainer(self.vllm_model(), policy.model, self.dtype)

    def sync_weights(self, policy) -> None:
        """Push the trainer's weights into vLLM, reset its prefix cache, and verify (see the module docstring)."""
        from scpo.rollout.vllm_weights import cast_weights, named_trainer_tensors

        t0 = time.perf_counter()
        if self.asleep:
            self.llm.wake_up(tags=["weights"])  # level 2 freed them: mapped again, filled by the load below
        device = self._on_worker(_worker_device)
        weights = cast_weights(named_trainer_tensors(policy.model), self.dtype, device)
        path = self._on_worker(_worker_load, weights, self.sync_path)
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
        reset = self.llm.reset_prefix_cache()
        if reset is False:
            raise WeightSyncError(
                "vLLM did not reset its prefix cache after the weight sync (reset_prefix_cache() "
                "returned False: requests still hold KV blocks computed with the old weights)"
            )
        self.last_sync = {
            "path": path,
            "runner": self.model_runner_kind,
            "dtype": str(self.dtype).removeprefix("torch."),
            "load_s": time.perf_counter() - t0,
            "prefix_cache_reset": reset,
        }
        if self.check_parameters:
            report = self.parameter_report(policy)
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
        if self.probes.probes:
            report = self.probe_report(policy)
            self.last_sync["probe"] = report
            tol = report["tolerance"]
            if not report["mean_abs_diff"] <= tol:
                raise WeightSyncError(
                    f"vLLM weight sync check failed: after the sync vLLM's log-probs of {report['probes']} sampled "
                    f"answers ({report['tokens']} tokens past the format's opening tag) differ from the trainer's by "
                    f"{report['mean_abs_diff']:.3g} nats on average (max {report['max_abs_diff']:.3g}; tolerance "
                    f"{tol:g} in {self.last_sync['dtype']}): vLLM samples from other weights than the trainer's. "
                    "Use rollout.engine=transformers"
                )
        self.last_sync["total_s"] = time.perf_counter() - t0

    def probe_report(self, policy: PolicyLike) -> dict:
        """vLLM's and the trainer's log-probs of the probe answers (`scpo.rollout.sync_probe`) -> the comparison and
        its tolerance. vLLM scores prompt + answer (`prompt_logprobs`, temperature 1); the trainer runs
        `response_logprobs` as the update does (its forward passes in their own autocast blocks)."""
        import torch
        from vllm import SamplingParams

        from scpo.policy.logprobs import response_logprobs
        from scpo.rollout.sampling import neutral_sampling_kwargs
        from scpo.rollout.sync_probe import probe_tolerance

        probes = self.probes.probes
        params = SamplingParams(
            temperature=1.0, max_tokens=1, detokenize=False, prompt_logprobs=0, **neutral_sampling_kwargs()
        )
        with outside_autocast():  # one probe per call: its prompt log-probs are (context + answer) x V floats
            outs = [
                self.llm.generate(
                    [{"prompt_token_ids": list(p.prompt_ids + p.answer_ids)}], use_tqdm=False, sampling_params=params
                )[0]
                for p in probes
            ]
        theirs = []
        for p, o in zip(probes, outs):
            steps = list(o.prompt_logprobs)[len(p.prompt_ids) :]
            theirs.append([float(d[t].logprob) if d is not None else float("nan") for t, d in zip(p.answer_ids, steps)])
        model = policy.model
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                logp, _, _ = response_logprobs(
                    model,
                    [list(p.prompt_ids) for p in probes],
                    [list(p.answer_ids) for p in probes],
                    policy.tokenizer.pad_token_id,
                )
        finally:
            model.train(was_training)
        mine = [logp[row, : len(p.answer_ids)].float().cpu().tolist() for row, p in enumerate(probes)]
        return {**self.probes.compare(theirs, mine), "tolerance": probe_tolerance(self.dtype)}
