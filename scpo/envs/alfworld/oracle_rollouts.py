"""Rollouts whose every step carries its oracle progress q_t = V*(s_t) - V*(s_{t+1}) (ALFWorld, fast engine).

Two sources:
- `noisy_optimal_rollouts`: a policy of controlled skill. At each step it plays the planner's optimal command with
  probability 1 - eps, else a uniformly random admissible command ("help" excluded, as in the policy's prompt; also
  in a dead end, where no command leads to the goal: e.g. holding an object no receptacle accepts). Groups of
  `group_size` episodes per (task, seed); episode i of a group draws from a generator seeded by (seed, task, i) and
  makes the same draws whatever eps is (common random numbers: eps = 0.2 and 0.4 differ only where u_t falls between).
- `label_progress`: the saved rollouts of a trained policy (RolloutBatch), replayed command by command in the fast
  engine (deterministic) to read the state before and after each step; a replay whose observation differs from the
  saved one is an error.

V* comes from `scpo.envs.alfworld.planner.Planner` (one per game, kept in a `PlannerPool` so its cache serves every
seed, eps and episode of the game). A step into a dead end (no command leads to the goal any more) has q = -inf, the
steps after it q = 0. Full knowledge is a proxy: a step that explores (opens a cabinet to look) has q <= 0.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch, Step, Trajectory, stable_uid
from scpo.envs.alfworld import build_prompt, game_file, make_env, task_type
from scpo.envs.alfworld.planner import Planner, PlannerStats, oracle_progress
from scpo.envs.base import STATE_DESCRIPTION

__all__ = [
    "PlannerPool",
    "shared_pool",
    "noisy_optimal_episode",
    "noisy_optimal_rollouts",
    "label_progress",
    "ENV_NAME",
]

ENV_NAME = "alfworld"


@dataclass
class PlannerPool:
    """One Planner per game file (created on first use), so caches persist across episodes, seeds and eps."""

    data_root: str | Path = "data"
    planners: dict[str, Planner] = field(default_factory=dict)

    def get(self, task_id: str) -> Planner:
        path = str(game_file(task_id, self.data_root))
        if path not in self.planners:
            self.planners[path] = Planner(path)
        return self.planners[path]

    def stats(self) -> PlannerStats:
        """All planners' counters summed (seconds: every search)."""
        out = PlannerStats()
        for p in self.planners.values():
            out.queries += p.stats.queries
            out.hits += p.stats.hits
            out.searches += p.stats.searches
            out.expanded += p.stats.expanded
            out.seconds += p.stats.seconds
            out.call_seconds += p.stats.call_seconds
        return out


def _rng(seed: int, task_id: str, index: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(stable_uid("noisy-optimal", task_id, length=8), 16), int(index)])


def noisy_optimal_episode(
    task_id: str,
    seed: int,
    index: int,
    eps: float,
    planner: Planner,
    *,
    max_steps: int = 50,
    data_root: str | Path = "data",
    history_length: int = 2,
) -> Trajectory:
    """One episode of the eps-noisy optimal policy; each step has `oracle_progress`, `extras["v_star"]` = V*(s_t) and
    the prompt a policy would have seen there (`build_prompt`, showing `history_length` past steps)."""
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"eps must be in [0, 1], got {eps}")
    env = make_env(task_id, data_root, max_steps=max_steps, engine="fast")
    engine = env.engine
    rng = _rng(seed, task_id, index)
    obs, info = env.reset()
    v = planner.value(engine)
    steps: list[Step] = []
    history: list[tuple[str, str]] = []
    done = False
    while not done:
        u, pick = rng.random(), rng.random()  # both drawn every step: the same stream for every eps
        admissible = [a for a in info["admissible_commands"] if a != "help"]
        action = planner.best_action(engine) if u >= eps else None
        if action is None:  # a random step, or no optimal one (a dead end: the goal cannot be reached any more)
            action = admissible[int(pick * len(admissible))]
        prompt = build_prompt(
            info["goal"], obs, list(info["admissible_commands"]), history, len(steps), history_length=history_length
        )
        next_obs, reward, done, next_info = env.step(action)
        v_next = planner.value(engine)
        history.append((obs, action))
        steps.append(
            Step(
                observation=obs,
                action=action,
                reward=float(reward),
                next_observation=next_obs,
                valid=True,
                done=done,
                prompt=prompt,
                oracle_progress=oracle_progress(v, v_next),
                extras={"v_star": v},
                state_description=info[STATE_DESCRIPTION],
                next_state_description=next_info[STATE_DESCRIPTION],
            )
        )
        obs, info, v = next_obs, next_info, v_next
    return Trajectory(
        task_id=task_id,
        seed=int(seed),
        index=int(index),
        steps=steps,
        won=bool(info["won"]),
        task_score=float(info["task_score"]),
        task_type=task_type(task_id),
        env_name=ENV_NAME,
        meta={"source": "noisy_optimal", "eps": float(eps)},
    )


