"""One iteration's rollouts: which tasks it plays, with which environment seed, how many times each, and the tries of
dynamic sampling.

Iteration `it` draws `rollout.n_tasks` tasks from the pool with a generator seeded by (train.seed, it), so whatever
the policy, iteration `it` plays the same tasks (the learning benchmark's runs are paired this way), and plays each
`rollout.group_size` times with environment seed train.seed + it. With `rollout.dynamic_sampling.enable`, try k
(`scpo.train.dynamic_sampling`) draws from its own stream and plays environment seed train.seed + it + 1000 k, so its
groups are new ones.
"""

from __future__ import annotations

import numpy as np

from scpo.config import Config
from scpo.envs.registry import EnvSettings
from scpo.rollout import GenerationEngine, collect_rollouts
from scpo.rollout.collector import RolloutTiming
from scpo.train.dynamic_sampling import dynamic_sample

__all__ = ["sample_tasks", "play_settings", "iteration_rollouts", "collect_iteration", "ATTEMPT_SEED_STRIDE"]

ATTEMPT_SEED_STRIDE = 1000  # dynamic sampling's try k plays environment seed train.seed + iteration + 1000 k


def sample_tasks(pool: list[str], n_tasks: int, seed: int, iteration: int, attempt: int = 0) -> list[str]:
    """n_tasks distinct tasks for this iteration (with replacement only if the pool is smaller than n_tasks); a later
    `attempt` of dynamic sampling draws from its own stream."""
    rng = np.random.default_rng([seed, iteration] if attempt == 0 else [seed, iteration, attempt])
    idx = rng.choice(len(pool), size=n_tasks, replace=len(pool) < n_tasks)
    return [pool[i] for i in idx]


def play_settings(cfg: Config, env: EnvSettings) -> dict:
    """How the policy plays an episode in training (the collector's and the branches' keyword arguments): the
    environment's play options and the rollout temperature and top-p."""
    return {**env.play_options(), "temperature": cfg.rollout.temperature, "top_p": cfg.rollout.top_p}


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
    """Iteration `it`'s rollouts (module docstring): `sample_tasks` from `pool`, then `rollout.group_size` (or
    `group_size`) rollouts per task at the rollout temperature -> (trajectories, timing)."""
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
