"""`run_training(cfg, stage)`: the behaviour-cloning warm start ("sft") and the group-RL loop ("rl").

The RL loop reads top to bottom, one iteration =
    sample tasks -> collect N rollouts per task -> RolloutBatch -> compute_advantages (+ the policy's hindsight
    log-probs for methods whose registry spec needs `policy_scores`: HCAPO)
    -> clipped-ratio update with KL to the reference and an entropy bonus (steps with advantage 0 left out with
    `train.skip_zero_advantage`, kept by the gpu profile as verl-agent) -> sync engine weights -> metrics, rollouts,
    checkpoint. RL starts from the SFT warm start or the profile's model (`train.rl_start`); the KL reference is the
    start or the profile's model (`train.kl_reference`).
Every iteration is seeded from (train.seed, iteration), so a run resumed from a checkpoint continues exactly as the
uninterrupted run would have (tested by killing a run with SIGKILL). Seeding: `scpo.train.seeding`; the run folder's
place: `scpo.pipeline.layout.run_dir`.

Before anything is written, `scpo.train.preflight.plan_training` checks the data, the starting model and the run folder
(a fresh run needs an empty one; `overwrite` replaces it only once every check passed; `resume` needs a restorable
checkpoint whose recorded config matches). The folder is then locked (`scpo.train.run_folder.RunLock`: a second
writer fails at once) and gets `provenance.json` (resolved config, overrides, version, git commit); each checkpoint's
state.json carries the same record. A finished run ends with `summary.json` and `manifest.json` (digests of the model,
rollouts and history, which the DVC stages downstream depend on).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

import scpo
from scpo.config import Config
from scpo.credit.registry import method_spec
from scpo.envs.registry import EnvSettings, env_settings
from scpo.pipeline.layout import run_dir as layout_run_dir
from scpo.pipeline.manifest import write_run_manifest
from scpo.policy import PolicyLike, create_policy, load_policy, resolve_model_dir
from scpo.policy.placement import autocast_each_forward, gpu_claim, resolve_device
from scpo.policy.profiles import enable_gradient_checkpointing, reference_for, trained_dtype, with_lora
from scpo.rollout import GenerationEngine, collect_rollouts, make_engine
from scpo.rollout_types import RolloutBatch
from scpo.train.checkpoint import save_checkpoint
from scpo.train.metrics import HistoryLog, credit_metrics, rollout_metrics
from scpo.train.preflight import TrainingPlan, plan_training
from scpo.train.provenance import PROVENANCE_FILE, git_state, provenance, read_provenance, write_json_atomic
from scpo.train.run_folder import RunLock, check_fresh, clear_run_folder
from scpo.train.seeding import iteration_seed, seed_everything, set_threads
from scpo.train.sft import behaviour_cloning, expert_demonstrations
from scpo.train.update import make_optimizer, ppo_update, update_samples

__all__ = ["run_training", "run_sft", "run_rl", "sample_tasks", "iteration_rollouts"]

PERF_KEYS = ("perf/env_s", "perf/gen_s", "perf/credit_s", "perf/update_s", "perf/iter_s")


def _run_dir(cfg: Config, stage: str) -> Path:
    """The default run folder of `stage` ('sft' or 'rl'): <train.out_dir>/<env>/<sft | method>/seed<seed>."""
    return layout_run_dir(
        cfg.train.out_dir, cfg.env.name, "sft" if stage == "sft" else cfg.credit.method, cfg.train.seed
    )


def sample_tasks(pool: list[str], n_tasks: int, seed: int, iteration: int) -> list[str]:
    """n_tasks distinct tasks for this iteration (with replacement only if the pool is smaller than n_tasks)."""
    rng = np.random.default_rng([seed, iteration])
    idx = rng.choice(len(pool), size=n_tasks, replace=len(pool) < n_tasks)
    return [pool[i] for i in idx]


def iteration_rollouts(
    cfg: Config,
    env: EnvSettings,
    engine: GenerationEngine,
    pool: list[str],
    it: int,
    group_size: int | None = None,
    desc: str | None = None,
):
    """Iteration `it`'s rollouts: `sample_tasks` from `pool`, then `rollout.group_size` (or `group_size`) rollouts per
    task at the rollout temperature -> (trajectories, timing). Whatever the policy, iteration `it` plays the same
    tasks."""
    tasks = sample_tasks(pool, cfg.rollout.n_tasks, cfg.train.seed, it)
    return collect_rollouts(
        env.package,
        tasks,
        group_size or cfg.rollout.group_size,
        engine,
        env_name=env.name,
        seed=cfg.train.seed + it,
        data_root=env.data_root,
        max_steps=env.max_steps,
        history_length=cfg.env.history_length,
        temperature=cfg.rollout.temperature,
        top_p=cfg.rollout.top_p,
        env_options=env.options,
        desc=desc or f"iter {it} rollouts",
    )


def run_training(
    cfg: Config,
    stage: str = "rl",
    out_dir: Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    force: bool = False,
) -> dict:
    """Run stage 'sft' or 'rl' into `out_dir` (default: `_run_dir`); returns the summary dict (also written to
    `<out_dir>/summary.json`). Modes: fresh (the folder must be empty), `overwrite` (replace what it holds, after every
    check passed), `resume` (continue from the newest restorable checkpoint; a config differing from the run's
    recorded one is refused unless `force`). Every check runs before the folder is touched (module docstring)."""
    run_dir = Path(out_dir) if out_dir is not None else _run_dir(cfg, stage)
    plan = plan_training(cfg, stage, run_dir, resume=resume, overwrite=overwrite, force=force)
    set_threads(cfg.train.torch_threads)
    with RunLock(run_dir) as lock, gpu_claim(resolve_device(cfg.train.device)):  # one run per GPU
        for line in [lock.note, *plan.notes]:
            if line:
                _note(line)
        if plan.mode == "fresh":
            check_fresh(run_dir, resumable=stage == "rl")  # again, now that no other writer can start
        elif plan.mode == "overwrite":
            clear_run_folder(run_dir)
        record = _record_provenance(cfg, plan)
        summary = run_sft(cfg, run_dir) if stage == "sft" else run_rl(cfg, plan, record)
        write_json_atomic(run_dir / "summary.json", summary)
        write_run_manifest(run_dir)
    return summary


def _note(line: str) -> None:
    """One line for the user on stderr, between progress bars."""
    tqdm.write(line, file=sys.stderr)


def _record_provenance(cfg: Config, plan: TrainingPlan) -> dict:
    """Write `<run>/provenance.json` (a new run) or add this resume to it (the first record is kept); return the record
    that this process's checkpoints carry."""
    record = provenance(cfg)
    path = plan.run_dir / PROVENANCE_FILE
    if plan.mode == "resume":
        first = read_provenance(plan.run_dir) or {"config": None, "note": "run started before provenance was recorded"}
        first.setdefault("resumes", []).append(
            {**record, "from_checkpoint": plan.checkpoint.name, "forced_differences": [list(d) for d in plan.forced]}
        )
        write_json_atomic(path, first)
    else:
        write_json_atomic(path, record)
    return record


