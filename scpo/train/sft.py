"""Behaviour-cloning warm start on expert demonstrations (`scpo train --stage sft`).

Demonstrations: each task's expert actions (ALFWorld walkthrough, WebShop expert policy) replayed from reset; every step
becomes (prompt as the collector would build it, answer `<action>a</action>` + EOS). `train.sft.n_demos` caps how many
tasks are demonstrated, which caps how good the warm policy gets (group credit needs groups with mixed success).
Loss: mean negative log-likelihood of the answer tokens (prompt tokens are context only).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.envs.base import EnvPackage
from scpo.envs.prompting import action_answer
from scpo.policy import PolicyLike
from scpo.train.logprobs import bucketed_batches, response_logprobs

__all__ = ["Demo", "expert_demonstrations", "encode_demos", "behaviour_cloning"]


@dataclass
class Demo:
    task_id: str
    prompt: str
    response: str


def expert_demonstrations(
    env_pkg: EnvPackage,
    task_ids: Sequence[str],
    *,
    data_root: str = "data",
    max_steps: int | None = None,
    history_length: int = 2,
    progress: bool = True,
) -> tuple[list[Demo], dict[str, float]]:
    """Replay each task's expert actions; keep the steps of replays that win. Returns (demos, stats)."""
    demos: list[Demo] = []
    won = 0
    for task_id in tqdm(task_ids, desc="expert demos", disable=not progress, leave=False):
        actions = env_pkg.expert_actions(task_id, data_root=data_root)
        env = env_pkg.make_env(task_id, data_root=data_root, max_steps=max(max_steps or 0, len(actions) + 1))
        obs, info = env.reset()
        goal, history, steps = str(info.get("goal", "")), [], []
        for t, action in enumerate(actions):
            prompt = env_pkg.build_prompt(
                goal, obs, list(info.get("admissible_commands", [])), history, t, history_length=history_length
            )
            steps.append(Demo(task_id, prompt, action_answer(action)))
            history.append((obs, action))
            obs, _, done, info = env.step(action)
            if done:
                break
        if info.get("won"):
            won += 1
            demos.extend(steps[:max_steps] if max_steps else steps)
    return demos, {"n_tasks": float(len(task_ids)), "n_won": float(won), "n_steps": float(len(demos))}


def encode_demos(
    policy: PolicyLike, demos: Sequence[Demo], max_prompt_tokens: int
) -> tuple[list[list[int]], list[list[int]]]:
    """Prompt ids (formatted, left-truncated) and answer ids + EOS."""
    prompt_ids = policy.encode_prompts([d.prompt for d in demos], max_prompt_tokens)
    eos = policy.tokenizer.eos_token_id
    answers = policy.tokenizer([d.response for d in demos], add_special_tokens=False)["input_ids"]
    return prompt_ids, [list(a) + ([eos] if eos is not None else []) for a in answers]


def behaviour_cloning(
    policy: PolicyLike,
    demos: Sequence[Demo],
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    max_prompt_tokens: int,
    seed: int = 0,
    progress: bool = True,
    on_step=None,
) -> dict[str, float]:
    """AdamW on the answer-token NLL; returns the mean loss of the first and last epochs, steps and seconds.
    `on_step(loss)`, if given, is called with each optimizer step's loss (loss curves)."""
    if not demos:
        raise ValueError("behaviour_cloning got no demonstrations (did every expert replay fail?)")
    prompt_ids, answer_ids = encode_demos(policy, demos, max_prompt_tokens)
    model = policy.model
    pad = policy.tokenizer.pad_token_id
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    epoch_losses: list[float] = []
    t0 = time.perf_counter()
    model.train()
    n = len(demos)
    bar = tqdm(total=epochs * ((n + batch_size - 1) // batch_size), desc="sft", disable=not progress, leave=False)
    lengths = [len(p) + len(a) for p, a in zip(prompt_ids, answer_ids)]
    for _ in range(epochs):
        losses = []
        for idx in bucketed_batches(lengths, batch_size, gen):
            logp, mask, _ = response_logprobs(model, [prompt_ids[i] for i in idx], [answer_ids[i] for i in idx], pad)
            loss = -(logp * mask).sum() / mask.sum().clamp(min=1.0)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
            if on_step is not None:
                on_step(losses[-1])
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
        epoch_losses.append(float(np.mean(losses)))
    bar.close()
    return {
        "loss_first_epoch": epoch_losses[0] if epoch_losses else float("nan"),
        "loss_last_epoch": epoch_losses[-1] if epoch_losses else float("nan"),
        "n_samples": float(n),
        "epochs": float(epochs),
        "seconds": time.perf_counter() - t0,
    }
