"""A stand-in for the parts of vLLM 0.25.1's public offline API that `scpo.rollout.vllm_engine` uses, for machines
without vLLM.

Used by tests/rollout/test_vllm_engine.py and by the GPU check's dry mode (`checks/gpu/run.sh --dry`: this folder's
parent on PYTHONPATH). It behaves like vLLM where the engine depends on it, with torch and transformers only:
- `LLM(model=dir, dtype=...)` loads the checkpoint and keeps it the way vLLM does: q/k/v and gate/up projections fused
  (`packed_modules_mapping`), the output layer tied to the embedding when the config ties them, in the engine's dtype
  ("auto": the checkpoint's, float32 cast down to bfloat16 as vLLM does); generation runs a transformers twin rebuilt
  from those fused weights, so a broken sync shows in the answers;
- `LLM.collective_rpc(callable)` calls it with the worker (vLLM's `run_method`) when the engine core runs in this
  process (VLLM_ENABLE_V1_MULTIPROCESSING=0); with the core in a child process a callable would have to be pickled,
  and the stand-in refuses it; `LLM.apply_model(fn)` is fn(model);
- the worker says whether it runs the V2 model runner (VLLM_USE_V2_MODEL_RUNNER unset: yes, like vLLM >= 0.24 for dense
  models; "0": no); its model's `load_weights` records how it was called (grad mode, autocast, the current vLLM config,
  dtypes, names); `reload_weights` restores repacked weights, loads and repacks (FAULTS["repack"]: linear weights moved
  into a kernel closure and left empty, as vLLM's CPU backend does, so the model's own load_weights cannot reach them);
- `LLM.sleep(level)` / `wake_up(tags)` as vLLM's sleep mode (`enable_sleep_mode=True`): level 1 keeps the weights (on
  the CPU), level 2 discards them (garbage after `wake_up` until weights are loaded again); generating asleep fails.

- sampling as vLLM's sampler: penalties (repetition on prompt and output tokens, presence, frequency), temperature,
  top-k, top-p, the log-probs of the processed logits (`processed_logprobs`), `prompt_logprobs` (raw, T = 1);
  `LLM(generation_config="auto")` (vLLM's default) takes the sampling defaults of the checkpoint's
  generation_config.json for `generate(sampling_params=None)` only, "vllm" never (`get_default_sampling_params`).

`FAULTS` injects failures: weights dropped, NaN written, `reset_prefix_cache()` returning False, weights repacked, and
the faults the GPU check must catch: `skipped_sync` (no weight the trainer sends reaches the model), `stale_weights`
(the parameters take the new weights but generation keeps running on the weights loaded at start), `stale_layer` (the
same for the first decoder layer only) and `sampler_penalty` (every request samples with a repetition penalty of 1.1).
`SCPO_STANDIN_FAULTS` (comma-separated names) sets faults for every `LLM` built in the process (run.sh --dry --plant).
"""

from __future__ import annotations

import os
import types
from dataclasses import dataclass

import torch

__version__ = "0.25.1+standin"

FAULT_NAMES = ("drop_weights", "nan", "reset_returns", "repack", "skipped_sync", "stale_weights", "stale_layer",
               "sampler_penalty")  # fmt: skip
FAULTS = {"drop_weights": False, "nan": False, "reset_returns": True, "repack": False, "skipped_sync": False,
          "stale_weights": False, "stale_layer": False, "sampler_penalty": False}  # fmt: skip
INSTANCES: list[LLM] = []
PACKED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def reset_faults() -> None:
    FAULTS.update(drop_weights=False, nan=False, reset_returns=True, repack=False, skipped_sync=False,
                  stale_weights=False, stale_layer=False, sampler_penalty=False)  # fmt: skip


def _faults_from_env() -> None:
    for name in filter(None, (x.strip() for x in os.environ.get("SCPO_STANDIN_FAULTS", "").split(","))):
        if name not in FAULT_NAMES:
            raise ValueError(f"SCPO_STANDIN_FAULTS: {name!r} is not one of {', '.join(FAULT_NAMES)}")
        FAULTS[name] = name != "reset_returns"


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    min_tokens: int = 0
    logit_bias: dict | None = None
    allowed_token_ids: list | None = None
    bad_words: list | None = None
    max_tokens: int | None = 16
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    seed: int | None = None
    detokenize: bool = True

    def __post_init__(self):
        unmodelled = {"min_p": 0.0, "min_tokens": 0, "logit_bias": None, "allowed_token_ids": None, "bad_words": None}
        odd = [k for k, v in unmodelled.items() if getattr(self, k) != v]
        if odd:
            raise NotImplementedError(f"standin: SamplingParams {odd} are not modelled")

    @classmethod
    def from_optional(cls, **kwargs) -> SamplingParams:
        return cls(**{k: v for k, v in kwargs.items() if v is not None})


