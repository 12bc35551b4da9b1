"""The checks a training command makes before it writes anything: the config (already validated by `load_config`),
the run folder (not in use; empty, or with `--resume` a restorable checkpoint whose recorded config matches), the data
(the training split's task list), the model it starts from, and whether the run fits its device's memory
(`scpo.policy.memory_plan`: on a GPU the estimated peak is one of the plan's notes; a run over its device's memory is
refused).
Each failure is one line (an `ExpectedError`), and a run folder holding another run is never touched by a command
that fails one of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scpo.config import Config, ConfigError
from scpo.envs.registry import EnvSettings, env_settings
from scpo.errors import DataError, ExpectedError, RunFolderError
from scpo.policy import resolve_model_dir
from scpo.policy.profiles import check_model_source
from scpo.train.checkpoint import TrainingState, restorable_checkpoint
from scpo.train.provenance import config_differences, read_provenance, resolved_config
from scpo.train.run_folder import check_fresh, check_not_in_use

__all__ = ["TrainingPlan", "plan_training", "check_task_list", "check_start_model", "check_memory", "STAGES"]

STAGES = ("sft", "rl")


@dataclass
class TrainingPlan:
    """What `run_training` will do: stage, folder, mode (fresh | overwrite | resume), and for a resume the checkpoint,
    its state, the lines to show (checkpoints skipped) and the config differences accepted with --force."""

    stage: str
    run_dir: Path
    mode: str
    checkpoint: Path | None = None
    state: TrainingState | None = None
    notes: list[str] = field(default_factory=list)
    forced: list[tuple[str, Any, Any]] = field(default_factory=list)


def check_task_list(env: EnvSettings, split: str) -> list[str]:
    """The task ids of `split`; DataError (one line naming the data folder) when there are none or the data is not
    there."""
    try:
        tasks = env.package.list_tasks(split, data_root=env.data_root)
    except ExpectedError:
        raise
    except (FileNotFoundError, OSError, ValueError) as err:
        raise DataError(
            f"{env.name} data for split {split!r} not found under data.root={env.data_root}: "
            f"{str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}"
        ) from None
    if not tasks:
        raise DataError(
            f"no {env.name} tasks in split {split!r} under data.root={env.data_root}; run "
            f"`scpo prepare-data --only {env.name}`"
        )
    return tasks


def check_start_model(cfg: Config) -> str:
    """Where the run's first policy comes from (train.init_from with `train.rl_start: warm_start`, else
    policy.profile), and the profile's model too when it is the KL reference; ModelNotFoundError if one is absent."""
    models = Path(cfg.data.root) / "models"
    if cfg.train.init_from and cfg.train.rl_start == "warm_start":
        where = str(resolve_model_dir(cfg.train.init_from))
        if cfg.train.kl_coef > 0 and cfg.train.kl_reference == "base":
            check_model_source(cfg.policy.profile, models)
        return where
    return check_model_source(cfg.policy.profile, models)


def _differences_line(diffs: list[tuple[str, Any, Any]]) -> str:
    shown = "; ".join(f"{k}: {a!r} in the run, {b!r} now" for k, a, b in diffs[:6])
    return shown + (f"; and {len(diffs) - 6} more" if len(diffs) > 6 else "")


