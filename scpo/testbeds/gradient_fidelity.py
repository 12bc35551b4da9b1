"""Gradient fidelity [ours]: the cosine between each estimator's policy-gradient update on a batch and the gradient of
success (docs/algorithms.md, "Gradient fidelity"): exact where the environment's states can be enumerated, estimated
from the policy's own episodes where they cannot.

    res = gradient_fidelity(policy, panel, max_steps=12, history_length=2, n_batches=64)
    res.summary      # per estimator: mean cosine over batches with its 95% t-interval, paired difference from GRPO
    res.per_batch    # per (batch, estimator): the cosines and the update's norm

The vectors (`scpo.testbeds.policy_gradients`): the exact gradient of J, the mean over the panel's tasks of the
probability of winning within the budget, from the dynamic programme (`scpo.rollout.exact_dp`); an estimator's update,
the ascent direction of the trainer's policy-gradient loss at ratio 1 for its advantages, g = (1/N) sum_i A_i grad log
pi(a_i | x_i). A cosine is scale-free: the estimators' normalisations do not matter, only the direction.

**Batches.** Each batch is what a training iteration collects: `n_tasks` tasks drawn from the panel
(`scpo.train.collect.sample_tasks`) and `group_size` rollouts of each by the policy (the admissible-choice sampler at
the rollout temperature); every estimator runs on it with what it needs: the planner's oracle progress (the
environment's `EnvSpec.oracle_progress`), HCAPO's hindsight scores (the policy), the exact values (`exact_value`,
from the dynamic programme) and `mc_advantage`'s Monte-Carlo values. Where there is a table the last are drawn, not
played: the mean success of K continuations from a node is Binomial(K, V(n)) / K, which `sampled_policy_values` draws
per state as `scpo.rollout.branches` names states (rows that reached a state by the same commands share one
estimate), the law of the branches' estimate without playing them; without a table the branches are played.

**Cosines**, per batch: with grad J of the whole panel (`cos_panel`: what an iteration's update does for the
objective); with the exact gradient of the batch's own tasks (`cos_tasks`, the same tasks counted as drawn: credit
quality without the task draw's noise); with `reference_episodes`, the corrected cosine with a reference estimated
from that many fresh episodes per task (`cos_sampled`, `scpo.testbeds.sampled_gradient`: the only one available
without a table, checked against `cos_panel` on the corridor). The policy does not change between batches, so the
batches are independent draws and the interval over them is a t-interval (the sampled reference is one draw shared
by all batches: its own noise is not in that interval; `reference_reliability` measures it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, available_methods, estimate
from scpo.credit.registry import method_spec
from scpo.envs.registry import env_package, env_spec
from scpo.policy.hindsight import hindsight_logprob
from scpo.rollout import TransformersEngine, collect_rollouts
from scpo.rollout.branches import policy_values, state_keys
from scpo.rollout.exact_values import (
    ExactTable,
    choice_inputs,
    exact_graph,
    policy_log_probs,
    row_nodes,
    solve,
)
from scpo.testbeds.policy_gradients import cosine, task_gradients, update_gradients
from scpo.testbeds.sampled_gradient import corrected_cosine, sampled_gradient
from scpo.train.collect import sample_tasks
from scpo.train.seeding import iteration_seed, seed_everything

__all__ = ["GradientFidelityResult", "sampled_policy_values", "gradient_fidelity", "summarize_cosines"]


def sampled_policy_values(
    batch: RolloutBatch, values: np.ndarray, rollouts: int, success_reward: float, rng: np.random.Generator
) -> np.ndarray:
    """`mc_advantage`'s `policy_value` column drawn from its law: per state (`scpo.rollout.branches.state_keys`: task,
    seed, commands before), the mean return of `rollouts` continuations = success_reward Binomial(K, V) / K, with V
    the exact success value of the row's node (`values` per row)."""
    code, states = state_keys(batch)
    first = np.unique(code, return_index=True)[1]
    wins = rng.binomial(rollouts, np.clip(np.asarray(values, dtype=np.float64)[first], 0.0, 1.0))
    return (success_reward * wins / rollouts)[code]


@dataclass
class GradientFidelityResult:
    """Per (batch, estimator) cosines (`per_batch`), their summary per estimator, the exact success per task, the
    norm of the exact panel gradient and the seconds per phase."""

    per_batch: pd.DataFrame
    summary: pd.DataFrame
    success: dict[str, float]
    exact_gradient_norm: float
    seconds: dict[str, float] = field(default_factory=dict)
    reference_reliability: float | None = None  # cos(g_1, g_2) of the sampled reference's halves, when there is one


