"""A run decided once: `make_plan` checks everything a training command needs and resolves it into one frozen
`RunPlan`, writing nothing; the SFT warm start and the trainer read the plan, never the raw command.

    plan = make_plan(cfg, "rl", out_dir, resume=False, overwrite=False, force=False)

What it decides, in this order (each failure one line, an `ExpectedError`, and a folder holding another run is
never touched by a command that fails one of them):
- the run folder and the mode: fresh (the folder absent or empty), overwrite (a folder holding only a run's own
  entries and none of `protected_paths`), or resume (a restorable checkpoint whose recorded config matches:
  `scpo.run.provenance.config_differences`; `--force` accepts differences and the provenance records them);
  not a file, not inside another run, not in use (`scpo.run.guards`, `scpo.pipeline.folder_lock`);
- the environment's settings (`scpo.envs.registry.EnvSettings`), the task pool (the training split's tasks, or for RL
  with `train.panel_size` its panel: `scpo.run.inputs.task_pool`) and the split's tasks demonstrated (the warm
  start's, `train.sft.n_demos` drawn with `train.seed`: `scpo.envs.demos.demo_tasks`);
- the models: where the policy starts and the KL reference (`scpo.run.inputs.start_models`), each there or
  reachable;
- the learned critic a method that reads its values trains beside the policy (`CriticPlan`: PPO's, from the weights
  the policy starts from, with `train.critic`; None for every other method);
- the device and whether the run fits its memory (`scpo.policy.memory_plan`: on a GPU the estimated peak is one of
  the plan's notes; a run over its device's memory is refused);
- for a resume, what it continues from: the checkpoint and its state, the history to rebuild (history.csv must hold
  rows 0..k-1 of the checkpoint's k iterations, compared with the checkpoint's own copy, from which a damaged or
  truncated history is rebuilt; without a copy a damaged history is refused), the same task pool and start models
  as the run's (by digest; a difference is refused like a config difference), and a note when the code changed
  since the checkpoint (git commit or dirty flag);
- the provenance record the run folder and every checkpoint carry (`scpo.run.provenance`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scpo
from scpo.config import Config, ConfigError
from scpo.envs.demos import demo_tasks
from scpo.envs.registry import EnvSettings, env_settings
from scpo.errors import RunFolderError
from scpo.pipeline.folder_lock import check_not_in_use
from scpo.pipeline.layout import run_dir as layout_run_dir
from scpo.policy.placement import resolve_device
from scpo.run.checkpoint import TrainingState, restorable_checkpoint
from scpo.run.guards import check_fresh, check_out_folder, check_overwritable
from scpo.run.history import HISTORY_FILE, history_problem
from scpo.run.inputs import (
    ModelSource,
    check_machine,
    check_memory,
    critic_lines,
    data_record,
    estimate_lines,
    input_differences,
    start_model_record,
    start_models,
    task_list,
    task_pool,
)
from scpo.run.provenance import config_differences, git_state, provenance, read_provenance, resolved_config

__all__ = ["RunPlan", "Resume", "CriticPlan", "make_plan", "default_run_dir", "protected_paths", "STAGES"]

STAGES = ("sft", "rl")


@dataclass(frozen=True)
class Resume:
    """What a resumed run continues from: the checkpoint, its state, the checkpoint's copy of history.csv to rebuild
    the run's from (None: the run's is complete) and the differences accepted with --force."""

    checkpoint: Path
    state: TrainingState
    history_from: Path | None
    forced: tuple[tuple[str, Any, Any], ...] = ()

    @property
    def iterations_done(self) -> int:
        return int(self.state.info["iterations_done"])


@dataclass(frozen=True)
class CriticPlan:
    """The learned critic of a run whose credit method reads its values (`Config.trains_critic`: PPO): a value model
    from the weights the policy starts from (`start`; verl-agent's PPO recipe: critic.model.path = the actor's
    model), trained with `options` (train.critic; `scpo.train.critic`)."""

    start: ModelSource
    options: Any  # scpo.config.CriticConfig


@dataclass(frozen=True)
class RunPlan:
    """One training run, decided (module docstring). `config` holds the run's settings (its train, rollout, credit,
    policy and eval sections); everything else the run reads is decided here."""

    config: Config
    stage: str  # "sft" | "rl"
    run_dir: Path
    mode: str  # "fresh" | "overwrite" | "resume"
    env: EnvSettings
    tasks: tuple[str, ...]  # the task pool: the training split, or its panel
    demo_tasks: tuple[str, ...]  # the training split's tasks demonstrated (SFT; tiny's tokenizer: the first 20)
    start: ModelSource  # where the policy starts
    reference: ModelSource | None  # the KL reference (None: no KL term)
    device: Any  # torch.device
    resume: Resume | None
    record: dict[str, Any]  # the provenance the run folder and its checkpoints carry
    notes: tuple[str, ...]  # lines to show when the run starts
    protected: dict[str, Any]  # what --overwrite must never remove
    critic: CriticPlan | None = None  # the learned critic trained beside the policy (PPO), None without one

    @property
    def seed(self) -> int:
        return self.config.train.seed

    @property
    def method(self) -> str:
        return self.config.credit.method

    @property
    def warm_start(self) -> bool:
        """Whether the policy starts from `train.init_from` (an SFT run), rather than from the profile's model."""
        return bool(self.config.train.init_from) and self.config.train.rl_start == "warm_start"


