"""The checks a training command makes before it writes anything: the config (already validated by `load_config`),
the run folder (not a file, not inside another run, not in use; empty, or with `--overwrite` one that holds only a
run's own entries, or with `--resume` a restorable checkpoint whose recorded config matches), the data (the training
split's task list), the model it starts from, and whether the run fits its device's memory
(`scpo.policy.memory_plan`: on a GPU the estimated peak is one of the plan's notes; a run over its device's memory is
refused). Each failure is one line (an `ExpectedError`), and a run folder holding another run is never touched by a
command that fails one of them.

A resume is also checked against what the run read (`scpo.train.run_inputs`): the same task pool and the same start
model (and KL reference), by digest; a difference is refused like a config difference (`--force` accepts it, and the
run's provenance records it). Its history.csv must hold rows 0..k-1 of the checkpoint's k iterations: compared with
the checkpoint's own copy, from which a damaged or truncated history is rebuilt (one line says so); a checkpoint
without a copy (written by an older scpo) refuses a damaged history in one line naming it. Code that changed since
the run started (git commit or dirty flag) is said in one line, not refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import scpo
from scpo.config import Config, ConfigError
from scpo.envs.registry import EnvSettings, env_settings
from scpo.errors import DataError, ExpectedError, RunFolderError
from scpo.policy import resolve_model_dir
from scpo.policy.profiles import check_model_source
from scpo.train.checkpoint import TrainingState, restorable_checkpoint
from scpo.train.metrics import HISTORY_FILE, history_problem
from scpo.train.panel import training_pool
from scpo.train.provenance import config_differences, git_state, read_provenance, resolved_config
from scpo.train.run_folder import check_fresh, check_not_in_use, check_out_folder, check_overwritable
from scpo.train.run_inputs import input_differences, start_model_record, task_pool_record

__all__ = [
    "TrainingPlan",
    "plan_training",
    "check_task_list",
    "check_start_model",
    "check_memory",
    "protected_paths",
    "STAGES",
]

STAGES = ("sft", "rl")


@dataclass
class TrainingPlan:
    """What `run_training` will do: stage, folder, mode (fresh | overwrite | resume), what the run reads (`inputs`:
    its task pool and start model, for provenance), and for a resume the checkpoint, its state, the lines to show
    (checkpoints skipped, a history rebuilt, the code changed), the differences accepted with --force and the
    checkpoint's history copy to rebuild history.csv from (None: it is complete)."""

    stage: str
    run_dir: Path
    mode: str
    checkpoint: Path | None = None
    state: TrainingState | None = None
    notes: list[str] = field(default_factory=list)
    forced: list[tuple[str, Any, Any]] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    history_from: Path | None = None
    protected: dict[str, Any] = field(default_factory=dict)


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


