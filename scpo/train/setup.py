"""Run setup, shared by SFT and RL: the environment's settings, the tiny policy's tokenizer corpus, the starting model
and the KL reference, the summary's identity block and an atomic model save.

Where RL starts (`train.rl_start`): the SFT warm start `train.init_from`, or the profile's own model (tiny: built
once from a tokenizer corpus of expert demonstrations and saved under `<run>/init_model`, so a resumed run finds the
same one; smollm2-135m: its converted folder; a local folder; a Hub name). The KL reference (`train.kl_reference`):
the weights RL starts from, or the profile's model. The environment's tokenizer hints come from its `EnvSpec`
(`tokenizer_phrases`, `tokenizer_lowercase`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import scpo
from scpo.config import Config
from scpo.envs.demos import expert_demonstrations
from scpo.envs.registry import EnvSettings, env_settings, env_spec
from scpo.policy import PolicyLike, create_policy, load_policy, resolve_model_dir
from scpo.policy.placement import autocast_each_forward
from scpo.policy.profiles import enable_gradient_checkpointing, reference_for, trained_dtype, with_lora
from scpo.train.provenance import git_state

__all__ = [
    "RunEnv",
    "run_env",
    "demo_tasks",
    "fresh_policy",
    "initial_policy_dir",
    "profile_model_dir",
    "trained_policy",
    "reference_model",
    "save_model",
    "identity",
]


@dataclass(frozen=True)
class RunEnv:
    """The configured environment (`EnvSettings`: package, data root, step limit, splits, factory options) and the
    tokenizer hints its spec declares."""

    settings: EnvSettings
    tokenizer_phrases: tuple[str, ...]
    tokenizer_lowercase: bool


def run_env(cfg: Config) -> RunEnv:
    spec = env_spec(cfg.env.name)
    return RunEnv(env_settings(cfg), spec.tokenizer_phrases, spec.tokenizer_lowercase)


def demo_tasks(env: EnvSettings, cfg: Config) -> list[str]:
    """The `train.sft.n_demos` training tasks demonstrated for SFT (drawn with `train.seed`, in pool order)."""
    pool = env.package.list_tasks(env.train_split, data_root=env.data_root)
    rng = np.random.default_rng([cfg.train.seed, 7])
    return [pool[i] for i in sorted(rng.permutation(len(pool))[: cfg.train.sft.n_demos])]


def fresh_policy(cfg: Config, env: RunEnv, corpus: list[str], device=None) -> PolicyLike:
    """A new policy of `policy.profile` with the trained weights' dtype (float32; a LoRA base in policy.dtype:
    `trained_dtype`; tiny: its tokenizer trained on `corpus` with the environment's tokenizer hints)."""
    return create_policy(
        cfg.policy.model_copy(update={"dtype": trained_dtype(cfg.policy)}),
        corpus=corpus,
        models_dir=Path(cfg.data.root) / "models",
        seed=cfg.train.seed,
        device=device,
        fixed_phrases=env.tokenizer_phrases,
        lowercase=env.tokenizer_lowercase,
    )


def initial_policy_dir(cfg: Config, env: RunEnv, run_dir: Path) -> Path:
    """Where RL starts: `train.init_from` (an SFT run / model dir) with `train.rl_start: warm_start`, else the profile's
    model (`profile_model_dir`)."""
    if cfg.train.init_from and cfg.train.rl_start == "warm_start":
        return resolve_model_dir(cfg.train.init_from)
    return profile_model_dir(cfg, env, run_dir)


def profile_model_dir(cfg: Config, env: RunEnv, run_dir: Path) -> Path:
    """The profile's own model: a local one (smollm2-135m's converted folder, a local path), or a fresh profile model
    saved once under `<run_dir>/init_model` (tiny, Hub names), so a resumed run finds it again. The tiny tokenizer's
    corpus: the prompts and answers of the first 20 demonstrated tasks."""
    if cfg.policy.profile == "smollm2-135m":
        from scpo.policy.smollm2 import ensure_smollm2

        return ensure_smollm2(Path(cfg.data.root) / "models")
    if cfg.policy.profile != "tiny" and Path(cfg.policy.profile).exists():
        return resolve_model_dir(cfg.policy.profile)
    init_dir = run_dir / "init_model"
    if not (init_dir / "config.json").exists():
        corpus = None
        if cfg.policy.profile == "tiny":
            s = env.settings
            demos, _ = expert_demonstrations(
                s.package,
                demo_tasks(s, cfg)[:20],
                data_root=s.data_root,
                max_steps=s.max_steps,
                history_length=cfg.env.history_length,
                env_options=s.options,
                progress=False,
            )
            corpus = [d.prompt for d in demos] + [d.response for d in demos]
        create_policy(
            cfg.policy,
            corpus=corpus,
            models_dir=Path(cfg.data.root) / "models",
            seed=cfg.train.seed,
            fixed_phrases=env.tokenizer_phrases,
            lowercase=env.tokenizer_lowercase,
        ).save(init_dir)
    return init_dir


def trained_policy(cfg: Config, model_dir: Path, device) -> PolicyLike:
    """The policy RL trains: float32 weights from `model_dir` (a LoRA base in policy.dtype, adapters added with
    `policy.lora`), each forward pass under autocast to `policy.dtype` (`scpo.policy.placement`), gradient
    checkpointing with `train.gradient_checkpointing`."""
    policy = load_policy(model_dir, dtype=trained_dtype(cfg.policy), device=device)
    if cfg.policy.lora and not hasattr(policy.model, "peft_config"):
        policy.model = with_lora(policy.model, cfg.policy.lora_r, cfg.policy.lora_alpha)
    autocast_each_forward(policy.model, device, cfg.policy.dtype)
    if cfg.train.gradient_checkpointing:
        enable_gradient_checkpointing(policy.model)
    return policy


def reference_model(cfg: Config, env: RunEnv, run_dir: Path, init_dir: Path, policy: PolicyLike, resuming: bool):
    """The frozen KL reference (None with `train.kl_coef` 0): the weights RL starts from, or the profile's base model
    (`train.kl_reference`); a LoRA policy starting from them is its own reference, its adapters disabled
    (`scpo.policy.profiles.reference_for`), else a second model in `policy.dtype`."""
    if cfg.train.kl_coef <= 0:
        return None
    ref_dir = init_dir if cfg.train.kl_reference == "start" else profile_model_dir(cfg, env, run_dir)
    return reference_for(policy, ref_dir, same_start=not resuming and ref_dir == init_dir, cfg=cfg.policy)


def save_model(policy: PolicyLike, path: Path) -> None:
    """`policy.save(path)` through a temporary folder renamed into place (a killed process never leaves a half
    model)."""
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save(tmp)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def identity(cfg: Config) -> dict:
    """What a summary says about the config: profile, policy, the explicit overrides, version and git commit (the
    whole resolved config is in provenance.json)."""
    return {
        "profile": cfg.profile,
        "policy": cfg.policy.profile,
        "overrides": cfg.origin.get("overrides", {}),
        "scpo_version": scpo.__version__,
        "git": git_state(),
    }
