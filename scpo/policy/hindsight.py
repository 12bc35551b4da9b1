"""HCAPO's hindsight re-scoring: the policy's scores a credit estimator declares it needs (`MethodSpec.policy_scores`),
computed here because they call the model; the credit library itself stays pure (docs/algorithms.md, "HCAPO").

For step t of trajectory i, the step's prompt is extended by the trajectory's final observation o_{T_i} and the step's
own answer y_t is re-scored:

    log pi_H(a_t) = (1/|y_t|) sum_k log softmax(z_k / T_H)[y_{t,k}],   T_H = 5     (per-token mean, temperature 5)

One value per row of the batch, passed as `hindsight_logprob` to `compute_advantages("hcapo", ...)`, which forms
rho_t = clip(pi_H(a_t) / mean_k pi_H(a_k), 0.8, 1.2). Two ways to compute it, equal up to float rounding:
- `hindsight_logprob(policy, batch)`: the batch's own prompts and answer ids, scored in row order (the trainer);
- `hindsight_scores(policy, batches)`: several batches (the fidelity testbed's, whose steps were not played by a
  policy), each distinct (prompt, final observation, action) scored once, with the answer `<action>a_t</action>` + EOS
  as the admissible-choice sampler writes it, in buckets of equal token lengths, optionally in worker processes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.policy.interface import PolicyLike
from scpo.policy.scoring import candidate_scores

__all__ = ["HINDSIGHT_TEMPLATE", "hindsight_prompt", "hindsight_logprob", "hindsight_scores", "score_answers"]

HINDSIGHT_TEMPLATE = "{prompt}\n[Hindsight] This episode ended with the observation: {final_observation}"


def hindsight_prompt(prompt: str, final_observation: str) -> str:
    return HINDSIGHT_TEMPLATE.format(prompt=prompt, final_observation=final_observation)


def score_answers(
    policy: PolicyLike,
    rows: Sequence[tuple[str, Sequence[int]]],
    *,
    temperature: float,
    max_prompt_tokens: int,
    batch_size: int,
) -> np.ndarray:
    """Per (prompt text, answer ids) row: the answer's mean token log-prob at `temperature` (0 for an empty answer),
    rows scored in order, `batch_size` at a time, without gradients: each row's answer is its prompt's one candidate
    of the admissible-choice scorer (`scpo.policy.scoring.candidate_scores`, per-token temperature), whose prompt pass
    computes the last layer only where a token is predicted."""
    out = np.zeros(len(rows), dtype=np.float64)
    keep = [i for i, (_, r) in enumerate(rows) if len(r)]
    if not keep:
        return out
    prompt_ids = policy.encode_prompts([rows[i][0] for i in keep], max_prompt_tokens)
    pad = policy.tokenizer.pad_token_id
    model = policy.model
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(keep), batch_size):
            sel = list(range(start, min(start + batch_size, len(keep))))
            answers = [[int(t) for t in rows[keep[j]][1]] for j in sel]
            sums = candidate_scores(
                model, [prompt_ids[j] for j in sel], [[a] for a in answers], pad, token_temperature=temperature
            )[:, 0]
            lengths = torch.tensor([len(a) for a in answers], dtype=torch.float64)
            out[[keep[j] for j in sel]] = (sums.double().cpu() / lengths).numpy()
    model.train(was_training)
    return out


def _require_prompts(batch: RolloutBatch) -> None:
    if not batch.has_prompts:
        raise ValueError(
            "HCAPO's hindsight scores need the prompt of every step; these rollouts carry none (saved before the "
            "batch kept prompts): collect them again"
        )


def hindsight_logprob(
    policy: PolicyLike,
    batch: RolloutBatch,
    *,
    temperature: float = 5.0,
    max_prompt_tokens: int = 768,
    batch_size: int = 64,
) -> np.ndarray:
    """`log pi_H(a_t)` for every row of `batch` (the module docstring), from its prompts and answer token ids."""
    _require_prompts(batch)
    if not batch.has_tokens:
        raise ValueError("HCAPO's hindsight scores of a policy's rollouts need their answer token ids (response_ids)")
    finals = batch.final_observation()
    rows = [(hindsight_prompt(p, f), r) for p, f, r in zip(batch.prompt, finals, batch.response_ids)]
    return score_answers(
        policy, rows, temperature=temperature, max_prompt_tokens=max_prompt_tokens, batch_size=batch_size
    )


_WORKER: dict = {}  # the policy and scoring options of this process (the parent, or a worker set up by _init_worker)


def _init_worker(options: dict) -> None:
    torch.set_num_threads(options.pop("threads"))
    _WORKER.update(options)


def _score_bucket(members_rows: list[tuple[str, str, str, list[int]]]) -> np.ndarray:
    """Hindsight scores of one bucket of distinct (prompt, final observation, action, answer ids) rows."""
    w = _WORKER
    rows = [(hindsight_prompt(p, f), list(ans) + [w["eos"]]) for p, f, _, ans in members_rows]
    return score_answers(
        w["policy"],
        rows,
        temperature=w["temperature"],
        max_prompt_tokens=w["max_prompt_tokens"],
        batch_size=w["batch_size"],
    )


def hindsight_scores(
    policy: PolicyLike,
    batches: Sequence[RolloutBatch],
    *,
    temperature: float = 5.0,
    max_prompt_tokens: int = 1024,
    batch_size: int = 64,
    workers: int = 1,
    progress: bool = True,
) -> list[np.ndarray]:
    """`log pi_H(a_t)` for each of several batches (e.g. one per eps), every distinct row scored once over all of them.

    Rows with the same (prompt, final observation, action) -- siblings of a group that share a prefix and an ending,
    or the same episode at two eps levels whose random draws did not differ -- are scored once. The distinct ones are
    scored in buckets of equal (prompt, answer) token lengths, so that no batch pads. `workers` > 1 scores
    the buckets in that many processes with one torch thread each (`scpo.workers`: forked from a server that
    never ran a torch operation; never from this process, whose thread pools a fork would break); the policy is
    pickled to each once."""
    from scpo.envs.prompting import action_answer

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    unique: dict[tuple[str, str, str], int] = {}
    indices = []
    for batch in batches:
        _require_prompts(batch)
        keys = zip(batch.prompt, batch.final_observation(), batch.action)
        indices.append(np.array([unique.setdefault(tuple(map(str, k)), len(unique)) for k in keys], dtype=np.int64))
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
            from scpo.workers import worker_executor

            with worker_executor(
                workers, ("scpo.policy.hindsight",), initializer=_init_worker, initargs=({**options, "threads": 1},)
            ) as pool:
                for m, vals in zip(members, pool.map(_score_bucket, jobs)):
                    scores[m] = vals
                    bar.update(len(m))
    return [scores[ix] for ix in indices]