def default_run_dir(cfg: Config, stage: str) -> Path:
    """The default run folder of `stage` ('sft' or 'rl'): <train.out_dir>/<env>/<sft | method>/seed<seed>."""
    return layout_run_dir(
        cfg.train.out_dir, cfg.env.name, "sft" if stage == "sft" else cfg.credit.method, cfg.train.seed
    )


def protected_paths(cfg: Config) -> dict[str, Any]:
    """What `--overwrite` of a run folder must never remove: the data, the model it starts from, the scpo code."""
    return {
        "data.root": cfg.data.root,
        "data.shared_dir": cfg.data.shared_dir,
        "train.init_from": cfg.train.init_from,
        "the scpo code": Path(scpo.__file__).resolve().parent,
    }


def _check_modes(stage: str, resume: bool, overwrite: bool) -> None:
    if stage not in STAGES:
        raise ConfigError(f"stage={stage!r} is invalid; allowed: {', '.join(STAGES)}")
    if resume and overwrite:
        raise ConfigError("--resume and --overwrite exclude each other: continue the run, or replace it")
    if resume and stage == "sft":
        raise ConfigError(
            "--resume is for RL runs; an SFT warm start has no checkpoints (run it again with --overwrite)"
        )


def _differences_line(diffs: list[tuple[str, Any, Any]]) -> str:
    shown = "; ".join(f"{k}: {a!r} in the run, {b!r} now" for k, a, b in diffs[:6])
    return shown + (f"; and {len(diffs) - 6} more" if len(diffs) > 6 else "")


def make_plan(
    cfg: Config,
    stage: str,
    out_dir: Path | None = None,
    *,
    resume: bool = False,
    overwrite: bool = False,
    force: bool = False,
) -> RunPlan:
    """Every check of the module docstring, without writing anything; the plan, or one ExpectedError."""
    _check_modes(stage, resume, overwrite)
    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(cfg, stage)
    protected = protected_paths(cfg)
    if not resume:
        check_out_folder(run_dir)
    elif run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"--out {run_dir} is a file, not a run folder; nothing to resume")
    check_not_in_use(run_dir)
    notes: list[str] = []
    saved = None
    if resume:
        ckpt, state, skipped = restorable_checkpoint(run_dir)
        notes += skipped
        saved = read_provenance(ckpt) or read_provenance(run_dir)
        if saved is None and not force:
            raise RunFolderError(
                f"{ckpt} records no config, so --resume cannot check it matches this one; add --force to resume "
                "it anyway"
            )
        forced = (
            [("config", "unrecorded", "now")]
            if saved is None
            else config_differences(saved["config"], resolved_config(cfg))
        )
        if forced and not force:
            raise RunFolderError(
                f"--resume of {run_dir} with a different config: {_differences_line(forced)}; resume with "
                "the run's settings, add --force to resume anyway, or start a new run elsewhere"
            )
    elif overwrite:
        check_overwritable(run_dir, protected)
    else:
        check_fresh(run_dir, resumable=stage == "rl")

    device = resolve_device(cfg.train.device)
    check_machine(cfg, device)  # before the data: what this machine cannot run is said first
    env = env_settings(cfg)
    split = task_list(env, env.train_split)
    tasks, pool_record = task_pool(cfg, env, stage, split)
    start, reference = start_models(cfg, run_dir)
    memory = check_memory(cfg, start, device)
    critic = CriticPlan(start, cfg.train.critic) if stage == "rl" and cfg.trains_critic else None
    if device.type == "cuda":
        notes += [memory, *estimate_lines(cfg, start)]
    if critic is not None:
        notes += critic_lines(cfg, start)
    inputs = {
        "task_pool": pool_record,
        "data": data_record(env, tasks),
        "start_model": start_model_record(start, reference),
    }

    plan_resume = None
    if resume:
        if saved is not None:
            changed = input_differences(saved, inputs)
            if changed and not force:
                raise RunFolderError(
                    f"--resume of {run_dir} with other inputs than the run's: {'; '.join(changed)}; resume with the "
                    "run's data and model, add --force to resume anyway, or start a new run elsewhere"
                )
            forced += [("inputs", "the run's", line) for line in changed]
        history_from = _history_to_rebuild(run_dir, ckpt, state, notes)
        code = _code_note((saved or {}).get("git") or {}, git_state()) if saved is not None else None
        notes += [code] if code else []
        plan_resume = Resume(ckpt, state, history_from, tuple(forced))
    mode = "resume" if resume else "overwrite" if overwrite else "fresh"
    return RunPlan(
        cfg,
        stage,
        run_dir,
        mode,
        env,
        tuple(tasks),
        tuple(demo_tasks(split, cfg.train.sft.n_demos, cfg.train.seed)),
        start,
        reference,
        device,
        plan_resume,
        {**provenance(cfg), **inputs},
        tuple(notes),
        protected,
        critic,
    )


def _history_to_rebuild(run_dir: Path, ckpt: Path, state: TrainingState, notes: list[str]) -> Path | None:
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