def _save_model(policy: PolicyLike, path: Path) -> None:
    """`policy.save(path)` through a temporary folder renamed into place (a killed process never leaves a half
    model)."""
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save(tmp)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


# ------------------------------------------------------------------------------------------------------------------ SFT
def _demo_tasks(env: EnvSettings, cfg: Config) -> list[str]:
    pool = env.package.list_tasks(env.train_split, data_root=env.data_root)
    rng = np.random.default_rng([cfg.train.seed, 7])
    return [pool[i] for i in sorted(rng.permutation(len(pool))[: cfg.train.sft.n_demos])]


def run_sft(cfg: Config, run_dir: Path) -> dict:
    """Behaviour cloning on `train.sft.n_demos` expert demonstrations into `run_dir` (checked and locked by
    `run_training`); writes `model/` and returns the summary.

    With `train.rl_start: base` (RL from the profile's model, verl-agent's recipe) no warm start is needed: only a
    summary saying so is written (no `model/`), so the pipeline's SFT stage costs nothing."""
    t_start = time.perf_counter()
    if cfg.train.rl_start == "base":
        return {
            "stage": "sft",
            "env": cfg.env.name,
            "seed": cfg.train.seed,
            **_identity(cfg),
            "skipped": "train.rl_start=base: RL starts from the profile's model, no warm start",
            "wall_s": time.perf_counter() - t_start,
            "run_dir": str(run_dir),
        }
    env = env_settings(cfg)
    seed_everything(cfg.train.seed)
    demos, demo_stats = expert_demonstrations(
        env.package,
        _demo_tasks(env, cfg),
        data_root=env.data_root,
        max_steps=env.max_steps,
        history_length=cfg.env.history_length,
    )
    corpus = [d.prompt for d in demos] + [d.response for d in demos]
    device = resolve_device(cfg.train.device)
    if cfg.train.init_from:  # trained weights in float32 (a LoRA base in policy.dtype), forward passes in policy.dtype
        policy = load_policy(cfg.train.init_from, dtype=trained_dtype(cfg.policy), device=device)
    else:
        policy = create_policy(
            cfg.policy.model_copy(update={"dtype": trained_dtype(cfg.policy)}),
            corpus=corpus,
            models_dir=Path(cfg.data.root) / "models",
            seed=cfg.train.seed,
            device=device,
            fixed_phrases=getattr(env.package, "PROMPT_PHRASES", ()),
            lowercase=getattr(env.package, "TINY_TOKENIZER_LOWERCASE", False),
        )
    autocast_each_forward(policy.model, device, cfg.policy.dtype)  # each forward pass in policy.dtype
    if cfg.train.gradient_checkpointing:
        enable_gradient_checkpointing(policy.model)
    bc = behaviour_cloning(
        policy,
        demos,
        epochs=cfg.train.sft.epochs,
        lr=cfg.train.sft.lr,
        batch_size=cfg.train.sft.batch_size,
        max_prompt_tokens=cfg.policy.max_prompt_tokens,
        seed=cfg.train.seed,
    )
    _save_model(policy, run_dir / "model")
    return {
        "stage": "sft",
        "env": cfg.env.name,
        "seed": cfg.train.seed,
        **_identity(cfg),
        "n_params": sum(p.numel() for p in policy.model.parameters()),
        "demos": demo_stats,
        "bc": bc,
        "wall_s": time.perf_counter() - t_start,
        "run_dir": str(run_dir),
    }


