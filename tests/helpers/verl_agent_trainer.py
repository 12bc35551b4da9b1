"""verl-agent's training step up to the advantage, transcribed for the tests of `scpo.importers.verl_agent`: the batch
its trainer holds right after `compute_advantage`, with its fields, dtypes, padding and order.

Transcribed from verl-agent (https://github.com/langfengQ/verl-agent), GiGPO on a text environment:
- `agent_system/multi_turn_rollout/rollout_loop.py::TrajectoryCollector.vanilla_multi_turn_loop`: one uid per
  `env.rollout.n` environments, one traj_uid per environment, one row per environment and step (prompt tokens
  left-padded, answer tokens right-padded, `anchor_obs`, `rewards` and `active_masks` as object arrays,
  `is_action_valid` as bool), episode rewards and lengths summed over the active steps; `gather_rollout_data`: the
  active rows, environment by environment, each with its trajectory's episode_rewards / episode_lengths; verl's
  `collate_fn`: tensors stacked, everything else an object array;
- `verl/trainer/ppo/ray_trainer.py::RayPPOTrainer.fit`: `core_gigpo.compute_step_discounted_returns` (float32), then
  `adjust_batch(config, batch)` in "copy" mode (`np.random.choice(bs, to_add, replace=False)` rows appended, so
  that the row count divides lcm(ref, rollout and actor micro-batch sizes x world size)), `compute_response_mask`,
  `_balance_batch` (a reorder of every row: here a seeded permutation; verl's partitioner picks another
  permutation, and the writer must not depend on which), the reward manager (`EpisodeRewardManager`: the episode
  reward on the last answer token), `apply_invalid_action_penalty` (coef x invalid off that token and off
  step_rewards), token_level_rewards = token_level_scores, then `compute_advantage` with GiGPO;
- `gigpo/core_gigpo.py::compute_gigpo_outcome_advantage`: episode and step normalisations as transcribed in
  `helpers.reference_loops` (`episode_norm`, `step_norm`, float64 loops), the sum broadcast over the answer and
  multiplied by the response mask, stored as verl's float32 `advantages`.

`mark_rows` is called where docs/import.md says (right after `batch = gen_batch_output`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import torch

from scpo.importers.verl_agent import mark_rows

from helpers.reference_loops import episode_norm, step_norm

ROOMS = ["kitchen", "hall", "desk 1", "drawer 2", "fridge 1", "sink basin 1"]
SPECIAL = ["<pad>", "<eos>", "<|im_start|>", "<|im_end|>"]


class WordTokenizer:
    """A word-level tokenizer with verl's special tokens (pad 0, eos 1, the chat markers): `encode`, `batch_decode`."""

    def __init__(self) -> None:
        self.vocab = {w: i for i, w in enumerate(SPECIAL)}
        self.words = list(SPECIAL)
        self.pad_token_id, self.eos_token_id = 0, 1

    def encode(self, text: str) -> list[int]:
        out = []
        for w in text.split():
            if w not in self.vocab:
                self.vocab[w] = len(self.words)
                self.words.append(w)
            out.append(self.vocab[w])
        return out

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        keep = [int(i) for i in ids if not (skip_special_tokens and int(i) < len(SPECIAL))]
        return " ".join(self.words[i] for i in keep)

    def batch_decode(self, rows, skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(r, skip_special_tokens) for r in rows]


@dataclass
class Script:
    """One environment's episode: per step the anchor observation, the answer, the reward, done and validity."""

    obs: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)


def scripted_episodes(n_groups: int, group_n: int, max_steps: int, seed: int) -> list[Script]:
    """Episodes of `n_groups` x `group_n` environments: rooms shared within a group (anchor states repeat), invalid
    answers (no <action> tags), wins with reward 10 ending the episode, the rest cut at max_steps."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(n_groups):
        start = ROOMS[g % len(ROOMS)]
        for _ in range(group_n):
            s, room = Script(), start
            for t in range(max_steps):
                target = ROOMS[int(rng.integers(len(ROOMS)))]
                valid = bool(rng.random() > 0.15)
                s.obs.append(f"task {g} : you are in the {room} .")
                s.answers.append(
                    f"<think> look for the mug </think> <action> go to {target} </action>" if valid else "go to it"
                )
                won = valid and target == "sink basin 1" and t > 0
                s.rewards.append(10.0 if won else 0.0)
                s.dones.append(won)
                s.valid.append(valid)
                room = target if valid else room
                if won:
                    break
            out.append(s)
    return out


def collate(rows: list[dict]) -> SimpleNamespace:
    """verl's collate_fn + DataProto.from_single_dict: tensors stacked, other values in object arrays."""
    tensors = {k: torch.stack([r[k] for r in rows]) for k, v in rows[0].items() if isinstance(v, torch.Tensor)}
    non_tensor = {}
    for k, v in rows[0].items():
        if not isinstance(v, torch.Tensor):
            arr = np.empty(len(rows), dtype=object)
            arr[:] = [r[k] for r in rows]
            non_tensor[k] = arr
    return SimpleNamespace(batch=tensors, non_tensor_batch=non_tensor, meta_info={})


