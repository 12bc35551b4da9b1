"""HCAPO's hindsight log-probs for rollouts that kept no prompts (saved batches, noisy-optimal groups).

A RolloutBatch keeps observations and actions but not the prompts the policy saw nor the admissible lists in them. For
an ALFWorld batch both are rebuilt by replaying each trajectory's commands in the fast engine (deterministic): the
prompt of step t is `build_prompt(goal, o_t, admissible_t, history, t)` and the answer is `<action>a_t</action>` + EOS,
as the tiny policy's admissible-choice sampler writes it (scpo.envs.prompting.action_answer). Then
`scpo.train.hindsight.hindsight_logprob` scores each answer under the prompt extended by the trajectory's final
observation, at HCAPO's temperature."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from scpo.envs.alfworld import build_prompt, make_env
from scpo.rollout_types import RolloutBatch, Step, Trajectory

__all__ = ["replay_prompts", "hindsight_for_batch", "hindsight_for_batches"]


def _trajectory_rows(batch: RolloutBatch) -> list[np.ndarray]:
    order = np.arange(batch.n_rows)
    bounds = np.flatnonzero(np.diff(batch.traj_id)) + 1
    return np.split(order, bounds)


def replay_prompts(
    batch: RolloutBatch, *, data_root: str | Path = "data", history_length: int = 2, progress: bool = True
) -> list[Trajectory]:
    """Trajectories (in batch row order) whose steps carry the rebuilt `prompt`; ValueError if a replay departs from
    the saved observations."""
    out = []
    for rows in tqdm(
        _trajectory_rows(batch), desc="replay prompts", unit="trajectory", disable=not progress, leave=False
    ):
        task = str(batch.task_id[rows[0]])
        env = make_env(task, data_root, max_steps=10_000, engine="fast")
        obs, info = env.reset()
        history: list[tuple[str, str]] = []
        steps = []
        for t, r in enumerate(rows):
            if obs != batch.observation[r]:
                raise ValueError(
                    f"replay of {task} (trajectory {batch.traj_uid[r]}, step {t}) departs from the saved observation"
                )
            action = str(batch.action[r])
            prompt = build_prompt(
                info["goal"], obs, list(info["admissible_commands"]), history, t, history_length=history_length
            )
            next_obs, _, _, info = env.step(action)
            steps.append(
                Step(
                    observation=obs,
                    action=action,
                    reward=float(batch.reward[r]),
                    next_observation=next_obs,
                    prompt=prompt,
                )
            )
            history.append((obs, action))
            obs = next_obs
        out.append(Trajectory(task_id=task, seed=int(batch.seed[rows[0]]), index=0, steps=steps))
    return out


def hindsight_for_batch(
    policy,
    batch: RolloutBatch,
    *,
    data_root: str | Path = "data",
    history_length: int = 2,
    temperature: float = 5.0,
    max_prompt_tokens: int = 1024,
    batch_size: int = 64,
    workers: int = 1,
    progress: bool = True,
) -> np.ndarray:
    """HCAPO's `hindsight_logprob` (n_rows,) for an ALFWorld batch, under `policy` (e.g. the warm start): the one-batch
    case of `hindsight_for_batches`."""
    return hindsight_for_batches(
        policy,
        [batch],
        data_root=data_root,
        history_length=history_length,
        temperature=temperature,
        max_prompt_tokens=max_prompt_tokens,
        batch_size=batch_size,
        workers=workers,
        progress=progress,
    )[0]


_WORKER: dict = {}  # the policy and scoring options of this process (the parent, or a worker set up by _init_worker)


def _init_worker(options: dict) -> None:
    import torch

    torch.set_num_threads(options.pop("threads"))
    _WORKER.update(options)


def _score_bucket(members_rows: list[tuple[str, str, str, list[int]]]) -> np.ndarray:
    """Hindsight scores of one bucket of distinct (prompt, final observation, action, answer ids) rows."""
    from scpo.train.hindsight import hindsight_logprob

    w = _WORKER
    singles = [
        Trajectory(
            task_id="",
            seed=0,
            index=0,
            steps=[
                Step(
                    observation="",
                    action=a,
                    reward=0.0,
                    next_observation=f,
                    prompt=p,
                    extras={"response_ids": list(ans) + [w["eos"]]},
                )
            ],
        )
        for p, f, a, ans in members_rows
    ]
    return hindsight_logprob(
        w["policy"],
        singles,
        temperature=w["temperature"],
        max_prompt_tokens=w["max_prompt_tokens"],
        batch_size=w["batch_size"],
    )


def hindsight_for_batches(
    policy,
    batches: list[RolloutBatch],
    *,
    data_root: str | Path = "data",
    history_length: int = 2,
    temperature: float = 5.0,
    max_prompt_tokens: int = 1024,
    batch_size: int = 64,
    workers: int = 1,
    progress: bool = True,
) -> list[np.ndarray]:
    """HCAPO's `hindsight_logprob` for each of several ALFWorld batches (e.g. one per eps), scoring every distinct row
    once over all of them.

    Rows with the same (prompt, final observation, answer) -- siblings of a group that share a prefix and an ending, or
    the same episode at two eps levels whose random draws did not differ -- are scored once. The distinct ones go to
    `scpo.train.hindsight.hindsight_logprob` in buckets of equal (prompt, answer) token lengths: a batch without padding
    lets the model use SDPA's causal kernel instead of an explicit mask (a quarter less time on the CPU with one
    thread). `workers` > 1 scores the buckets in that many spawned processes with one torch thread each (spawned, not
    forked: a fork after torch's thread pool started can hang); the policy is pickled to each once. Same values as
    scoring every row in order, up to float rounding."""
    from scpo.envs.prompting import action_answer
    from scpo.train.hindsight import hindsight_prompt

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    unique: dict[tuple[str, str, str], int] = {}
    indices = []
    for batch in batches:
        trajs = replay_prompts(batch, data_root=data_root, history_length=history_length, progress=progress)
        keys = [(s.prompt, tr.steps[-1].next_observation, s.action) for tr in trajs for s in tr.steps]
        indices.append(np.array([unique.setdefault(k, len(unique)) for k in keys], dtype=np.int64))
    distinct = list(unique)
    tok = policy.tokenizer
    answers = tok([action_answer(a) for _, _, a in distinct], add_special_tokens=False)["input_ids"]
    prompt_len = [
        len(x) for x in policy.encode_prompts([hindsight_prompt(p, f) for p, f, _ in distinct], max_prompt_tokens)
    ]
    buckets: dict[tuple[int, int], list[int]] = {}
    for i, (n, ans) in enumerate(zip(prompt_len, answers)):
        buckets.setdefault((n, len(ans)), []).append(i)
    # longest buckets first, so that the workers finish together
    members = sorted(buckets.values(), key=lambda m: -len(m) * prompt_len[m[0]])
    jobs = [[(*distinct[i], answers[i]) for i in m] for m in members]
    options = {
        "policy": policy,
        "eos": tok.eos_token_id,
        "temperature": temperature,
        "max_prompt_tokens": max_prompt_tokens,
        "batch_size": batch_size,
    }
    scores = np.empty(len(distinct))
    with tqdm(total=len(distinct), desc="hindsight scores", unit="row", disable=not progress, leave=False) as bar:
        if workers == 1 or len(jobs) < 2:
            _WORKER.update(options)
            try:
                for m, job in zip(members, jobs):
                    scores[m] = _score_bucket(job)
                    bar.update(len(m))
            finally:
                _WORKER.clear()
        else:
            import multiprocessing as mp

            with mp.get_context("spawn").Pool(
                workers, initializer=_init_worker, initargs=({**options, "threads": 1},)
            ) as pool:
                for m, vals in zip(members, pool.imap(_score_bucket, jobs)):
                    scores[m] = vals
                    bar.update(len(m))
    return [scores[ix] for ix in indices]
