"""verl-agent's training batches as rollout files: two calls in verl-agent's trainer write every iteration's steps, with
the advantages it trained with, where the explorer and every analysis read them (docs/import.md).

In `verl/trainer/ppo/ray_trainer.py::RayPPOTrainer.fit` (https://github.com/langfengQ/verl-agent):

    batch = gen_batch_output
    mark_rows(batch)                        # before adjust_batch: each row's position in the collected batch
    ...
    batch = compute_advantage(batch, ...)
    write_rollouts(batch, self.global_steps, "runs/verl/alfworld", tokenizer=self.tokenizer, env="alfworld")

What verl-agent's batch holds at that point (`DataProto`): one row per active step, collected trajectory by
trajectory in step order (`TrajectoryCollector.gather_rollout_data`), then `adjust_batch` appends copies of random rows
so that the row count divides the data-parallel sizes, and `_balance_batch` reorders every row. Nothing in the rows
says which step of its trajectory a row is, hence `mark_rows` before `adjust_batch`: with its numbers the writer puts
the steps back in order and finds the copies (rows with the same number). The copies are dropped from the file and
counted per kept row in the column `verl_copies` (verl-agent trained on the row 1 + copies times, and its group
statistics counted it as often; `extra_column(path, "verl_copies")`), and `verl_row` holds each step's number from
`mark_rows`.

Per step the file holds (RolloutBatch columns): group_uid = uid, traj_uid = traj_uid, observation = anchor_obs,
next_observation = the trajectory's next anchor_obs ("" after its last step), reward = rewards, valid =
is_action_valid, episode_return = episode_rewards, won (default: episode_rewards > 0; `won=` names a non_tensor_batch
field or gives one flag per row), the decoded prompt (the prompt tokens under the attention mask, special tokens kept)
and response (the answer tokens under the mask, special tokens skipped, as verl-agent decodes them for the
environment), the action parsed from the response (`parse_action`, default `action_of`), and trained_advantage = the
row's `advantages` averaged over its response mask. Imports numpy and pyarrow (the file) only; tensors are read
through their `.detach().cpu().numpy()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scpo.batch import RolloutBatch
from scpo.errors import ExpectedError
from scpo.importers.rollout_file import iteration_file, write_rollout_file

__all__ = [
    "ROW_KEY",
    "VerlBatchError",
    "mark_rows",
    "action_of",
    "rollouts_from_fields",
    "rollouts_from_dataproto",
    "write_rollouts",
]

ROW_KEY = "scpo_row"  # non_tensor_batch field that mark_rows adds
_ACTION = re.compile(r"<action>(.*?)</action>", re.S | re.I)


class VerlBatchError(ExpectedError, ValueError):
    """A verl-agent batch the writer cannot read (a field missing, the rows not marked, ids that disagree)."""


def mark_rows(batch) -> None:
    """Number the rows of a freshly collected verl-agent batch (`non_tensor_batch["scpo_row"]` = 0..n-1, an object
    array as verl keeps its non-tensor fields), in place. Call it before `adjust_batch`: its copies carry their
    original's number, and the numbers survive any reorder."""
    nt = batch.non_tensor_batch
    if "traj_uid" not in nt:
        raise VerlBatchError("mark_rows: the batch has no non_tensor_batch['traj_uid']; call it on verl-agent's batch")
    nt[ROW_KEY] = np.arange(len(nt["traj_uid"]), dtype=np.int64).astype(object)


def action_of(response: str) -> str:
    """The text between the first <action> and </action> of an answer (verl-agent's prompt format), stripped; the
    whole answer, stripped, when it has no such tags."""
    found = _ACTION.search(response)
    return (found.group(1) if found else response).strip()


