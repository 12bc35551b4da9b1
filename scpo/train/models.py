"""The models of a run, made from its plan: the start model's folder (built once where the plan says it is built), the
policy the trainer trains, the frozen KL reference, a fresh policy for the warm start, and an atomic save.

Where they come from is decided by the plan (`scpo.run.inputs.start_models`): a folder, or a profile model built into
`<run>/init_model` (tiny: its tokenizer trained on the prompts and answers of the first 20 demonstrated tasks; a Hub
model: saved once), or smollm2-135m's converted folder. The environment's tokenizer hints come from its settings
(`EnvSettings.tokenizer_phrases`, `tokenizer_lowercase`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from scpo.config import Config
from scpo.envs.demos import expert_demonstrations
from scpo.envs.registry import EnvSettings
from scpo.policy import PolicyLike, create_policy, load_policy
from scpo.policy.placement import autocast_each_forward
from scpo.policy.profiles import enable_gradient_checkpointing, reference_for, trained_dtype, with_lora
from scpo.run.inputs import ModelSource
from scpo.run.plan import RunPlan

__all__ = ["model_folder", "fresh_policy", "trained_policy", "reference_model", "save_model", "TOKENIZER_DEMOS"]

TOKENIZER_DEMOS = 20  # tiny: demonstrated tasks whose prompts and answers train the tokenizer of `<run>/init_model`


def model_folder(plan: RunPlan, source: ModelSource) -> Path:
    """The folder `source` loads from, made first when the plan says it is built (module docstring)."""
    cfg = plan.config
    if source.build == "convert":
        from scpo.policy.smollm2 import ensure_smollm2

        return ensure_smollm2(Path(cfg.data.root) / "models")
    if source.build is None or (source.path / "config.json").exists():
        return source.path
    corpus = None
    if source.build == "tiny":
        env = plan.env
        tasks = plan.demo_tasks[:TOKENIZER_DEMOS]
        demos, _ = expert_demonstrations(
            env.package,
            tasks,
            data_root=env.data_root,
            max_steps=env.max_steps,
            history_length=env.history_length,
            env_options=env.options,
            progress=False,
        )
        corpus = [d.prompt for d in demos] + [d.response for d in demos]
    create_policy(
        cfg.policy,
        corpus=corpus,
        models_dir=Path(cfg.data.root) / "models",
        seed=plan.seed,
        fixed_phrases=plan.env.tokenizer_phrases,
        lowercase=plan.env.tokenizer_lowercase,
    ).save(source.path)
    return source.path


def fresh_policy(cfg: Config, env: EnvSettings, corpus: list[str], device=None) -> PolicyLike:
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


def trained_policy(cfg: Config, model_dir: Path, device) -> PolicyLike:
    """The policy a run trains: float32 weights from `model_dir` (a LoRA base in policy.dtype, adapters added with
    `policy.lora`) on `device`, each forward pass under autocast to `policy.dtype` (`scpo.policy.placement`), gradient
    checkpointing with `train.gradient_checkpointing`."""
    policy = load_policy(model_dir, dtype=trained_dtype(cfg.policy), device=device)
    if cfg.policy.lora and not hasattr(policy.model, "peft_config"):
        policy.model = with_lora(policy.model, cfg.policy.lora_r, cfg.policy.lora_alpha)
    autocast_each_forward(policy.model, device, cfg.policy.dtype)
    if cfg.train.gradient_checkpointing:
        enable_gradient_checkpointing(policy.model)
    return policy


def reference_model(plan: RunPlan, policy: PolicyLike, start_dir: Path):
    """The frozen KL reference (None without one, `train.kl_coef` 0): the plan's reference model; a LoRA policy that
    starts from it is its own reference, its adapters disabled (`scpo.policy.profiles.reference_for`), else a second
    model in `policy.dtype`."""
    if plan.reference is None:
        return None
    ref_dir = start_dir if plan.reference is plan.start else model_folder(plan, plan.reference)
    same_start = plan.resume is None and ref_dir == start_dir
    return reference_for(policy, ref_dir, same_start=same_start, cfg=plan.config.policy)


def save_model(policy: PolicyLike, path: Path) -> None:
    """`policy.save(path)` through a temporary folder renamed into place (a killed process never leaves a half
    model)."""
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save(tmp)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