def protected_paths(cfg: Config) -> dict[str, Any]:
    """What `--overwrite` of a run folder must never remove: the data, the model it starts from, the scpo code."""
    return {
        "data.root": cfg.data.root,
        "data.shared_dir": cfg.data.shared_dir,
        "train.init_from": cfg.train.init_from,
        "the scpo code": Path(scpo.__file__).resolve().parent,
    }


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
    protected = protected_paths(cfg)
    if not resume:
        check_out_folder(run_dir)
    elif run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"--out {run_dir} is a file, not a run folder; nothing to resume")
    check_not_in_use(run_dir)
    if not resume:
        if overwrite:
            check_overwritable(run_dir, protected)
        else:
            check_fresh(run_dir, resumable=stage == "rl")
        inputs, lines = _check_inputs(cfg, stage, run_dir)
        mode = "overwrite" if overwrite else "fresh"
        return TrainingPlan(stage, run_dir, mode, notes=lines, inputs=inputs, protected=protected)
    ckpt, state, notes = restorable_checkpoint(run_dir)
    saved = read_provenance(ckpt) or read_provenance(run_dir)
    if saved is None:
        if not force:
            raise RunFolderError(
                f"{ckpt} records no config (written before scpo recorded one), so --resume cannot "
                "check it matches this one; add --force to resume it anyway"
            )
        inputs, lines = _check_inputs(cfg, stage, run_dir)
        notes += lines
        history_from = _check_history(run_dir, ckpt, state, notes)
        forced = [("config", "unrecorded", "now")]
        return TrainingPlan(stage, run_dir, "resume", ckpt, state, notes, forced, inputs, history_from, protected)
    diffs = config_differences(saved["config"], resolved_config(cfg))
    if diffs and not force:
        raise RunFolderError(
            f"--resume of {run_dir} with a different config: {_differences_line(diffs)}; resume with "
            "the run's settings, add --force to resume anyway, or start a new run elsewhere"
        )
    inputs, lines = _check_inputs(cfg, stage, run_dir)
    notes += lines
    changed = input_differences(saved, inputs)
    if changed and not force:
        raise RunFolderError(
            f"--resume of {run_dir} with other inputs than the run's: {'; '.join(changed)}; resume with the "
            "run's data and model, add --force to resume anyway, or start a new run elsewhere"
        )
    diffs = diffs + [("inputs", "the run's", line) for line in changed]
    history_from = _check_history(run_dir, ckpt, state, notes)
    code = _code_note(saved.get("git") or {}, git_state())
    return TrainingPlan(
        stage, run_dir, "resume", ckpt, state, notes + ([code] if code else []), diffs, inputs, history_from, protected
    )


def _check_inputs(cfg: Config, stage: str, run_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The data of the training split (for RL with `train.panel_size`, its task panel), the model the run starts from
    and its memory; -> what provenance records of the first two (`scpo.train.run_inputs`: "task_pool",
    "start_model") and the lines to show (the memory plan's on a GPU; on the CPU it is only checked)."""
    from scpo.policy.placement import resolve_device

    env = env_settings(cfg)
    tasks = check_task_list(env, env.train_split)
    panel = None
    if stage == "rl" and cfg.train.panel_size is not None:  # RL draws from a panel of the split: the pool
        panel = (cfg.train.panel_size, cfg.train.panel_seed)
        try:
            tasks = training_pool(env, *panel)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    check_start_model(cfg)
    line = check_memory(cfg)
    inputs = {
        "task_pool": task_pool_record(env.name, env.train_split, tasks, panel),
        "start_model": start_model_record(cfg, run_dir),
    }
    return inputs, [line] if resolve_device(cfg.train.device).type == "cuda" else []


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


def _check_history(run_dir: Path, ckpt: Path, state: TrainingState, notes: list[str]) -> Path | None:
    """The checkpoint's history copy when the run's history.csv must be rebuilt from it (a line in `notes` says so),
    None when the history is complete; RunFolderError naming the file when it is damaged and there is no copy."""
    done = int(state.info["iterations_done"])
    copy = ckpt / HISTORY_FILE
    reference = copy if copy.is_file() and history_problem(copy, done) is None else None
    problem = history_problem(run_dir / HISTORY_FILE, done, reference)
    if problem is None:
        return None
    if reference is None:
        raise RunFolderError(
            f"--resume of {run_dir}: {problem}, and checkpoint {ckpt.name} keeps no copy of it to rebuild it "
            "from; restore it from a copy, or start the run again with --overwrite"
        )
    notes.append(f"{problem}; rebuilt from {copy} (rows 0..{done - 1})")
    return reference


def _code_note(saved: dict[str, Any], now: dict[str, Any]) -> str | None:
    """One line when the code differs from the code the run was last checkpointed with (git commit or dirty flag)."""
    if not saved.get("commit") or not now.get("commit"):
        return None
    if (saved["commit"], saved.get("dirty")) == (now["commit"], now.get("dirty")):
        return None

    def text(g: dict[str, Any]) -> str:
        return f"{g['commit'][:10]}{' with uncommitted changes' if g.get('dirty') else ''}"

    return f"note: resuming with other code than the run's: commit {text(now)} now, {text(saved)} at its checkpoint"