def _np(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _first_per_row(values: np.ndarray, code: np.ndarray, name: str) -> np.ndarray:
    """Check that `values` agree within each code (a trajectory); raise naming the field when they do not."""
    _, first = np.unique(code, return_index=True)  # codes are dense: first[c] is code c's first row
    ref = values[first[code]]
    bad = np.flatnonzero(ref != values)
    if len(bad):
        i = bad[0]
        raise VerlBatchError(f"{name} differs within one trajectory (kept row {i}: {values[i]!r} vs {ref[i]!r})")
    return values


def _codes(keys: np.ndarray) -> np.ndarray:
    """Dense codes 0..K-1 in order of first appearance."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


def rollouts_from_fields(
    fields: Mapping[str, Any],
    *,
    responses: list[str] | None = None,
    prompts: list[str] | None = None,
    advantages: np.ndarray | None = None,
    response_mask: np.ndarray | None = None,
    env: str = "",
    won: str | np.ndarray | None = None,
    task: str | None = None,
    parse_action: Callable[[str], str] | None = None,
) -> tuple[RolloutBatch, np.ndarray, np.ndarray]:
    """(batch, copies, kept): the rollout batch of verl-agent's per-row `fields` (its non_tensor_batch: uid, traj_uid,
    anchor_obs, rewards, episode_rewards, active_masks, is_action_valid, scpo_row), with `responses` / `prompts` the
    decoded texts and `advantages` / `response_mask` the (rows, response_len) arrays, all in the batch's row order.
    `copies[i]`: padding copies of the batch's kept row; `kept`: the batch rows each batch row came from."""
    missing = [k for k in ("uid", "traj_uid", "anchor_obs", "rewards", "episode_rewards", ROW_KEY) if k not in fields]
    if missing:
        hint = "; call mark_rows(batch) before adjust_batch (docs/import.md)" if ROW_KEY in missing else ""
        raise VerlBatchError(f"the verl-agent batch lacks non_tensor_batch fields {missing}{hint}")
    row = _np(fields[ROW_KEY]).astype(np.int64)
    n = len(row)
    active = _np(fields["active_masks"]).astype(bool) if "active_masks" in fields else np.ones(n, dtype=bool)
    order = np.lexsort((np.arange(n), row))  # collection order; copies after their original
    first = np.r_[True, row[order][1:] != row[order][:-1]] if n else np.zeros(0, dtype=bool)
    originals = order[first]
    copies_all = np.diff(np.r_[np.flatnonzero(first), n]) - 1
    keep = active[originals]
    kept, copies = originals[keep], copies_all[keep]
    if not len(kept):
        raise VerlBatchError("the verl-agent batch has no active step")

    traj = _codes(np.asarray([str(t) for t in _np(fields["traj_uid"])[kept]], dtype=object))
    steps_order = np.lexsort((np.arange(len(kept)), traj))  # trajectories by first appearance, steps in order
    kept, copies, traj = kept[steps_order], copies[steps_order], traj[steps_order]
    uid = np.asarray([str(u) for u in _np(fields["uid"])[kept]], dtype=object)
    _first_per_row(uid, traj, "uid")
    episode = _first_per_row(_np(fields["episode_rewards"]).astype(np.float64)[kept], traj, "episode_rewards")
    starts = np.r_[True, traj[1:] != traj[:-1]]
    step = np.arange(len(traj)) - np.maximum.accumulate(np.where(starts, np.arange(len(traj)), 0))
    last = np.r_[traj[1:] != traj[:-1], True]
    anchor = np.asarray([str(a) for a in _np(fields["anchor_obs"])[kept]], dtype=object)
    nxt = np.concatenate([anchor[1:], np.array([""], dtype=object)])
    nxt[last] = ""

    if won is None:
        won_row = episode > 0
    else:
        flags = _np(fields[won]) if isinstance(won, str) else _np(won)
        if len(flags) != n:
            raise VerlBatchError(f"won has {len(flags)} values, the batch {n} rows")
        won_row = _first_per_row(flags.astype(bool)[kept], traj, "won")
    valid = _np(fields["is_action_valid"]).astype(bool)[kept] if "is_action_valid" in fields else None
    texts = [responses[i] for i in kept] if responses is not None else [""] * len(kept)
    parse = parse_action or action_of
    cols: dict[str, Any] = {
        "group_id": _codes(uid),
        "traj_id": traj,
        "step": step,
        "reward": _np(fields["rewards"]).astype(np.float64)[kept],
        "episode_return": episode,
        "valid": np.ones(len(kept), dtype=bool) if valid is None else valid,
        "done": last,
        "won": won_row,
        "observation": anchor,
        "next_observation": nxt,
        "response": texts,
        "action": [parse(t) for t in texts],
        "group_uid": uid,
        "traj_uid": np.asarray([str(t) for t in _np(fields["traj_uid"])[kept]], dtype=object),
        "env_name": [env] * len(kept),
    }
    if task is not None:
        cols["task_id"] = [str(t) for t in _np(fields[task])[kept]]
    if prompts is not None:
        cols["prompt"] = [prompts[i] for i in kept]
    if advantages is not None:
        adv = _np(advantages).astype(np.float64)
        mask = np.ones_like(adv) if response_mask is None else _np(response_mask).astype(np.float64)
        tokens = mask.sum(-1)
        per_row = np.divide((adv * mask).sum(-1), tokens, out=np.full(len(tokens), np.nan), where=tokens > 0)
        cols["trained_advantage"] = per_row[kept]
    return RolloutBatch.from_columns(**cols), copies, kept


def _texts(tokenizer, ids: np.ndarray, mask: np.ndarray, *, skip_special: bool) -> list[str]:
    """Each row's tokens under its mask, decoded as `tokenizer.batch_decode` decodes them. A transformers fast
    tokenizer's Rust tokenizer (`backend_tokenizer`) decodes the whole batch in one call (about 10x less CPU than
    its row-by-row `batch_decode` on paper-shaped prompts), then the same clean-up."""
    rows = [r[m].tolist() for r, m in zip(ids, mask.astype(bool))]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "decode_batch"):
        return tokenizer.batch_decode(rows, skip_special_tokens=skip_special)
    texts = backend.decode_batch(rows, skip_special_tokens=skip_special)
    if getattr(tokenizer, "clean_up_tokenization_spaces", False):
        texts = [tokenizer.clean_up_tokenization(t) for t in texts]
    return texts


