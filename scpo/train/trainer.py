"""The group-RL trainer (`scpo train --stage rl`), built from a run's plan (`scpo.run.plan.RunPlan`); one iteration
reads top to bottom:

    collect   sample tasks, N rollouts per task (dynamic sampling: until enough groups carry a signal) -> the batch
              (`RolloutBatch`: environment columns and the policy's prompts and token ids), with the columns its
              credit method reads beyond the rollouts (`MethodSpec.columns`: `COLUMN_PROVIDERS`)
    credit    the method's per-step advantages (`scpo.credit.compute_advantages`; a method that reads the policy's
              scores gets them here: `scpo.policy.hindsight`)
    update    clipped-ratio PPO steps with KL to the reference and an entropy bonus (`scpo.train.update`), checked
              finite (`scpo.run.finite`), then the engine's weights synced
    critic    a run whose method reads a learned critic's values (the plan's `critic`: PPO) trains it on the batch's
              returns, after its values of the batch (the `critic_value` column) were read by credit
              (`scpo.train.critic`)
    log       one row of metrics (history.csv and dvclive: `scpo.run.history`), the saved batch
    checkpoint  every `train.checkpoint_every` iterations and at the end (`scpo.run.checkpoint`)

Steps with advantage 0 are left out of the update with `train.skip_zero_advantage` (kept by the gpu profile, as
verl-agent). Every iteration is seeded from (train.seed, iteration), so a run resumed from a checkpoint continues
exactly as the uninterrupted run would have (tested by killing a run with SIGKILL).

Where the trainer grows (each a method to extend or override, with what it receives and returns):
- a batch column computed before credit (as the policy's Monte-Carlo or exact values are): a provider in
  `COLUMN_PROVIDERS` under the column's name (`scpo.credit.spec.COLUMNS`), which the method's spec lists;
- another learned model beside the policy: as the critic, built in `__init__` from the plan, its values a batch
  column (`critic_values`), its step after the policy's (`fit_critic`), its state in each checkpoint (`checkpoint`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.credit import CreditResult, compute_advantages, method_spec
from scpo.envs.registry import with_oracle_progress
from scpo.rollout import make_engine
from scpo.rollout.branches import policy_values
from scpo.rollout.collector import RolloutTiming
from scpo.rollout.exact_values import exact_values
from scpo.run.checkpoint import latest_checkpoint, save_checkpoint
from scpo.run.finite import check_update
from scpo.run.history import HISTORY_FILE, HistoryLog
from scpo.run.plan import RunPlan
from scpo.run.provenance import identity
from scpo.train.collect import collect_iteration, play_settings
from scpo.train.critic import CRITIC_DIR, Critic
from scpo.train.metrics import credit_metrics, rollout_metrics
from scpo.train.models import model_folder, reference_model, save_model, trained_policy
from scpo.train.seeding import iteration_seed, seed_everything
from scpo.train.update import StepSample, make_optimizer, ppo_update, update_samples

__all__ = ["Trainer", "PERF_KEYS", "COLUMN_PROVIDERS"]

PERF_KEYS = ("perf/env_s", "perf/gen_s", "perf/credit_s", "perf/update_s", "perf/iter_s")


class Trainer:
    """Group RL with the plan's credit method into its run folder (opened by `scpo.run.folder.open_run`), from its
    checkpoint when resuming. `train()` runs every iteration left; `iteration(it)` is one (module docstring)."""

    def __init__(self, plan: RunPlan):
        self.t_start = time.perf_counter()
        self.plan, cfg = plan, plan.config
        self.spec = method_spec(plan.method)
        # ---- seeding, policy, reference policy, optimizer, engine, history
        seed_everything(plan.seed)
        self.start_dir = model_folder(plan, plan.start)  # tiny: built into <run>/init_model once
        model_dir = plan.resume.checkpoint / "model" if plan.resume else self.start_dir
        self.policy = trained_policy(cfg, model_dir, plan.device)
        self.reference = reference_model(plan, self.policy, self.start_dir)
        self.optimizer = make_optimizer(self.policy.model, cfg.train)
        self.start_iteration = plan.resume.state.restore(self.optimizer) if plan.resume else 0
        self.engine = make_engine(cfg, self.policy, model_dir=model_dir)
        # ---- the learned critic (PPO): from the start model's weights, or the checkpoint's critic when resuming
        self.critic = None
        if plan.critic is not None:
            self.critic = Critic.from_start(cfg, self.start_dir, plan.device, seed=plan.seed)
            if plan.resume:
                self.critic.load(plan.resume.checkpoint / CRITIC_DIR)
        self.history = HistoryLog(plan.run_dir, keep_iterations=self.start_iteration)

    def train(self) -> dict:
        """Every iteration left, then the final model; -> the run's summary."""
        iterations = self.plan.config.train.iterations
        for it in tqdm(
            range(self.start_iteration, iterations),
            desc=f"rl {self.plan.method}",
            initial=self.start_iteration,
            total=iterations,
            unit="iter",
        ):
            self.iteration(it)
        self.history.close()
        save_model(self.policy, self.plan.run_dir / "model")
        if self.critic is not None:
            self.critic.save(self.plan.run_dir / CRITIC_DIR)
        return self.summary()

    def iteration(self, it: int) -> dict:
        """One iteration (module docstring); -> its row of metrics."""
        seed_everything(iteration_seed(self.plan.seed, it))
        t_iter = time.perf_counter()

        # 1. collect: N rollouts per task, same seed, all environments batched through generation -> the batch
        batch, timing, collected = self.collect(it)

        # 2. credit: the method's per-step advantages
        t0 = time.perf_counter()
        credit = self.credit(batch)
        credit_s = time.perf_counter() - t0

        # 3. update the policy, then push its weights to the generation engine
        t0 = time.perf_counter()
        update, samples, n_steps = self.update(batch, credit, it)
        update_s = time.perf_counter() - t0

        # 3b. the critic (PPO): its value loss on the batch's returns
        critic = self.fit_critic(batch, credit, it) if self.critic is not None else {}

        # 4. log: the iteration's metrics and its batch
        row = {
            "iteration": it,
            **rollout_metrics(batch),
            **credit_metrics(batch, credit),
            **{f"losses/{k}": v for k, v in update.items()},
            "losses/frac_steps_updated": len(samples) / max(n_steps, 1),
            **critic,
            "perf/env_s": timing.env_s,
            "perf/gen_s": timing.gen_s,
            "perf/credit_s": credit_s,
            "perf/update_s": update_s,
            "perf/iter_s": time.perf_counter() - t_iter,
            **collected,
            "perf/steps": float(batch.n_rows),
            "perf/response_tokens": float(sum(len(s.response_ids) for s in samples)),
        }
        self.log(it, row, batch)

        # 5. checkpoint
        self.checkpoint(it)
        return row

    # ------------------------------------------------------------------------------------------------ the steps
    def collect(self, it: int) -> tuple[RolloutBatch, RolloutTiming, dict[str, float]]:
        """-> (iteration `it`'s batch with the columns its method reads, the rollouts' timing, the collection's
        metrics: dynamic sampling's counters, then the columns' own)."""
        cfg = self.plan.config
        trajectories, timing, metrics = collect_iteration(cfg, self.plan.env, self.engine, list(self.plan.tasks), it)
        batch = RolloutBatch.from_trajectories(trajectories)
        for column in self.spec.columns:
            batch, more = COLUMN_PROVIDERS[column](self, batch, it)
            metrics = {**metrics, **more}
        return batch, timing, metrics

    def credit(self, batch: RolloutBatch) -> CreditResult:
        """The method's advantages on `batch`; a method that reads the policy's scores gets them computed here."""
        cfg = self.plan.config
        hindsight = None
        if self.spec.policy_scores:
            from scpo.policy.hindsight import hindsight_logprob

            hindsight = hindsight_logprob(
                self.policy,
                batch,
                temperature=cfg.credit.hcapo.temperature,
                max_prompt_tokens=cfg.policy.max_prompt_tokens,
                batch_size=cfg.train.minibatch_size,
            )
        return compute_advantages(self.spec.name, batch, cfg.credit, hindsight_logprob=hindsight)

    def update(self, batch: RolloutBatch, credit: CreditResult, it: int) -> tuple[dict, list[StepSample], int]:
        """PPO on the batch's steps with their advantages, then the engine's weights synced; -> (the update's losses,
        the steps trained on, the steps with an answer). A NaN or infinite loss, gradient norm or weight stops the
        run here, before anything of iteration `it` is written (`scpo.run.finite`)."""
        cfg, model = self.plan.config, self.policy.model
        samples, n_steps = update_samples(batch, credit.advantages, cfg.train.skip_zero_advantage)
        gen = torch.Generator().manual_seed(iteration_seed(self.plan.seed, it))
        with self.engine.memory_released():  # vLLM's sleep mode (rollout.vllm_sleep_mode); nothing for transformers
            update = ppo_update(
                model,
                self.reference,
                self.optimizer,
                samples,
                pad_id=self.policy.tokenizer.pad_token_id,
                train_cfg=cfg.train,
                temperature=cfg.rollout.temperature or 1.0,
                generator=gen,
            )
        check_update(it, update, model, hint=self._diverged_hint)
        self.engine.sync_weights(self.policy)
        return update, samples, n_steps

    def fit_critic(self, batch: RolloutBatch, credit: CreditResult, it: int) -> dict[str, float]:
        """The critic's epochs on the batch: the returns G_t credit computed from its values (`credit.returns`), its
        values before (the batch's critic_value), each step weighted by its answer's token count (verl's token-mean);
        minibatches drawn from the iteration's seed. -> critic/* metrics and perf/critic_update_s; a NaN or infinite
        value loss stops the run here (`scpo.run.finite`)."""
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(iteration_seed(self.plan.seed, it))
        weights = np.array([len(r) for r in batch.response_ids], dtype=np.float64)
        with self.engine.memory_released():
            metrics = self.critic.fit(batch.prompt_ids, credit.returns, batch.critic_value, weights, gen)
        hint = lambda: self._diverged_hint("train.critic.lr", self.plan.config.train.critic.lr)  # noqa: E731
        check_update(it, {"value_loss": metrics["critic/value_loss"]}, self.critic.module, hint=hint)
        return {**metrics, "perf/critic_update_s": time.perf_counter() - t0}

    def log(self, it: int, row: dict, batch: RolloutBatch) -> None:
        """The row into history.csv and dvclive; the batch saved every `train.save_rollouts_every` iterations."""
        every = self.plan.config.train.save_rollouts_every
        self.history.log(row)
        if every and (it + 1) % every == 0:
            batch.to_parquet(self.plan.run_dir / "rollouts" / f"iter_{it:04d}.parquet")

    def checkpoint(self, it: int) -> None:
        """A checkpoint after iteration `it` every `train.checkpoint_every` iterations and after the last one."""
        train_cfg = self.plan.config.train
        if (it + 1) % train_cfg.checkpoint_every == 0 or it + 1 == train_cfg.iterations:
            save_checkpoint(
                self.plan.run_dir,
                it + 1,
                self.policy,
                self.optimizer,
                {"method": self.plan.method, "provenance": self.plan.record},
                keep=train_cfg.keep_checkpoints,
                files={HISTORY_FILE: self.history.path},  # the history as of this checkpoint: a resume checks it
                write_more=(lambda ckpt: self.critic.save(ckpt / CRITIC_DIR)) if self.critic is not None else None,
            )

    # ---------------------------------------------------------------------------------- batch columns for credit
    def oracle_progress(self, batch: RolloutBatch, it: int) -> tuple[RolloutBatch, dict[str, float]]:
        """The planner's oracle progress per step, part of the saved batch."""
        return with_oracle_progress(batch, self.plan.env.data_root), {}

    def policy_values(self, batch: RolloutBatch, it: int) -> tuple[RolloutBatch, dict[str, float]]:
        """The policy's own state values: `credit.mc_advantage.rollouts` continuations of the current policy from
        every state the batch acted on (`scpo.rollout.branches`); the branches' metrics."""
        cfg = self.plan.config
        values, timing = policy_values(
            batch,
            self.plan.env.package,
            self.engine,
            rollouts=cfg.credit.mc_advantage.rollouts,
            **play_settings(cfg, self.plan.env),
            desc=f"iter {it} branches",
        )
        metrics = {
            "branches/n": float(timing.extra["branches"]),
            "branches/steps": float(timing.n_generations),
            "perf/branch_env_s": timing.env_s,
            "perf/branch_gen_s": timing.gen_s,
        }
        return batch.with_column("policy_value", values), metrics

    def exact_values(self, batch: RolloutBatch, it: int) -> tuple[RolloutBatch, dict[str, float]]:
        """The policy's exact success values per step: dynamic programming over the nodes the environment's tabular
        model enumerates, under the policy that played the batch (`scpo.rollout.exact_values`: environments that
        declare one, with `rollout.action_choice: admissible`); its seconds."""
        cfg, t0 = self.plan.config, time.perf_counter()
        values = exact_values(
            batch,
            self.policy,
            self.plan.env.name,
            **play_settings(cfg, self.plan.env),
            max_prompt_tokens=cfg.policy.max_prompt_tokens,
            prompt_overflow=cfg.policy.prompt_overflow,
            progress=False,
        )
        return batch.with_column("exact_value", values), {"perf/exact_values_s": time.perf_counter() - t0}

    def critic_values(self, batch: RolloutBatch, it: int) -> tuple[RolloutBatch, dict[str, float]]:
        """The critic's values V(s_t) of every step's prompt, before it trains on the batch (`scpo.train.critic`);
        their seconds."""
        t0 = time.perf_counter()
        values = self.critic.values(batch.prompt_ids)
        return batch.with_column("critic_value", values), {"perf/critic_values_s": time.perf_counter() - t0}

    # ------------------------------------------------------------------------------------------------ the end
    def summary(self) -> dict:
        """Final metrics (last iteration), mean wall seconds per iteration split env / gen / credit / update."""
        plan, cfg, rows = self.plan, self.plan.config, self.history.rows
        last = rows[-1] if rows else {}
        perf = {k.split("/", 1)[1]: float(np.mean([r[k] for r in rows])) for k in PERF_KEYS if rows}
        return {
            "stage": "rl",
            "env": plan.env.name,
            "method": plan.method,
            "seed": plan.seed,
            **identity(cfg),
            "iterations": len(rows),
            "init_from": str(self.start_dir),
            "rl_start": cfg.train.rl_start,
            "kl_reference": cfg.train.kl_reference,
            "final": {k: v for k, v in last.items() if not k.startswith("perf/")},
            "success_rate_mean": float(np.mean([r["charts/success_rate"] for r in rows])) if rows else None,
            "seconds_per_iteration": perf,
            "wall_s": time.perf_counter() - self.t_start,
            "run_dir": str(plan.run_dir),
        }

    def _diverged_hint(self, lr_key: str = "train.lr", lr: float | None = None) -> str:
        cfg, run_dir = self.plan.config, self.plan.run_dir
        last = latest_checkpoint(run_dir)
        where = f"the run folder keeps {last.relative_to(run_dir)}" if last else "no checkpoint was written yet"
        lr = cfg.train.lr if lr is None else lr
        clip = "train.max_grad_norm" if lr_key == "train.lr" else "train.critic.max_grad_norm"
        return f"{where}; lower {lr_key} (now {lr:g}) or {clip}, then " + (
            "`--resume --force`" if last else "run it again with --overwrite"
        )


# the batch columns a credit method may read beyond the rollouts (`scpo.credit.spec.COLUMNS`), and the trainer's method
# that adds each before credit
COLUMN_PROVIDERS: dict[str, Callable[[Trainer, RolloutBatch, int], tuple[RolloutBatch, dict[str, float]]]] = {
    "oracle_progress": Trainer.oracle_progress,
    "policy_value": Trainer.policy_values,
    "exact_value": Trainer.exact_values,
    "critic_value": Trainer.critic_values,
}