_SAMPLING_DEFAULTS = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p", "max_new_tokens")


def _process(logits: torch.Tensor, seen_prompt: list[int], seen_output: list[int], params) -> torch.Tensor:
    """vLLM's sampler on one row of float32 logits: penalties, then temperature, top-k and top-p (-inf outside)."""
    logits = logits.clone()
    rep = 1.1 if FAULTS["sampler_penalty"] else params.repetition_penalty
    if rep != 1.0:
        seen = torch.tensor(sorted(set(seen_prompt) | set(seen_output)), dtype=torch.long)
        if len(seen):
            x = logits[seen]
            logits[seen] = torch.where(x > 0, x / rep, x * rep)
    if seen_output and (params.presence_penalty or params.frequency_penalty):
        counts = torch.bincount(torch.tensor(seen_output), minlength=logits.numel()).float()
        logits -= params.frequency_penalty * counts + params.presence_penalty * (counts > 0).float()
    t = params.temperature
    if t > 0:
        logits = logits / t
    if params.top_k and params.top_k > 0:
        kth = torch.topk(logits, min(params.top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if params.top_p < 1.0:
        probs, order = torch.softmax(logits, -1).sort(descending=True)
        drop = probs.cumsum(-1) - probs > params.top_p
        logits[order[drop]] = float("-inf")
    return logits


def _vllm_name(hf_name: str) -> str:
    """The fused parameter an HF parameter lands in (its own name if not fused)."""
    prefix, _, rest = hf_name.rpartition(".")
    owner, _, module = prefix.rpartition(".")
    for fused, parts in PACKED.items():
        if module in parts:
            return f"{owner}.{fused}.{rest}"
    return hf_name


class FusedModel(torch.nn.Module):
    """vLLM's layout of a Llama / Qwen2 checkpoint: fused projections, tied output layer not a parameter of its own."""

    packed_modules_mapping = PACKED

    def __init__(self, twin, dtype: torch.dtype):
        super().__init__()
        self.__dict__["twin"] = twin  # not a submodule: named_parameters() lists the fused layout only
        self.tied = bool(getattr(twin.config, "tie_word_embeddings", False))
        self.calls: list[dict] = []
        state = {k: v for k, v in twin.state_dict().items() if not (self.tied and k == "lm_head.weight")}
        groups: dict[str, list[torch.Tensor]] = {}
        for name, tensor in state.items():
            groups.setdefault(_vllm_name(name), []).append(tensor)
        for name, parts in groups.items():
            self._module(name.rpartition(".")[0]).register_parameter(
                name.rpartition(".")[2], torch.nn.Parameter(torch.cat(parts).to(dtype).clone(), requires_grad=False)
            )
        self._offsets = {}  # hf name -> (fused name, start row)
        rows: dict[str, int] = {}
        for name, tensor in state.items():
            fused = _vllm_name(name)
            self._offsets[name] = (fused, rows.get(fused, 0))
            rows[fused] = rows.get(fused, 0) + tensor.shape[0]
        self.refresh_twin()

    def _module(self, path: str) -> torch.nn.Module:
        node = self
        for part in path.split(".") if path else []:
            if not hasattr(node, part):
                node.add_module(part, torch.nn.Module())
            node = getattr(node, part)
        return node

    def weight(self, name: str) -> torch.Tensor:
        """A fused weight, read back from its kernel closure if repacked."""
        module_path, _, leaf = name.rpartition(".")
        module = self._module(module_path)
        param = getattr(module, leaf)
        if param.numel() == 0 and hasattr(module, "cpu_linear"):
            eye = torch.eye(module.input_size_per_partition, dtype=param.dtype)
            return module.cpu_linear(eye, None, None).t()
        return param

    def load_weights(self, weights) -> set[str]:
        from vllm import config as vllm_config

        call = {
            "grad": torch.is_grad_enabled(),
            "autocast_cpu": torch.is_autocast_enabled("cpu"),
            "config": vllm_config.get_current_vllm_config(),
            "names": [],
            "dtypes": set(),
            "requires_grad": False,
        }
        self.calls.append(call)
        loaded = set()
        for name, tensor in weights:
            call["names"].append(name)
            call["dtypes"].add(tensor.dtype)
            call["requires_grad"] |= tensor.requires_grad
            if FAULTS["skipped_sync"]:
                continue  # the weights never reach the model
            if self.tied and name == "lm_head.weight":
                continue  # vLLM skips the output layer of a tied model
            fused, start = self._offsets[name]
            module_path, _, leaf = fused.rpartition(".")
            param = getattr(self._module(module_path), leaf)
            if param.numel() == 0:
                raise RuntimeError(f"{fused} was repacked at load; its parameter is empty")
            if not FAULTS["drop_weights"]:
                param.data[start : start + tensor.shape[0]].copy_(tensor)
            loaded.add(fused)
        if FAULTS["nan"]:
            next(p for p in self.parameters() if p.numel()).data.view(-1)[0] = float("nan")
        if not FAULTS["stale_weights"]:  # stale: the parameters are new, generation keeps the start's weights
            self.refresh_twin(keep_layer="model.layers.0." if FAULTS["stale_layer"] else None)
        return loaded

    def repack(self) -> None:
        """Move every 2-D projection weight into a kernel closure and leave the parameter empty (vLLM's CPU backend)."""
        for name, param in list(self.named_parameters()):
            module_path, _, leaf = name.rpartition(".")
            if leaf != "weight" or param.dim() != 2 or "embed" in name:
                continue
            module = self._module(module_path)
            w = param.detach().clone()
            module.cpu_linear = lambda x, _w, bias, w=w: x.to(w.dtype) @ w.t()
            module.input_size_per_partition = w.shape[1]
            setattr(module, leaf, torch.nn.Parameter(torch.empty(0, dtype=w.dtype), requires_grad=False))

    def unpack(self) -> None:
        for module in self.modules():
            if hasattr(module, "cpu_linear"):
                w = module.cpu_linear(torch.eye(module.input_size_per_partition), None, None).t()
                module.weight = torch.nn.Parameter(w.clone(), requires_grad=False)
                del module.cpu_linear

    def refresh_twin(self, keep_layer: str | None = None) -> None:
        """The transformers twin gets the fused weights split back (what generation runs on); the weights under
        `keep_layer` stay as they were (FAULTS["stale_layer"])."""
        with torch.no_grad():
            for name, (fused, start) in self._offsets.items():
                if keep_layer and name.startswith(keep_layer):
                    continue
                target = self.twin.get_parameter(name)
                target.copy_(self.weight(fused)[start : start + target.shape[0]].to(target.dtype))


class _Worker:
    def __init__(self, model_dir: str, dtype: torch.dtype):
        from transformers import AutoModelForCausalLM

        twin = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).eval()
        self.use_v2_model_runner = os.environ.get("VLLM_USE_V2_MODEL_RUNNER") != "0"
        self.vllm_config = types.SimpleNamespace(model_config=types.SimpleNamespace(dtype=dtype))
        model = FusedModel(twin, dtype)
        self.model_runner = types.SimpleNamespace(model=model, get_model=lambda: model)
        self.reloads = 0
        if FAULTS["repack"]:
            model.repack()

    def get_model(self) -> FusedModel:
        return self.model_runner.get_model()

    def apply_model(self, fn):
        return fn(self.get_model())

    def reload_weights(self, weights_iterator=None, is_checkpoint_format: bool = True) -> None:
        assert is_checkpoint_format and weights_iterator is not None
        self.reloads += 1
        model = self.model_runner.model
        repacked = any(p.numel() == 0 for p in model.parameters())
        model.unpack()
        model.load_weights(weights_iterator)
        if repacked:
            model.repack()


class _WorkerWrapper:
    """vLLM's WorkerWrapperBase: attribute access goes to the worker."""

    def __init__(self, worker: _Worker):
        self.worker = worker

    def __getattr__(self, attr):
        return getattr(self.worker, attr)


def _auto_dtype(model_dir: str) -> torch.dtype:
    """vLLM's dtype="auto": the checkpoint's dtype, float32 cast down to bfloat16 (vLLM's `_resolve_auto_dtype`)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    name = str(getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "float32")
    dtype = _DTYPES.get(name.removeprefix("torch."), torch.float32)
    return torch.bfloat16 if dtype == torch.float32 else dtype


class LLM:
    def __init__(self, model: str, tokenizer: str | None = None, dtype: str = "auto", seed: int = 0, **kwargs):
        _faults_from_env()
        self.kwargs = {"model": model, "tokenizer": tokenizer, "dtype": dtype, "seed": seed, **kwargs}
        self.seed = seed
        self.prefix_resets = 0
        self.calls: list[tuple[list, SamplingParams]] = []
        self.in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0"
        self.generation_config = kwargs.get("generation_config", "auto")
        self.worker = _Worker(model, _auto_dtype(model) if dtype == "auto" else _DTYPES[dtype])
        self._wrapper = _WorkerWrapper(self.worker)
        self.sleep_mode = bool(kwargs.get("enable_sleep_mode", False))
        self.sleeping: int | None = None  # the sleep level, while asleep
        self.awake_tags: set[str] = set()
        self.generate_autocast: list[bool] = []
        INSTANCES.append(self)

    @property
    def model(self) -> FusedModel:
        return self.worker.model_runner.model

    def collective_rpc(self, method, timeout: float | None = None, args: tuple = (), kwargs: dict | None = None):
        if callable(method) and not self.in_process:
            raise RuntimeError(
                "standin: the engine core runs in a child process (VLLM_ENABLE_V1_MULTIPROCESSING is not 0), so a "
                "callable would be pickled and run there"
            )
        func = (
            getattr(self._wrapper, method)
            if isinstance(method, str)
            else (lambda *a, **k: method(self._wrapper, *a, **k))
        )
        return [func(*args, **(kwargs or {}))]

    def apply_model(self, func):
        return self.collective_rpc("apply_model", args=(func,))

    def get_default_sampling_params(self) -> SamplingParams:
        """vLLM's: the checkpoint's generation_config.json sampling fields unless generation_config="vllm"."""
        if self.generation_config == "vllm":
            return SamplingParams()
        gen = self.model.twin.generation_config
        found = {k: getattr(gen, k, None) for k in _SAMPLING_DEFAULTS}
        if found.get("max_new_tokens") is not None:
            found["max_tokens"] = found.pop("max_new_tokens")
        found.pop("max_new_tokens", None)
        return SamplingParams.from_optional(**found)

    def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        self.prefix_resets += 1
        return FAULTS["reset_returns"]

    def sleep(self, level: int = 1, mode: str = "abort") -> None:
        if not self.sleep_mode:
            raise RuntimeError("Sleep mode is not enabled (LLM(enable_sleep_mode=True))")
        self.sleeping, self.awake_tags = level, set()
        if level == 2:  # weights discarded: what wake_up maps back is garbage until weights are loaded
            with torch.no_grad():
                for p in self.model.parameters():
                    p.fill_(float("nan") if p.is_floating_point() else 0)

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.awake_tags |= set(tags or ("weights", "kv_cache", "scheduling"))
        if {"weights", "kv_cache"} <= self.awake_tags:
            self.sleeping = None

    def generate(self, prompts, sampling_params: SamplingParams | None = None, use_tqdm: bool = True):
        """Greedy or sampled answers of the twin (vLLM's sampler: `_process`); log-probs of the sampled tokens after
        processing (vLLM's processed log-probs) when `logprobs` is set; the prompt tokens' raw log-probs (T = 1, the
        first None) when `prompt_logprobs` is set. Without `sampling_params`: `get_default_sampling_params()`."""
        if self.sleeping is not None:
            raise RuntimeError(f"standin: generate() while the engine sleeps (level {self.sleeping}); wake_up() first")
        sampling_params = sampling_params if sampling_params is not None else self.get_default_sampling_params()
        self.calls.append((prompts, sampling_params))
        self.generate_autocast.append(torch.is_autocast_enabled("cpu"))
        twin = self.model.twin
        eos = twin.generation_config.eos_token_id if twin.generation_config is not None else None
        eos = eos[0] if isinstance(eos, list) else eos
        gen = torch.Generator().manual_seed(sampling_params.seed if sampling_params.seed is not None else self.seed)
        out = []
        with torch.no_grad():
            for p in prompts:
                ids = list(p["prompt_token_ids"])
                prompt_logprobs = None
                if sampling_params.prompt_logprobs is not None:
                    logp = torch.log_softmax(twin(input_ids=torch.tensor([ids])).logits[0].float(), -1)
                    prompt_logprobs = [None] + [
                        {t: types.SimpleNamespace(logprob=float(logp[k, t]), rank=1)} for k, t in enumerate(ids[1:])
                    ]
                tokens, logprobs = [], []
                for _ in range(sampling_params.max_tokens or 16):
                    logits = twin(input_ids=torch.tensor([ids + tokens]), logits_to_keep=1).logits[0, -1].float()
                    t = sampling_params.temperature
                    processed = _process(logits, ids, tokens, sampling_params)
                    logp = torch.log_softmax(processed, -1)
                    nxt = int(processed.argmax()) if t == 0 else int(torch.multinomial(logp.exp(), 1, generator=gen))
                    tokens.append(nxt)
                    logprobs.append({nxt: types.SimpleNamespace(logprob=float(logp[nxt]), rank=1)})
                    if nxt == eos:
                        break
                completion = types.SimpleNamespace(
                    token_ids=tuple(tokens),
                    text=None if not sampling_params.detokenize else "",
                    logprobs=logprobs if sampling_params.logprobs is not None else None,
                )
                out.append(
                    types.SimpleNamespace(outputs=[completion], prompt_token_ids=ids, prompt_logprobs=prompt_logprobs)
                )
        return out