def _plain(value: Any) -> Any:
    """An OmegaConf / mapping config section as JSON-ready values."""
    if isinstance(value, Mapping) or (hasattr(value, "items") and hasattr(value, "keys")):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def rollouts_from_dataproto(
    batch,
    tokenizer=None,
    *,
    env: str = "",
    won: str | np.ndarray | None = None,
    task: str | None = None,
    parse_action: Callable[[str], str] | None = None,
    prompts: bool = True,
) -> tuple[RolloutBatch, dict[str, np.ndarray]]:
    """(rollout batch, extra columns) of a verl-agent `DataProto` after `compute_advantage` (see the module
    docstring): `verl_copies` (padding copies of each step) and `verl_row` (its number from `mark_rows`: its position
    in the collected batch), one per step of the rollout batch. Texts are decoded with `tokenizer` (its
    `batch_decode`); without one, prompts, responses and actions are empty."""
    tensors, nt = batch.batch, batch.non_tensor_batch
    fields = dict(nt)
    if ROW_KEY not in fields:
        raise VerlBatchError(
            f"the verl-agent batch lacks non_tensor_batch[{ROW_KEY!r}]: call mark_rows(batch) before adjust_batch "
            "(docs/import.md)"
        )
    row = _np(fields[ROW_KEY]).astype(np.int64)
    have = set(tensors.keys())  # a TensorDict answers `in` only through keys()
    advantages = _np(tensors["advantages"]) if "advantages" in have else None
    responses_ids = _np(tensors["responses"]) if "responses" in have else None
    response_mask = None
    if "response_mask" in have:
        response_mask = _np(tensors["response_mask"])
    elif responses_ids is not None and "attention_mask" in have:
        response_mask = _np(tensors["attention_mask"])[:, -responses_ids.shape[1] :]
    responses = prompt_texts = None
    if tokenizer is not None and responses_ids is not None and response_mask is not None:
        # decode each collected row once (copies carry their original's text)
        _, first = np.unique(row, return_index=True)
        responses = [""] * len(row)
        for i, text in zip(first, _texts(tokenizer, responses_ids[first], response_mask[first], skip_special=True)):
            responses[i] = text
        if prompts and "prompts" in have:
            prompt_ids = _np(tensors["prompts"])
            prompt_mask = _np(tensors["attention_mask"])[:, : prompt_ids.shape[1]]
            prompt_texts = [""] * len(row)
            decoded = _texts(tokenizer, prompt_ids[first], prompt_mask[first], skip_special=False)
            for i, text in zip(first, decoded):
                prompt_texts[i] = text
    out, copies, kept = rollouts_from_fields(
        fields,
        responses=responses,
        prompts=prompt_texts,
        advantages=advantages,
        response_mask=response_mask,
        env=env,
        won=won,
        task=task,
        parse_action=parse_action,
    )
    return out, {"verl_copies": copies, "verl_row": row[kept].astype(np.int64)}


def write_rollouts(
    batch,
    iteration: int,
    out_dir: str | Path,
    tokenizer=None,
    *,
    env: str = "",
    won: str | np.ndarray | None = None,
    task: str | None = None,
    parse_action: Callable[[str], str] | None = None,
    prompts: bool = True,
    config=None,
) -> Path:
    """Write verl-agent's batch of `iteration` (call it right after `compute_advantage`) to
    `<out_dir>/rollouts/iter_XXXX.parquet`, a rollout file the explorer and every analysis read; returns its path.

    tokenizer: the trainer's (`self.tokenizer`), to decode prompts and responses (prompts=False leaves the prompts
    out: a tenth of the file's size); env: the environment's name (`alfworld`, `webshop`: its credit settings);
    won: a non_tensor_batch field with one success flag per row, or the flags (default: episode_rewards > 0); task: a
    non_tensor_batch field naming each row's task; parse_action: answer text -> action (default `action_of`);
    config: the trainer's config, whose `algorithm` section is recorded in the file (`import_record`)."""
    rollouts, extra = rollouts_from_dataproto(
        batch, tokenizer, env=env, won=won, task=task, parse_action=parse_action, prompts=prompts
    )
    record: dict[str, Any] = {
        "source": "verl-agent",
        "iteration": int(iteration),
        "rows_trained": int(len(batch.non_tensor_batch[ROW_KEY])),
        "padding_copies": int(extra["verl_copies"].sum()),
    }
    algorithm = getattr(config, "algorithm", None) if config is not None else None
    if algorithm is not None:
        record["algorithm"] = _plain(algorithm)
    return write_rollout_file(rollouts, iteration_file(out_dir, int(iteration)), extra=extra, record=record)