def collect(episodes: list[Script], group_n: int, tok: WordTokenizer, prompt_len: int, response_len: int, seed: int):
    """`vanilla_multi_turn_loop` + `gather_rollout_data` on scripted episodes (see the module docstring)."""
    ids = np.random.default_rng(seed)
    n, max_steps = len(episodes), max(len(e.obs) for e in episodes)
    uid_batch = np.array([str(uuid.UUID(int=int(ids.integers(2**63)))) for _ in range(0, n, group_n)], dtype=object)
    uid_batch = np.repeat(uid_batch, group_n)
    traj_uid = np.array([str(uuid.UUID(int=int(ids.integers(2**63)))) for _ in range(n)], dtype=object)
    is_done = np.zeros(n, dtype=bool)
    episode_rewards = np.zeros(n, dtype=np.float32)
    episode_lengths = np.zeros(n, dtype=np.float32)
    total = [[] for _ in range(n)]
    for step in range(max_steps):
        active = np.logical_not(is_done)
        rewards = np.zeros(n, dtype=np.float32)
        dones = np.zeros(n, dtype=bool)
        for i, e in enumerate(episodes):
            t = min(step, len(e.obs) - 1)  # a finished environment answers again; its row is inactive
            prompt = tok.encode(f"<|im_start|> user {e.obs[t]} <|im_end|> <|im_start|> assistant")[-prompt_len:]
            answer = (tok.encode(e.answers[t]) + [tok.eos_token_id])[:response_len]
            p = torch.zeros(prompt_len, dtype=torch.long)
            p[prompt_len - len(prompt) :] = torch.tensor(prompt)
            r = torch.zeros(response_len, dtype=torch.long)
            r[: len(answer)] = torch.tensor(answer)
            attention = torch.cat(
                [torch.arange(prompt_len) >= prompt_len - len(prompt), torch.arange(response_len) < len(answer)]
            ).long()
            rewards[i] = e.rewards[t] if active[i] else 0.0
            dones[i] = e.dones[t] or t == len(e.obs) - 1
            total[i].append(
                {
                    "prompts": p,
                    "responses": r,
                    "input_ids": torch.cat([p, r]),
                    "attention_mask": attention,
                    "position_ids": torch.clamp(torch.cumsum(attention, 0) - 1, min=0),
                    "anchor_obs": e.obs[t],
                    "index": i,
                    "data_source": "alfworld",
                    "uid": uid_batch[i],
                    "traj_uid": traj_uid[i],
                    "is_action_valid": bool(e.valid[t]),
                    "rewards": np.float32(rewards[i]),
                    "active_masks": bool(active[i]),
                }
            )
        episode_rewards[active] += rewards[active]
        episode_lengths[active] += 1
        is_done = np.logical_or(is_done, dones)
        if is_done.all():
            break
    kept = []
    for i in range(n):
        for data in total[i]:
            if data["active_masks"]:
                kept.append({**data, "episode_rewards": episode_rewards[i], "episode_lengths": episode_lengths[i]})
    return collate(kept)


def step_discounted_returns(batch, gamma: float, dtype=torch.float32) -> torch.Tensor:
    """core_gigpo.compute_step_discounted_returns: per trajectory, in row order, float32 (as verl-agent)."""
    rewards = batch.non_tensor_batch["rewards"].astype(np.float32 if dtype == torch.float32 else np.float64)
    traj_uids = batch.non_tensor_batch["traj_uid"]
    out = np.zeros_like(rewards)
    for uid in np.unique(traj_uids):
        rows = np.where(traj_uids == uid)[0]
        running = 0.0
        for t in reversed(range(len(rows))):
            running = rewards[rows[t]] + gamma * running
            out[rows[t]] = running
    return torch.tensor(out, dtype=dtype)


