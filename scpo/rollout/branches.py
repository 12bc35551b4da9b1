"""The policy's own state values by Monte-Carlo branches, the estimate behind the `mc_advantage` credit method
(VinePPO's value estimate, Kazemnejad et al. 2024, arXiv:2410.01679, here for multi-turn episodes): from every state
that a batch's trajectories acted on, `rollouts` continuations of the current policy are played to the end of the
episode's step budget, and

    V^pi(s_t) ~ (1/K) sum_k sum_{t' >= t} r^(k)_t'        (K continuations from s_t, with the budget T_max - t left)

A state is named by its trajectory's task, seed and the commands played before step t. The environment must be
deterministic given them (ALFWorld's engines are): each branch replays those commands from reset and raises where
the replayed observation differs from the saved one. Rows whose trajectories reached a state by the same commands
(siblings of a group at step 0 always; later where their openings agree) share one estimate and its K branches.

The branches are played like the collector's episodes (`scpo.rollout.collector`): every live branch of the batch in
one generation call per turn, at the rollout temperature, each prompt built at its own turn with its replayed history.
Their rewards are the environment's (the invalid-action penalty is the estimator's, not part of V).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.envs.base import EnvPackage
from scpo.rollout.collector import RolloutTiming, generate_turn, prompt_style, style_kwargs
from scpo.rollout.generation import GenerationEngine

__all__ = ["policy_values", "state_keys"]


@dataclass
class _Branch:
    state: int  # index of the state (row key) it estimates
    env: Any
    goal: str
    obs: str
    info: dict
    turn: int
    history: list[tuple[str, str]] = field(default_factory=list)
    ret: float = 0.0
    done: bool = False


def state_keys(batch: RolloutBatch) -> tuple[np.ndarray, list[tuple]]:
    """(per row the index of its state, the distinct states): a state is (task id, seed, the commands before it)."""
    index: dict[tuple, int] = {}
    code = np.empty(batch.n_rows, dtype=np.int64)
    for rows in batch.trajectory_rows():
        rows = rows[np.argsort(batch.step[rows], kind="stable")]
        task, seed = str(batch.task_id[rows[0]]), int(batch.seed[rows[0]])
        for j, r in enumerate(rows):
            key = (task, seed, tuple(str(a) for a in batch.action[rows[:j]]))
            code[r] = index.setdefault(key, len(index))
    return code, list(index)


def policy_values(
    batch: RolloutBatch,
    env_pkg: EnvPackage,
    engine: GenerationEngine,
    *,
    rollouts: int,
    data_root: str = "data",
    max_steps: int | None = None,
    history_length: int = 2,
    temperature: float = 1.0,
    top_p: float = 1.0,
    env_options: dict | None = None,
    progress: bool = True,
    desc: str = "branches",
) -> tuple[np.ndarray, RolloutTiming]:
    """-> (V [n_rows] float64, timing): per row, the mean return of `rollouts` continuations of `engine`'s policy
    from the state the row acted on (see the module docstring); the timing's n_generations counts the branch steps,
    extra["branches"] the branches. ValueError if a replay does not reach the saved state."""
    if rollouts < 1:
        raise ValueError(f"rollouts must be >= 1, got {rollouts}")
    timing = RolloutTiming()
    code, states = state_keys(batch)
    _, first_row = np.unique(code, return_index=True)  # per state, the first row acting on it
    make = partial(env_pkg.make_env, data_root=data_root, max_steps=max_steps, **(env_options or {}))

    t0 = time.perf_counter()
    branches = [
        _replayed(make, states[s], batch, int(first_row[s]), s) for s in range(len(states)) for _ in range(rollouts)
    ]
    timing.env_s += time.perf_counter() - t0
    limit = max_steps or max(int(getattr(b.env, "max_steps", 50)) for b in branches)
    if any(b.turn >= limit for b in branches):
        raise ValueError(f"a saved step lies at or beyond the step limit {limit}; pass the rollouts' max_steps")
    timing.extra["branches"] = len(branches)

    # one bar unit per (branch, turn) slot left in its budget: a finished branch adds its unplayed turns
    bar = tqdm(total=sum(limit - b.turn for b in branches), desc=desc, unit="step", disable=not progress, leave=False)
    styled = style_kwargs(prompt_style(env_pkg, engine))
    while live := [b for b in branches if not b.done]:
        _, gens = generate_turn(
            env_pkg,
            engine,
            live,
            [b.turn for b in live],
            history_length=history_length,
            temperature=temperature,
            top_p=top_p,
            timing=timing,
        )
        t0 = time.perf_counter()
        for b, gen in zip(live, gens):
            action, _ = env_pkg.project_action(gen.text, list(b.info.get("admissible_commands", [])), **styled)
            obs, reward, done, info = b.env.step(action)
            b.history.append((b.obs, action))
            b.obs, b.info, b.ret, b.turn = obs, info, b.ret + float(reward), b.turn + 1
            b.done = bool(done) or b.turn >= limit
            bar.update(1 + (limit - b.turn if b.done else 0))
        timing.env_s += time.perf_counter() - t0
        timing.n_turns += 1
    bar.close()

    totals = np.zeros(len(states))
    np.add.at(totals, np.array([b.state for b in branches], dtype=np.int64), [b.ret for b in branches])
    return (totals / rollouts)[code], timing


def _replayed(make, state: tuple, batch: RolloutBatch, row: int, s: int) -> _Branch:
    """A branch at `state` (task, seed, commands): the task's environment reset and the commands replayed, with the
    collector's history; checked against the saved observation of `row`, the first row acting on that state."""
    task, _, commands = state
    env = make(task)
    obs, info = env.reset()
    goal, history = str(info.get("goal", "")), []
    for j, action in enumerate(commands):
        history.append((obs, action))
        obs, _, done, info = env.step(action)
        if done:
            raise ValueError(f"replay of {task}: the episode ended at command {j + 1} of {len(commands)}")
    if obs != batch.observation[row]:
        raise ValueError(
            f"replay of {task} after {len(commands)} commands gave {obs[:60]!r}, the saved rollout has "
            f"{str(batch.observation[row])[:60]!r}: the environment is not deterministic given the commands"
        )
    return _Branch(state=s, env=env, goal=goal, obs=obs, info=info, turn=len(commands), history=history)