def plan_training(
    cfg: Config, stage: str, run_dir: Path, *, resume: bool = False, overwrite: bool = False, force: bool = False
) -> TrainingPlan:
    """Run every check (module docstring) without writing anything; return the plan or raise one ExpectedError."""
    if stage not in STAGES:
        raise ConfigError(f"stage={stage!r} is invalid; allowed: {', '.join(STAGES)}")
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other: continue the run, or replace it")
    if resume and stage == "sft":
        raise ConfigError(
            "--resume is for RL runs; an SFT warm start has no checkpoints (run it again with --overwrite)"
        )
    run_dir = Path(run_dir)
    check_not_in_use(run_dir)
    if not resume:
        if not overwrite:
            check_fresh(run_dir, resumable=stage == "rl")
        notes = _check_inputs(cfg)
        return TrainingPlan(stage, run_dir, "overwrite" if overwrite else "fresh", notes=notes)
    ckpt, state, notes = restorable_checkpoint(run_dir)
    saved = read_provenance(ckpt) or read_provenance(run_dir)
    if saved is None:
        if not force:
            raise RunFolderError(
                f"{ckpt} records no config (written before scpo recorded one), so --resume cannot "
                "check it matches this one; add --force to resume it anyway"
            )
        notes += _check_inputs(cfg)
        return TrainingPlan(stage, run_dir, "resume", ckpt, state, notes, [("config", "unrecorded", "now")])
    diffs = config_differences(saved["config"], resolved_config(cfg))
    if diffs and not force:
        raise RunFolderError(
            f"--resume of {run_dir} with a different config: {_differences_line(diffs)}; resume with "
            "the run's settings, add --force to resume anyway, or start a new run elsewhere"
        )
    notes += _check_inputs(cfg)
    return TrainingPlan(stage, run_dir, "resume", ckpt, state, notes, diffs)


def _check_inputs(cfg: Config) -> list[str]:
    """The data of the training split, the model the run starts from and its memory; -> lines to show (the memory
    plan's on a GPU; on the CPU it is only checked)."""
    from scpo.policy.placement import resolve_device

    env = env_settings(cfg)
    check_task_list(env, env.train_split)
    check_start_model(cfg)
    line = check_memory(cfg)
    return [line] if resolve_device(cfg.train.device).type == "cuda" else []


def _model_config(cfg: Config):
    """The transformers config of the model the run trains (tiny: the one `build_tiny_model` makes); None when it is
    not on this machine yet (smollm2-135m before its conversion)."""
    from transformers import AutoConfig, LlamaConfig

    if cfg.train.init_from and cfg.train.rl_start == "warm_start":
        return AutoConfig.from_pretrained(resolve_model_dir(cfg.train.init_from))
    p = cfg.policy
    if p.profile == "tiny":
        return LlamaConfig(vocab_size=p.tiny_vocab_size, hidden_size=p.tiny_hidden_size,
                           intermediate_size=4 * p.tiny_hidden_size, num_hidden_layers=p.tiny_layers,
                           num_attention_heads=p.tiny_heads, num_key_value_heads=p.tiny_heads,
                           tie_word_embeddings=True)  # fmt: skip
    if p.profile == "smollm2-135m":
        converted = Path(cfg.data.root) / "models" / "smollm2-135m"
        return AutoConfig.from_pretrained(converted) if (converted / "config.json").exists() else None
    if Path(p.profile).expanduser().exists():
        return AutoConfig.from_pretrained(resolve_model_dir(Path(p.profile).expanduser()))
    return AutoConfig.from_pretrained(p.profile)  # a Hub name: its config.json (cached with the model)


def check_memory(cfg: Config, capacity: int | None = None) -> str:
    """The memory plan's line for `cfg` on its device (`train.device`; `capacity` bytes replace the device's);
    MemoryPlanError (one line) when the estimated peak exceeds the device's memory."""
    from scpo.policy.memory_plan import MemoryPlanError, device_capacity, model_shape, plan_memory
    from scpo.policy.placement import resolve_device

    config = _model_config(cfg)
    if config is None:
        return "memory plan: skipped (the model's config is not on this machine yet)"
    device = resolve_device(cfg.train.device)
    found, name = device_capacity(device.type)
    plan = plan_memory(cfg, model_shape(config, cfg.policy.lora_r if cfg.policy.lora else None),
                       capacity or found, name)  # fmt: skip
    if not plan.fits:
        raise MemoryPlanError(
            f"{plan.line()}: over the device's memory; lower train.micro_batch_size, set "
            "train.gradient_checkpointing=true, rollout.vllm_sleep_mode=true or policy.lora=true, or use a larger GPU"
        )
    return plan.line()
