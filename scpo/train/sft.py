"""The behaviour-cloning warm start (`scpo train --stage sft`): `run_sft` reads top to bottom.

Demonstrations (`scpo.envs.demos`): the expert's actions of each of the plan's demonstrated tasks (`train.sft.n_demos`
of the training split) replayed from reset; every step becomes (prompt as the collector would build it, answer
`<action>a</action>` + EOS). `n_demos` caps how good the warm policy gets (group credit needs groups with mixed
success). Loss: mean negative log-likelihood of the answer tokens
(prompt tokens are context only), AdamW, gradient norm clipped at 1. With `train.rl_start: base` (RL from the
profile's model) no warm start is needed: only a summary saying so is written.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.envs.demos import Demo, expert_demonstrations
from scpo.policy import PolicyLike, load_policy
from scpo.policy.logprobs import bucketed_batches, response_logprobs
from scpo.policy.placement import autocast_each_forward
from scpo.policy.profiles import enable_gradient_checkpointing, trained_dtype
from scpo.run.finite import check_weights
from scpo.run.plan import RunPlan
from scpo.run.provenance import identity
from scpo.train.models import fresh_policy, save_model
from scpo.train.seeding import seed_everything

__all__ = ["run_sft", "encode_demos", "behaviour_cloning"]


def run_sft(plan: RunPlan) -> dict:
    """Behaviour cloning on the plan's demonstrated tasks into its run folder (checked and locked by
    `scpo.train.run.run_training`); writes `model/` and returns the summary."""
    t_start = time.perf_counter()
    cfg, env = plan.config, plan.env
    head = {"stage": "sft", "env": env.name, "seed": plan.seed, **identity(cfg)}
    if cfg.train.rl_start == "base":
        return {
            **head,
            "skipped": "train.rl_start=base: RL starts from the profile's model, no warm start",
            "wall_s": time.perf_counter() - t_start,
            "run_dir": str(plan.run_dir),
        }
    seed_everything(plan.seed)
    demos, demo_stats = expert_demonstrations(env.package, plan.demo_tasks, **env.play_options())
    corpus = [d.prompt for d in demos] + [d.response for d in demos]
    if plan.warm_start:  # trained weights in float32 (a LoRA base in policy.dtype), forward passes in policy.dtype
        policy = load_policy(plan.start.path, dtype=trained_dtype(cfg.policy), device=plan.device)
    else:
        policy = fresh_policy(cfg, env, corpus, device=plan.device)
    autocast_each_forward(policy.model, plan.device, cfg.policy.dtype)  # each forward pass in policy.dtype
    if cfg.train.gradient_checkpointing:
        enable_gradient_checkpointing(policy.model)
    sft = cfg.train.sft
    bc = behaviour_cloning(
        policy,
        demos,
        epochs=sft.epochs,
        lr=sft.lr,
        batch_size=sft.batch_size,
        max_prompt_tokens=cfg.policy.max_prompt_tokens,
        seed=plan.seed,
    )
    check_weights(policy.model, "SFT warm start", f"lower train.sft.lr (now {sft.lr:g}), then --overwrite")
    save_model(policy, plan.run_dir / "model")
    return {
        **head,
        "n_params": sum(p.numel() for p in policy.model.parameters()),
        "demos": demo_stats,
        "bc": bc,
        "wall_s": time.perf_counter() - t_start,
        "run_dir": str(plan.run_dir),
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