def _identity(cfg: Config) -> dict:
    """What the summary says about the config: profile, policy, the explicit overrides, version and git commit (the
    whole resolved config is in provenance.json)."""
    return {
        "profile": cfg.profile,
        "policy": cfg.policy.profile,
        "overrides": cfg.origin.get("overrides", {}),
        "scpo_version": scpo.__version__,
        "git": git_state(),
    }


# ------------------------------------------------------------------------------------------------------------------- RL
def _initial_policy_dir(cfg: Config, env: EnvSettings, run_dir: Path) -> Path:
    """Where RL starts: `train.init_from` (an SFT run / model dir) with `train.rl_start: warm_start`, else the profile's
    model (`_profile_model_dir`)."""
    if cfg.train.init_from and cfg.train.rl_start == "warm_start":
        return resolve_model_dir(cfg.train.init_from)
    return _profile_model_dir(cfg, env, run_dir)


def _profile_model_dir(cfg: Config, env: EnvSettings, run_dir: Path) -> Path:
    """The profile's own model: a local one (smollm2-135m's converted folder, a local path), or a fresh profile model
    saved once under `<run_dir>/init_model` (tiny, Hub names), so a resumed run finds it again."""
    if cfg.policy.profile == "smollm2-135m":
        from scpo.policy.smollm2 import ensure_smollm2

        return ensure_smollm2(Path(cfg.data.root) / "models")
    if cfg.policy.profile != "tiny" and Path(cfg.policy.profile).exists():
        return resolve_model_dir(cfg.policy.profile)
    init_dir = run_dir / "init_model"
    if not (init_dir / "config.json").exists():
        corpus = None
        if cfg.policy.profile == "tiny":
            demos, _ = expert_demonstrations(
                env.package,
                _demo_tasks(env, cfg)[:20],
                data_root=env.data_root,
                max_steps=env.max_steps,
                history_length=cfg.env.history_length,
                progress=False,
            )
            corpus = [d.prompt for d in demos] + [d.response for d in demos]
        create_policy(
            cfg.policy,
            corpus=corpus,
            models_dir=Path(cfg.data.root) / "models",
            seed=cfg.train.seed,
            fixed_phrases=getattr(env.package, "PROMPT_PHRASES", ()),
            lowercase=getattr(env.package, "TINY_TOKENIZER_LOWERCASE", False),
        ).save(init_dir)
    return init_dir


