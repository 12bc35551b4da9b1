"""The behaviour-cloning warm start (`scpo train --stage sft`): `run_sft` reads top to bottom.

Demonstrations (`scpo.envs.demos`): each of `train.sft.n_demos` tasks' expert actions replayed from reset; every step
becomes (prompt as the collector would build it, answer `<action>a</action>` + EOS). `n_demos` caps how good the warm
policy gets (group credit needs groups with mixed success). Loss: mean negative log-likelihood of the answer tokens
(prompt tokens are context only), AdamW, gradient norm clipped at 1. With `train.rl_start: base` (RL from the
profile's model) no warm start is needed: only a summary saying so is written.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.config import Config
from scpo.envs.demos import Demo, expert_demonstrations
from scpo.policy import PolicyLike, load_policy
from scpo.policy.logprobs import bucketed_batches, response_logprobs
from scpo.policy.placement import autocast_each_forward, resolve_device
from scpo.policy.profiles import enable_gradient_checkpointing, trained_dtype
from scpo.train.finite import check_weights
from scpo.train.seeding import seed_everything
from scpo.train.setup import demo_tasks, fresh_policy, identity, run_env, save_model

__all__ = ["run_sft", "encode_demos", "behaviour_cloning"]


def run_sft(cfg: Config, run_dir: Path) -> dict:
    """Behaviour cloning on `train.sft.n_demos` expert demonstrations into `run_dir` (checked and locked by
    `scpo.train.run.run_training`); writes `model/` and returns the summary."""
    t_start = time.perf_counter()
    if cfg.train.rl_start == "base":
        return {
            "stage": "sft",
            "env": cfg.env.name,
            "seed": cfg.train.seed,
            **identity(cfg),
            "skipped": "train.rl_start=base: RL starts from the profile's model, no warm start",
            "wall_s": time.perf_counter() - t_start,
            "run_dir": str(run_dir),
        }
    env = run_env(cfg)
    s = env.settings
    seed_everything(cfg.train.seed)
    demos, demo_stats = expert_demonstrations(
        s.package,
        demo_tasks(s, cfg),
        data_root=s.data_root,
        max_steps=s.max_steps,
        history_length=cfg.env.history_length,
        env_options=s.options,
    )
    corpus = [d.prompt for d in demos] + [d.response for d in demos]
    device = resolve_device(cfg.train.device)
    if cfg.train.init_from:  # trained weights in float32 (a LoRA base in policy.dtype), forward passes in policy.dtype
        policy = load_policy(cfg.train.init_from, dtype=trained_dtype(cfg.policy), device=device)
    else:
        policy = fresh_policy(cfg, env, corpus, device=device)
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
    check_weights(policy.model, "SFT warm start", f"lower train.sft.lr (now {cfg.train.sft.lr:g}), then --overwrite")
    save_model(policy, run_dir / "model")
    return {
        "stage": "sft",
        "env": cfg.env.name,
        "seed": cfg.train.seed,
        **identity(cfg),
        "n_params": sum(p.numel() for p in policy.model.parameters()),
        "demos": demo_stats,
        "bc": bc,
        "wall_s": time.perf_counter() - t_start,
        "run_dir": str(run_dir),
    }


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