def summarize_cosines(per_batch: pd.DataFrame, reference: str | None = "grpo", level: float = 0.95) -> pd.DataFrame:
    """Per estimator: the share of batches where its update is zero (`no_update`: every advantage 0, e.g. GRPO on a
    batch whose groups all failed), its mean cosines (`cos_panel`, `cos_tasks`, `cos_sampled`: those present) over all
    batches with their t-intervals, a zero update counting as cosine 0 (it moves nothing toward the objective), and
    the mean paired difference of the first of `cos_panel` / `cos_sampled` from `reference` on the same batches, with
    its t-interval and p (paired t)."""
    cols = [c for c in ("cos_panel", "cos_tasks", "cos_sampled") if c in per_batch]
    headline = next(c for c in ("cos_panel", "cos_sampled") if c in per_batch)
    scored = per_batch.copy()
    zero = scored["norm"] == 0
    scored.loc[zero, cols] = 0.0
    rows = []
    ref = scored[scored["method"] == reference].set_index("batch")[headline] if reference else None
    for method, part in scored.groupby("method", sort=False):
        row = {"method": method, "batches": len(part), "no_update": float((part["norm"] == 0).mean())}
        for col in cols:
            x = part[col].dropna().to_numpy(float)
            row[f"{col}_n"] = len(x)
            row[f"{col}_mean"], row[f"{col}_lo"], row[f"{col}_hi"] = _mean_interval(x, level)
        if ref is not None and method != reference:
            d = (part.set_index("batch")[headline] - ref).dropna().to_numpy(float)
            row["diff_mean"], row["diff_lo"], row["diff_hi"] = _mean_interval(d, level)
            row["diff_p"] = float(stats.ttest_1samp(d, 0.0).pvalue) if len(d) > 1 and np.ptp(d) > 0 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_interval(x: np.ndarray, level: float) -> tuple[float, float, float]:
    if len(x) == 0:
        return (float("nan"),) * 3
    mean = float(np.mean(x))
    if len(x) < 2:
        return mean, float("nan"), float("nan")
    if np.all(x == x[0]):
        return mean, mean, mean
    lo, hi = stats.t.interval(level, len(x) - 1, loc=mean, scale=stats.sem(x))
    return mean, float(lo), float(hi)


