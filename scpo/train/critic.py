"""PPO's learned critic in the trainer: a value model from the weights the policy starts from, trained beside it on
each batch. Spec: docs/algorithms.md, "PPO (learned critic)"; the model and the loss: `scpo.policy.critic`.

    V(s_t)  = ValueHead(trunk(prompt_t) at its last token)      the trunk: a copy of the start model's decoder
    collect:  critic_value_t = V(s_t) for every row, before the critic sees the batch (the need `ppo` declares)
    credit:   A_t, G_t = GAE from those values (`scpo.credit.ppo`)
    update:   `epochs` passes over shuffled minibatches of rows, each an AdamW step on
              L_V = 1/2 sum_t w_t max((V_t - G_t)^2, (clip(V_t, V_old_t - c, V_old_t + c) - G_t)^2) / sum_t w_t
              (verl's `compute_value_loss`, token-mean: w_t the answer's token count; c = train.critic.cliprange_value)

verl-agent's PPO recipe runs a critic model of the same base as the actor (critic.model.path = the actor's model), fully
fine-tuned (lora_rank 0); this critic is that: the start model's decoder, in float32 with the policy's autocast and
gradient checkpointing settings, never LoRA, with its own optimizer (train.critic). The trunk is the policy's
architecture but not the policy's parameters: the policy's update and the critic's never share a gradient.

Metrics per iteration (`fit`): critic/value_loss (the mean clipped loss over the critic's steps, verl's vf_loss),
critic/vf_clipfrac, and on the batch before the critic trains on it: critic/value_loss_before (1/2 token-weighted MSE
of V_old against G) and critic/explained_variance (1 - var(G - V_old) / var(G), verl's vf_explained_var).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_model, save_model

from scpo.credit.ppo import explained_variance
from scpo.policy import load_policy
from scpo.policy.critic import ValueHead, clipped_value_loss, prompt_last_hidden
from scpo.policy.placement import autocast_each_forward
from scpo.policy.profiles import enable_gradient_checkpointing
from scpo.run.checkpoint import CheckpointError, read_state_file, write_state_file

__all__ = ["Critic", "CRITIC_DIR", "CRITIC_WEIGHTS", "CRITIC_OPTIMIZER"]

CRITIC_DIR = "critic"  # in a checkpoint and in the run folder
CRITIC_WEIGHTS, CRITIC_OPTIMIZER = "critic.safetensors", "optimizer.safetensors"


class Critic:
    """The trunk and value head (one module, `self.module`), their AdamW and `train.critic`'s options."""

    def __init__(self, trunk_model, options, *, seed: int, device=None):
        self.options = options
        with torch.random.fork_rng(devices=[]):  # the head's first layer drawn from `seed`, the global RNG untouched
            torch.manual_seed(seed)
            head = ValueHead(trunk_model.config.hidden_size, hidden=options.head_hidden)
        self.module = torch.nn.ModuleDict({"trunk": trunk_model, "head": head})
        if device is not None:
            self.module.to(device)
        self.optimizer = torch.optim.AdamW(
            [p for p in self.module.parameters() if p.requires_grad], lr=options.lr, weight_decay=options.weight_decay
        )

    @classmethod
    def from_start(cls, cfg, model_dir: Path, device, seed: int) -> Critic:
        """The critic of a run of `cfg` whose policy starts from `model_dir` (module docstring)."""
        model = load_policy(model_dir, dtype="float32", device=device).model
        autocast_each_forward(model.model, device, cfg.policy.dtype)
        if cfg.train.gradient_checkpointing:
            enable_gradient_checkpointing(model)
        return cls(model, cfg.train.critic, seed=seed, device=device)

    # ------------------------------------------------------------------------------------------------ values
    def _values(self, prompts: list) -> torch.Tensor:
        hidden = prompt_last_hidden(self.module["trunk"], prompts)
        return self.module["head"](hidden.float())

    def values(self, prompt_ids) -> np.ndarray:
        """V(s_t) of each prompt (float64, one per row), without gradients, in chunks of the critic's micro-batch."""
        prompts = [list(p) for p in prompt_ids]
        chunk = self.options.micro_batch_size or self.options.minibatch_size
        with torch.no_grad():
            parts = [self._values(prompts[i : i + chunk]).cpu() for i in range(0, len(prompts), chunk)]
        return torch.cat(parts).double().numpy() if parts else np.zeros(0)

    # ------------------------------------------------------------------------------------------------ update
    def fit(
        self,
        prompt_ids,
        returns: np.ndarray,
        old_values: np.ndarray,
        weights: np.ndarray,
        generator: torch.Generator,
    ) -> dict[str, float]:
        """`epochs` passes of the clipped value loss over the rows with an answer (weight > 0), in shuffled minibatches
        drawn with `generator`, gradients accumulated over micro-batches; -> the metrics of the module docstring."""
        opts = self.options
        old_values, returns = np.asarray(old_values, dtype=np.float64), np.asarray(returns, dtype=np.float64)
        weights = np.asarray(weights, dtype=np.float64)
        rows = np.flatnonzero(weights > 0)
        if len(rows) < 2:
            raise ValueError(f"the critic needs at least 2 steps with an answer to train on, got {len(rows)}")
        before = {
            "critic/value_loss_before": float(
                0.5 * np.dot(weights[rows], (old_values[rows] - returns[rows]) ** 2) / weights[rows].sum()
            ),
            "critic/explained_variance": explained_variance(old_values[rows], returns[rows]),
            "critic/value_mean": float(old_values[rows].mean()),
        }
        prompts = [list(prompt_ids[r]) for r in rows]
        target = torch.tensor(returns[rows], dtype=torch.float32)
        old = torch.tensor(old_values[rows], dtype=torch.float32)
        w = torch.tensor(weights[rows], dtype=torch.float32)
        device = next(self.module.parameters()).device
        losses, clipfracs = [], []
        self.module.train()
        for _ in range(opts.epochs):
            for idx in torch.randperm(len(rows), generator=generator).split(opts.minibatch_size):
                self.optimizer.zero_grad(set_to_none=True)
                total, loss_sum, clip_sum = w[idx].sum(), 0.0, 0.0
                for micro in idx.split(opts.micro_batch_size or len(idx)):
                    share = w[micro].sum() / total
                    loss, clipfrac = clipped_value_loss(
                        self._values([prompts[i] for i in micro.tolist()]),
                        target[micro].to(device),
                        old[micro].to(device),
                        opts.cliprange_value,
                        w[micro].to(device),
                    )
                    (loss * share.to(device)).backward()
                    loss_sum += float(loss.detach()) * float(share)
                    clip_sum += float(clipfrac) * float(share)
                if opts.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(self.module.parameters(), opts.max_grad_norm)
                self.optimizer.step()
                losses.append(loss_sum)
                clipfracs.append(clip_sum)
        return {**before, "critic/value_loss": float(np.mean(losses)), "critic/vf_clipfrac": float(np.mean(clipfracs))}

    # ------------------------------------------------------------------------------------------------ state
    def save(self, folder: Path) -> None:
        """The critic's weights (trunk and head, one safetensors file) and its optimizer's state into `folder`."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_model(self.module, str(folder / CRITIC_WEIGHTS))
        write_state_file(folder / CRITIC_OPTIMIZER, self.optimizer.state_dict(), "critic_optimizer")

    def load(self, folder: Path) -> None:
        """Inverse of `save`; CheckpointError (one line) when `folder` holds no critic or one of another shape."""
        folder = Path(folder)
        missing = [n for n in (CRITIC_WEIGHTS, CRITIC_OPTIMIZER) if not (folder / n).is_file()]
        if missing:
            raise CheckpointError(
                f"{folder.parent} holds no critic ({', '.join(str(folder / n) for n in missing)} missing): it was "
                "written by a run without one (credit.method reads no critic values); resume it with its own method"
            )
        try:
            load_model(self.module, str(folder / CRITIC_WEIGHTS), strict=True)
            self.optimizer.load_state_dict(read_state_file(folder / CRITIC_OPTIMIZER))
        except (RuntimeError, ValueError, KeyError) as err:
            line = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise CheckpointError(f"the critic in {folder} does not fit this run's (train.critic): {line}") from None