def _label_progress(env, batch: RolloutBatch) -> RolloutBatch:
    """The batch with oracle_progress (ALFWorld only: V* comes from the fast engine's planner; one planner pool per
    process, so its caches serve every iteration)."""
    if getattr(env.package, "__name__", "") != "scpo.envs.alfworld":
        raise ValueError(
            f"oracle progress needs ALFWorld's planner (scpo.envs.alfworld); env {env.name!r} is "
            f"{getattr(env.package, '__name__', env.package)!r}"
        )
    from scpo.envs.alfworld.oracle_rollouts import PlannerPool, label_progress

    pool = _PLANNERS.setdefault(str(env.data_root), PlannerPool(env.data_root))
    return label_progress(batch, data_root=env.data_root, pool=pool, progress=False)


_PLANNERS: dict = {}


def _credit(cfg: Config, batch: RolloutBatch, trajectories, policy: PolicyLike):
    """`compute_advantages` of `credit.method`, with what its registry spec says it needs from the policy."""
    from scpo.credit import compute_advantages
    from scpo.credit.registry import method_spec
    from scpo.train.hindsight import hindsight_logprob

    method = cfg.credit.method
    kwargs = {}
    if method_spec(method).policy_scores:
        kwargs["hindsight_logprob"] = hindsight_logprob(
            policy,
            trajectories,
            temperature=cfg.credit.hcapo.temperature,
            max_prompt_tokens=cfg.policy.max_prompt_tokens,
            batch_size=cfg.train.minibatch_size,
        )
    return compute_advantages(method, batch, cfg.credit.for_env(cfg.env.name), **kwargs)


def run_rl(cfg: Config, plan: TrainingPlan, record: dict) -> dict:
    """Group RL with `cfg.credit.method` into `plan.run_dir` (checked and locked by `run_training`), from
    `plan.checkpoint` when resuming; checkpoints carry `record` (provenance). See the module docstring."""
    t_start = time.perf_counter()
    env = env_settings(cfg)
    run_dir, ckpt, saved = plan.run_dir, plan.checkpoint, plan.state
    if ckpt is not None:
        _drop_after(run_dir, int(saved.info["iterations_done"]))

    # ---- seeding, policy, reference policy, optimizer, engine
    seed_everything(cfg.train.seed)
    device = resolve_device(cfg.train.device)
    init_dir = _initial_policy_dir(cfg, env, run_dir)
    # trained weights in float32 (a LoRA base in policy.dtype), forward passes in policy.dtype (scpo.policy.placement)
    policy = load_policy(ckpt / "model" if ckpt else init_dir, dtype=trained_dtype(cfg.policy), device=device)
    if cfg.policy.lora and not hasattr(policy.model, "peft_config"):
        policy.model = with_lora(policy.model, cfg.policy.lora_r, cfg.policy.lora_alpha)
    autocast_each_forward(policy.model, device, cfg.policy.dtype)  # each forward pass in policy.dtype, fresh casts
    if cfg.train.gradient_checkpointing:
        enable_gradient_checkpointing(policy.model)
    reference = None
    if cfg.train.kl_coef > 0:  # the weights RL starts from, or the profile's base model (train.kl_reference)
        ref_dir = init_dir if cfg.train.kl_reference == "start" else _profile_model_dir(cfg, env, run_dir)
        reference = reference_for(policy, ref_dir, same_start=ckpt is None and ref_dir == init_dir, cfg=cfg.policy)
    optimizer = make_optimizer(policy.model, cfg.train)
    start = saved.restore(optimizer) if saved else 0
    engine = make_engine(cfg, policy, model_dir=ckpt / "model" if ckpt else init_dir)
    log = HistoryLog(run_dir, keep_iterations=start)
    pool = env.package.list_tasks(env.train_split, data_root=env.data_root)
    pad_id = policy.tokenizer.pad_token_id

    for it in tqdm(
        range(start, cfg.train.iterations),
        desc=f"rl {cfg.credit.method}",
        initial=start,
        total=cfg.train.iterations,
        unit="iter",
    ):
        seed_everything(iteration_seed(cfg.train.seed, it))
        t_iter = time.perf_counter()

        # 1. rollouts: N per task, same seed, all envs batched through generation
        trajectories, timing = iteration_rollouts(cfg, env, engine, pool, it)
        batch = RolloutBatch.from_trajectories(trajectories)
        if method_spec(cfg.credit.method).oracle:  # the oracle estimator: q_t from the planner
            batch = _label_progress(env, batch)

        # 2. credit assignment (pure estimators; HCAPO's hindsight log-probs come from the policy)
        t0 = time.perf_counter()
        credit = _credit(cfg, batch, trajectories, policy)
        credit_s = time.perf_counter() - t0

        # 3. policy update, then push the new weights to the generation engine
        t0 = time.perf_counter()
        samples, n_steps = update_samples(trajectories, credit.advantages, cfg.train.skip_zero_advantage)
        gen = torch.Generator().manual_seed(iteration_seed(cfg.train.seed, it))
        with engine.memory_released():  # vLLM's sleep mode (rollout.vllm_sleep_mode); nothing for transformers
            update = ppo_update(
                policy.model,
                reference,
                optimizer,
                samples,
                pad_id=pad_id,
                train_cfg=cfg.train,
                temperature=cfg.rollout.temperature or 1.0,
                generator=gen,
            )
        engine.sync_weights(policy)
        update_s = time.perf_counter() - t0

        # 4. metrics, saved rollouts, checkpoint
        row = {
            "iteration": it,
            **rollout_metrics(trajectories, batch),
            **credit_metrics(batch, credit),
            **{f"losses/{k}": v for k, v in update.items()},
            "losses/frac_steps_updated": len(samples) / max(n_steps, 1),
            "perf/env_s": timing.env_s,
            "perf/gen_s": timing.gen_s,
            "perf/credit_s": credit_s,
            "perf/update_s": update_s,
            "perf/iter_s": time.perf_counter() - t_iter,
            "perf/steps": float(batch.n_rows),
            "perf/response_tokens": float(sum(len(s.response_ids) for s in samples)),
        }
        log.log(row)
        if cfg.train.save_rollouts_every and (it + 1) % cfg.train.save_rollouts_every == 0:
            batch.to_parquet(run_dir / "rollouts" / f"iter_{it:04d}.parquet")
        if (it + 1) % cfg.train.checkpoint_every == 0 or it + 1 == cfg.train.iterations:
            save_checkpoint(
                run_dir,
                it + 1,
                policy,
                optimizer,
                {"method": cfg.credit.method, "provenance": record},
                keep=cfg.train.keep_checkpoints,
            )

    log.close()
    _save_model(policy, run_dir / "model")
    return _summary(cfg, run_dir, log.rows, time.perf_counter() - t_start, init_dir)