def gradient_fidelity(
    policy,
    tasks: Sequence[str],
    methods: Sequence[str] | None = None,
    *,
    env_name: str = "corridor",
    max_steps: int,
    history_length: int,
    n_batches: int = 64,
    n_tasks: int = 4,
    group_size: int = 8,
    temperature: float = 1.0,
    credit: CreditConfig | None = None,
    data_root: str = "data",
    env_options: dict | None = None,
    max_prompt_tokens: int = 1024,
    prompt_overflow: str = "truncate_left",
    seed: int = 0,
    exact: bool | None = None,
    reference_episodes: int = 0,
    reference: str = "grpo",
    progress: bool = True,
) -> GradientFidelityResult:
    """The gradient fidelity of `methods` (default: every registered estimator) on `n_batches` batches of the policy's
    rollouts over the panel `tasks` (module docstring). `exact` (default: whether the environment declares a tabular
    model) compares with the exact gradient (`cos_panel`, `cos_tasks`); `reference_episodes` > 0 also with the
    sampled reference of that many episodes per task (`cos_sampled`, the corrected cosine:
    `scpo.testbeds.sampled_gradient`), which is all there is without a tabular model. A method whose need the
    environment cannot meet (the oracle without a planner, exact values without a tabular model, a learned critic's
    values: PPO, which only the trainer trains) is left out."""
    credit = credit or CreditConfig()
    spec = env_spec(env_name)
    exact = spec.tabular is not None if exact is None else exact
    if exact and spec.tabular is None:
        raise ValueError(f"environment {env_name!r} declares no tabular model: no exact gradient (exact=False)")
    if not exact and reference_episodes <= 0:
        raise ValueError("without the exact gradient a sampled reference is needed: set reference_episodes > 0")
    unmet = {"oracle": spec.oracle_progress is None, "exact_values": not exact, "critic": True}  # no critic here
    methods = [
        m
        for m in (methods or available_methods())
        if not any(getattr(method_spec(m), need) and missing for need, missing in unmet.items())
    ]
    seconds: dict[str, float] = {}

    def timed(name: str, t0: float) -> None:
        seconds[f"{name}_s"] = seconds.get(f"{name}_s", 0.0) + time.perf_counter() - t0

    play = {
        "data_root": data_root,
        "max_steps": max_steps,
        "history_length": history_length,
        "temperature": temperature,
        "env_options": env_options,
    }
    engine = TransformersEngine(
        policy, max_prompt_tokens, 32, batch_size=64, action_choice="admissible", prompt_overflow=prompt_overflow
    )
    table, per_task, panel, success = None, None, None, {}
    if exact:
        t0 = time.perf_counter()
        graph = exact_graph(
            env_name,
            tasks,
            max_steps=max_steps,
            history_length=history_length,
            data_root=data_root,
            env_options=env_options,
        )
        inputs = choice_inputs(policy, graph, max_prompt_tokens, prompt_overflow)
        table = solve(graph, policy_log_probs(policy.model, inputs, temperature, progress), temperature)
        success = dict(zip(graph.tasks, table.success.tolist()))
        timed("exact_values", t0)
        t0 = time.perf_counter()
        per_task = task_gradients(policy, table, max_prompt_tokens, prompt_overflow, progress)
        panel = per_task.mean(0)
        timed("exact_gradient", t0)
    sampled = None
    if reference_episodes > 0:
        t0 = time.perf_counter()
        seed_everything(iteration_seed(seed, -1))
        sampled = sampled_gradient(
            policy, tasks, reference_episodes, env_name=env_name, engine=engine, seed=seed + 10_000, **play
        )
        timed("sampled_reference", t0)

    task_index = {t: k for k, t in enumerate(tasks)}
    rows = []
    for b in tqdm(range(n_batches), desc="gradient fidelity", unit="batch", disable=not progress):
        seed_everything(iteration_seed(seed, b))
        drawn = sample_tasks(list(tasks), n_tasks, seed, b)
        t0 = time.perf_counter()
        trajs, _ = collect_rollouts(
            env_package(env_name), drawn, group_size, engine, env_name=env_name, seed=seed + b, progress=False, **play
        )
        batch = RolloutBatch.from_trajectories(trajs)
        timed("rollouts", t0)
        t0 = time.perf_counter()
        batch = _labelled(batch, table, methods, credit, engine, play, np.random.default_rng([seed, b]))
        timed("labels", t0)
        t0 = time.perf_counter()
        hindsight = None
        if any(method_spec(m).policy_scores for m in methods):
            hindsight = hindsight_logprob(policy, batch, temperature=credit.hcapo.temperature)
        results = estimate(batch, methods, credit, hindsight_logprob=hindsight)
        timed("estimators", t0)
        t0 = time.perf_counter()
        grads = update_gradients(
            policy.model,
            batch,
            {m: r.advantages for m, r in results.items()},
            policy.tokenizer.pad_token_id,
            temperature,
        )
        timed("updates", t0)
        own = per_task[[task_index[t] for t in drawn]].mean(0) if exact else None
        for m, g in grads.items():
            row = {"batch": b, "method": m, "norm": float(np.linalg.norm(g))}
            if exact:
                row.update(cos_panel=cosine(g, panel), cos_tasks=cosine(g, own))
            if sampled is not None:
                row["cos_sampled"] = corrected_cosine(g, sampled)
            row["batch_success"] = float(batch.won[batch.step == 0].mean())
            rows.append(row)
    per_batch = pd.DataFrame(rows)
    return GradientFidelityResult(
        per_batch,
        summarize_cosines(per_batch, reference if reference in methods else None),
        success,
        float(np.linalg.norm(panel)) if exact else float("nan"),
        seconds,
        None if sampled is None else sampled.reliability,
    )


def _labelled(
    batch: RolloutBatch,
    table: ExactTable | None,
    methods: Sequence[str],
    credit: CreditConfig,
    engine,
    play: dict,
    rng: np.random.Generator,
) -> RolloutBatch:
    """`batch` with the columns `methods` need: oracle progress, exact values, Monte-Carlo values (drawn from the
    exact values where there is a table, else played by the branches)."""
    specs = [method_spec(m) for m in methods]
    values = None
    if table is not None:
        node, _ = row_nodes(batch, table.graph)
        values = table.v[node]
    if any(s.exact_values for s in specs):
        batch = batch.with_column("exact_value", values)
    if any(s.policy_values for s in specs):
        k = credit.mc_advantage.rollouts
        if values is not None:
            mc = sampled_policy_values(batch, values, k, credit.success_reward, rng)
        else:
            mc, _ = policy_values(batch, env_package(batch.env), engine, rollouts=k, progress=False, **play)
        batch = batch.with_column("policy_value", mc)
    if any(s.oracle for s in specs):
        batch = env_spec(batch.env).label_progress(batch, play["data_root"])
    return batch
