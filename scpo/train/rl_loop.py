"""The group-RL loop (`scpo train --stage rl`): `run_rl` reads top to bottom, one iteration =

    sample tasks -> collect N rollouts per task (dynamic sampling: until enough groups carry a signal) -> the batch
    (`RolloutBatch`: environment columns and the policy's prompts and token ids) -> its oracle progress, or the
    policy's Monte-Carlo state values (branches played by the engine), when the method reads them -> credit
    (`scpo.estimators.estimate`, with the policy for methods that need its scores) -> clipped-ratio update with KL
    to the reference and an entropy bonus -> sync the engine's weights -> metrics, saved rollouts, checkpoint.

Steps with advantage 0 are left out of the update with `train.skip_zero_advantage` (kept by the gpu profile, as
verl-agent). Every iteration is seeded from (train.seed, iteration), so a run resumed from a checkpoint continues
exactly as the uninterrupted run would have (tested by killing a run with SIGKILL). Where RL starts and the KL
reference: `scpo.train.setup`; the run folder's checks, lock and provenance: `scpo.train.run`.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.config import Config
from scpo.envs.registry import EnvSettings
from scpo.estimators import estimate, needs_oracle, needs_policy_values, with_oracle_progress
from scpo.policy.placement import resolve_device
from scpo.rollout import GenerationEngine, collect_rollouts, make_engine
from scpo.rollout.branches import policy_values
from scpo.rollout.collector import RolloutTiming
from scpo.train.checkpoint import finished_checkpoints, latest_checkpoint, save_checkpoint
from scpo.train.dynamic_sampling import dynamic_sample
from scpo.train.finite import check_update
from scpo.train.metrics import HISTORY_FILE, HistoryLog, credit_metrics, rollout_metrics
from scpo.train.panel import training_pool
from scpo.train.preflight import TrainingPlan
from scpo.train.seeding import iteration_seed, seed_everything
from scpo.train.setup import identity, initial_policy_dir, reference_model, run_env, save_model, trained_policy
from scpo.train.update import make_optimizer, ppo_update, update_samples

__all__ = ["run_rl", "sample_tasks", "iteration_rollouts", "collect_iteration", "PERF_KEYS"]

PERF_KEYS = ("perf/env_s", "perf/gen_s", "perf/credit_s", "perf/update_s", "perf/iter_s")
ATTEMPT_SEED_STRIDE = 1000  # dynamic sampling's try k plays environment seed train.seed + iteration + 1000 k


def sample_tasks(pool: list[str], n_tasks: int, seed: int, iteration: int, attempt: int = 0) -> list[str]:
    """n_tasks distinct tasks for this iteration (with replacement only if the pool is smaller than n_tasks); a later
    `attempt` of dynamic sampling draws from its own stream."""
    rng = np.random.default_rng([seed, iteration] if attempt == 0 else [seed, iteration, attempt])
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
    attempt: int = 0,
):
    """Iteration `it`'s rollouts: `sample_tasks` from `pool`, then `rollout.group_size` (or `group_size`) rollouts per
    task at the rollout temperature -> (trajectories, timing). Whatever the policy, iteration `it` plays the same
    tasks. A later `attempt` (dynamic sampling's try k) draws other tasks with another environment seed, so its groups
    are new ones."""
    tasks = sample_tasks(pool, cfg.rollout.n_tasks, cfg.train.seed, it, attempt)
    return collect_rollouts(
        env.package,
        tasks,
        group_size or cfg.rollout.group_size,
        engine,
        env_name=env.name,
        seed=cfg.train.seed + it + ATTEMPT_SEED_STRIDE * attempt,
        **play_settings(cfg, env),
        desc=desc or f"iter {it} rollouts",
    )


def play_settings(cfg: Config, env: EnvSettings) -> dict:
    """How the policy plays an episode (the collector's and the branches' keyword arguments): data, step limit, history
    length, sampling."""
    return {
        "data_root": env.data_root,
        "max_steps": env.max_steps,
        "history_length": cfg.env.history_length,
        "temperature": cfg.rollout.temperature,
        "top_p": cfg.rollout.top_p,
        "env_options": env.options,
    }


def collect_iteration(cfg: Config, env: EnvSettings, engine: GenerationEngine, pool: list[str], it: int):
    """-> (trajectories, timing, metrics): `iteration_rollouts`, or with `rollout.dynamic_sampling.enable` its tries
    until `rollout.n_tasks` groups with unequal returns are kept (`scpo.train.dynamic_sampling`; the metrics are its
    counters, the timing the sum over tries)."""
    opts = cfg.rollout.dynamic_sampling
    if not opts.enable:
        trajectories, timing = iteration_rollouts(cfg, env, engine, pool, it)
        return trajectories, timing, {}
    timings: list[RolloutTiming] = []

    def one_try(k: int):
        trajectories, timing = iteration_rollouts(cfg, env, engine, pool, it, attempt=k, desc=f"iter {it} try {k}")
        timings.append(timing)
        return trajectories

    sample = dynamic_sample(one_try, target_groups=cfg.rollout.n_tasks, max_tries=opts.max_tries)
    total = RolloutTiming(
        env_s=sum(t.env_s for t in timings),
        gen_s=sum(t.gen_s for t in timings),
        n_generations=sum(t.n_generations for t in timings),
        n_turns=sum(t.n_turns for t in timings),
    )
    return sample.trajectories, total, sample.metrics()


def run_rl(cfg: Config, plan: TrainingPlan, record: dict) -> dict:
    """Group RL with `cfg.credit.method` into `plan.run_dir` (checked and locked by `run_training`), from
    `plan.checkpoint` when resuming; checkpoints carry `record` (provenance). See the module docstring."""
    t_start = time.perf_counter()
    env = run_env(cfg)
    method = cfg.credit.method
    run_dir, ckpt, saved = plan.run_dir, plan.checkpoint, plan.state
    if ckpt is not None:
        _drop_after(run_dir, int(saved.info["iterations_done"]))

    # ---- seeding, policy, reference policy, optimizer, engine
    seed_everything(cfg.train.seed)
    device = resolve_device(cfg.train.device)
    init_dir = initial_policy_dir(cfg, env, run_dir)
    policy = trained_policy(cfg, ckpt / "model" if ckpt else init_dir, device)
    reference = reference_model(cfg, env, run_dir, init_dir, policy, resuming=ckpt is not None)
    optimizer = make_optimizer(policy.model, cfg.train)
    start = saved.restore(optimizer) if saved else 0
    engine = make_engine(cfg, policy, model_dir=ckpt / "model" if ckpt else init_dir)
    log = HistoryLog(run_dir, keep_iterations=start)
    pool = training_pool(env.settings, cfg.train.panel_size, cfg.train.panel_seed)  # the split, or its task panel
    pad_id = policy.tokenizer.pad_token_id

    for it in tqdm(
        range(start, cfg.train.iterations), desc=f"rl {method}", initial=start, total=cfg.train.iterations, unit="iter"
    ):
        seed_everything(iteration_seed(cfg.train.seed, it))
        t_iter = time.perf_counter()

        # 1. rollouts: N per task, same seed, all envs batched through generation -> the batch
        trajectories, timing, sampling = collect_iteration(cfg, env.settings, engine, pool, it)
        batch = RolloutBatch.from_trajectories(trajectories)
        if needs_oracle([method]):  # the planner's oracle progress, part of the saved batch
            batch = with_oracle_progress(batch, cfg.data.root)
        values = {}
        if needs_policy_values([method]):  # the policy's own state values, by branches from every visited state
            batch, values = with_policy_values(cfg, env.settings, engine, batch, it)

        # 2. credit assignment (pure estimators; a method needing the policy's scores gets the policy)
        t0 = time.perf_counter()
        credit = estimate(batch, [method], cfg, policy=policy)[method]
        credit_s = time.perf_counter() - t0

        # 3. policy update, then push the new weights to the generation engine
        t0 = time.perf_counter()
        samples, n_steps = update_samples(batch, credit.advantages, cfg.train.skip_zero_advantage)
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
        # a NaN / infinite loss, gradient norm or weight stops the run here: nothing of iteration `it` gets written
        check_update(it, update, policy.model, hint=lambda: _diverged_hint(cfg, run_dir))
        engine.sync_weights(policy)
        update_s = time.perf_counter() - t0

        # 4. metrics, saved rollouts, checkpoint
        row = {
            "iteration": it,
            **rollout_metrics(batch),
            **credit_metrics(batch, credit),
            **{f"losses/{k}": v for k, v in update.items()},
            "losses/frac_steps_updated": len(samples) / max(n_steps, 1),
            "perf/env_s": timing.env_s,
            "perf/gen_s": timing.gen_s,
            "perf/credit_s": credit_s,
            "perf/update_s": update_s,
            "perf/iter_s": time.perf_counter() - t_iter,
            **sampling,
            **values,
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
                {"method": method, "provenance": record},
                keep=cfg.train.keep_checkpoints,
                files={HISTORY_FILE: log.path},  # the history as of this checkpoint: a resume checks against it
            )

    log.close()
    save_model(policy, run_dir / "model")
    return _summary(cfg, run_dir, log.rows, time.perf_counter() - t_start, init_dir)


def with_policy_values(cfg: Config, env: EnvSettings, engine: GenerationEngine, batch: RolloutBatch, it: int):
    """-> (`batch` with its policy_value column, the branches' metrics): `credit.mc_advantage.rollouts`
    continuations of the current policy from every state the batch acted on (`scpo.rollout.branches`)."""
    values, timing = policy_values(
        batch,
        env.package,
        engine,
        rollouts=cfg.credit.mc_advantage.rollouts,
        **play_settings(cfg, env),
        desc=f"iter {it} branches",
    )
    metrics = {
        "branches/n": float(timing.extra["branches"]),
        "branches/steps": float(timing.n_generations),
        "perf/branch_env_s": timing.env_s,
        "perf/branch_gen_s": timing.gen_s,
    }
    return batch.with_column("policy_value", values), metrics


def _diverged_hint(cfg: Config, run_dir: Path) -> str:
    last = latest_checkpoint(run_dir)
    where = f"the run folder keeps {last.relative_to(run_dir)}" if last else "no checkpoint was written yet"
    return f"{where}; lower train.lr (now {cfg.train.lr:g}) or train.max_grad_norm, then " + (
        "`--resume --force`" if last else "run it again with --overwrite"
    )


def _drop_after(run_dir: Path, iterations_done: int) -> None:
    """Before resuming from a checkpoint after `iterations_done` iterations: move aside newer checkpoints (ones that
    could not be restored: `checkpoints/corrupt-iter_XXXX`) and delete newer saved rollouts, which the resumed run
    writes again (history rows are trimmed by `HistoryLog`)."""
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
        **identity(cfg),
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