def _drop_after(run_dir: Path, iterations_done: int) -> None:
    """Before resuming from a checkpoint after `iterations_done` iterations: move aside newer checkpoints (ones that
    could not be restored: `checkpoints/corrupt-iter_XXXX`) and delete newer saved rollouts, which the resumed run
    writes again (history rows are trimmed by `HistoryLog`)."""
    from scpo.train.checkpoint import finished_checkpoints

    for ckpt in finished_checkpoints(run_dir):
        if int(ckpt.name.split("_")[1]) > iterations_done:
            target = ckpt.with_name(f"corrupt-{ckpt.name}")
            shutil.rmtree(target, ignore_errors=True)
            ckpt.rename(target)
    for path in sorted((run_dir / "rollouts").glob("iter_*.parquet")) if (run_dir / "rollouts").is_dir() else []:
        if int(path.stem.split("_")[1]) >= iterations_done:
            path.unlink()


def _summary(cfg: Config, run_dir: Path, rows: list[dict], wall_s: float, init_dir: Path) -> dict:
    """Final metrics (last iteration), mean wall seconds per iteration split env / gen / credit / update."""
    last = rows[-1] if rows else {}
    perf = {k.split("/", 1)[1]: float(np.mean([r[k] for r in rows])) for k in PERF_KEYS if rows}
    return {
        "stage": "rl",
        "env": cfg.env.name,
        "method": cfg.credit.method,
        "seed": cfg.train.seed,
        **_identity(cfg),
        "iterations": len(rows),
        "init_from": str(init_dir),
        "rl_start": cfg.train.rl_start,
        "kl_reference": cfg.train.kl_reference,
        "final": {k: v for k, v in last.items() if not k.startswith("perf/")},
        "success_rate_mean": float(np.mean([r["charts/success_rate"] for r in rows])) if rows else None,
        "seconds_per_iteration": perf,
        "wall_s": wall_s,
        "run_dir": str(run_dir),
    }