def noisy_optimal_rollouts(
    task_ids: Sequence[str],
    seeds: Sequence[int],
    eps: float,
    *,
    group_size: int = 8,
    max_steps: int = 50,
    data_root: str | Path = "data",
    pool: PlannerPool | None = None,
    progress: bool = True,
    history_length: int = 2,
) -> RolloutBatch:
    """Groups of `group_size` noisy-optimal episodes per (task, seed), as one RolloutBatch with oracle_progress and
    prompts."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    pool = pool if pool is not None else PlannerPool(data_root)
    trajs = []
    total = len(task_ids) * len(seeds)
    with tqdm(total=total, desc=f"noisy-optimal eps={eps}", unit="group", disable=not progress, leave=False) as bar:
        for seed in seeds:
            for task in task_ids:
                planner = pool.get(task)
                trajs += [
                    noisy_optimal_episode(
                        task,
                        seed,
                        i,
                        eps,
                        planner,
                        max_steps=max_steps,
                        data_root=data_root,
                        history_length=history_length,
                    )
                    for i in range(group_size)
                ]
                bar.update(1)
    return RolloutBatch.from_trajectories(trajs)


_POOLS: dict[str, PlannerPool] = {}  # one planner pool per data root and process: its caches serve every call


def shared_pool(data_root: str | Path) -> PlannerPool:
    """This process's planner pool for `data_root` (created on first use)."""
    return _POOLS.setdefault(str(data_root), PlannerPool(data_root))


def label_progress(
    batch: RolloutBatch, *, data_root: str | Path = "data", pool: PlannerPool | None = None, progress: bool = False
) -> RolloutBatch:
    """`batch` (ALFWorld rollouts, e.g. a trained policy's saved iteration) with its oracle_progress column filled by
    replaying each trajectory's commands from reset in the fast engine (`pool`: default `shared_pool(data_root)`).
    ValueError if a replayed observation differs from the saved one (the rollouts were not played on these game
    files)."""
    pool = pool if pool is not None else shared_pool(data_root)
    q = np.zeros(batch.n_rows)
    for rows in tqdm(batch.trajectory_rows(), desc="label q", unit="trajectory", disable=not progress, leave=False):
        task = str(batch.task_id[rows[0]])
        planner = pool.get(task)
        env = make_env(task, data_root, max_steps=10_000, engine="fast")
        obs, _ = env.reset()
        if obs != batch.observation[rows[0]]:
            raise ValueError(
                f"replay of {task} (trajectory {batch.traj_uid[rows[0]]}) starts with another observation "
                "than the saved one"
            )
        v = planner.value(env.engine)
        for r in rows:
            obs, _, _, _ = env.step(str(batch.action[r]))
            if obs != batch.next_observation[r]:
                raise ValueError(
                    f"replay of {task} (trajectory {batch.traj_uid[r]}, step {batch.step[r]}) gave "
                    f"{obs[:60]!r}, the saved rollout has {str(batch.next_observation[r])[:60]!r}"
                )
            v_next = planner.value(env.engine)
            q[r] = oracle_progress(v, v_next)
            v = v_next
    return batch.with_column("oracle_progress", q)


def timed(fn, *args, **kwargs):
    """(result, wall seconds, process CPU seconds) of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - w0, time.process_time() - c0