def select(batch, idx: np.ndarray) -> SimpleNamespace:
    return SimpleNamespace(
        batch={k: v[torch.as_tensor(idx)] for k, v in batch.batch.items()},
        non_tensor_batch={k: v[idx] for k, v in batch.non_tensor_batch.items()},
        meta_info=batch.meta_info,
    )


def adjust_batch_copy(batch, size_divisor: int, rng: np.random.RandomState) -> SimpleNamespace:
    """adjust_batch(config, data, mode="copy"): append `size_divisor - remainder` distinct random rows."""
    bs = len(batch.non_tensor_batch["uid"])
    remainder = bs % size_divisor
    if remainder == 0:
        return batch
    dup = rng.choice(bs, size_divisor - remainder, replace=False)
    extra = select(batch, dup)
    return SimpleNamespace(
        batch={k: torch.cat([v, extra.batch[k]]) for k, v in batch.batch.items()},
        non_tensor_batch={k: np.concatenate([v, extra.non_tensor_batch[k]]) for k, v in batch.non_tensor_batch.items()},
        meta_info=batch.meta_info,
    )


@dataclass
class TrainerStep:
    """What one transcribed iteration gives: the batch after compute_advantage, the advantages in float64 before
    verl's float32 tensor, and the tokenizer."""

    batch: SimpleNamespace
    advantage64: np.ndarray
    tokenizer: WordTokenizer
    rows_collected: int


def gigpo_advantages(batch, *, epsilon: float, step_w: float, remove_std: bool) -> np.ndarray:
    """core_gigpo.compute_gigpo_outcome_advantage per row (float64): episode_norm_reward over the uid's rows of
    token_level_rewards.sum(-1), step_norm_reward over build_step_group's (uid, anchor_obs) groups."""
    nt = batch.non_tensor_batch
    scores = batch.batch["token_level_rewards"].double().sum(-1).tolist()
    ep = episode_norm(scores, list(nt["uid"]), epsilon, remove_std)
    keys = list(zip(nt["uid"], nt["anchor_obs"]))
    st = step_norm(batch.batch["step_rewards"].double().tolist(), keys, epsilon, remove_std)
    return np.asarray(ep) + step_w * np.asarray(st)


def trainer_step(
    *,
    n_groups: int = 4,
    group_n: int = 4,
    max_steps: int = 6,
    size_divisor: int = 32,
    gamma: float = 0.95,
    penalty: float = 0.1,
    mode: str = "mean_std_norm",
    step_w: float = 1.0,
    seed: int = 0,
    prompt_len: int = 24,
    response_len: int = 16,
    mark: bool = True,
    dtype=torch.float32,
) -> TrainerStep:
    """One iteration of verl-agent's fit() up to the advantage (module docstring), on scripted episodes. `dtype`:
    of the step returns and token scores (verl-agent's float32; float64 to compare arithmetic exactly)."""
    tok = WordTokenizer()
    episodes = scripted_episodes(n_groups, group_n, max_steps, seed)
    batch = collect(episodes, group_n, tok, prompt_len, response_len, seed)
    rows = len(batch.non_tensor_batch["uid"])
    if mark:
        mark_rows(batch)
    batch.batch["step_rewards"] = step_discounted_returns(batch, gamma, dtype)
    batch = adjust_batch_copy(batch, size_divisor, np.random.RandomState(seed))
    batch.batch["response_mask"] = batch.batch["attention_mask"][:, -response_len:]
    perm = np.random.default_rng(seed + 1).permutation(len(batch.non_tensor_batch["uid"]))  # _balance_batch
    batch = select(batch, perm)
    scores = torch.zeros_like(batch.batch["responses"], dtype=dtype)
    valid_len = batch.batch["response_mask"].sum(-1)
    for i in range(len(scores)):
        scores[i, valid_len[i] - 1] = torch.tensor(float(batch.non_tensor_batch["episode_rewards"][i]), dtype=dtype)
        invalid = 1.0 - float(batch.non_tensor_batch["is_action_valid"][i])
        scores[i, valid_len[i] - 1] -= penalty * invalid
        batch.batch["step_rewards"][i] -= penalty * invalid
    batch.batch["token_level_scores"] = scores
    batch.batch["token_level_rewards"] = scores
    adv = gigpo_advantages(batch, epsilon=1e-6, step_w=step_w, remove_std=mode == "mean_norm")
    tokens = torch.tensor(adv, dtype=torch.float32).unsqueeze(-1) * batch.batch["response_mask"]
    batch.batch["advantages"], batch.batch["returns"] = tokens, tokens
    return TrainerStep(batch, adv, tok, rows)
