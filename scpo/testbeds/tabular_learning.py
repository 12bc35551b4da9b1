"""Gradient fidelity and learning runs of the small softmax policy of `scpo.testbeds.tabular_policy` on an enumerable
environment (Sokoban), every estimator on the suite's `RolloutBatch` through `scpo.credit.estimate`, success
measured exactly by dynamic programming (experiments/sokoban_learning; docs/algorithms.md, "Gradient fidelity").

    model = mlp_policy(world.n_features, world.n_actions, seed=s)
    imitate(world, model, demos, epochs=40)                  # the warm start: cross-entropy on expert (obs, move)
    per_batch = fidelity(world, model, methods, credit, n_batches=64)      # cosines with the exact grad J
    curve = learn(world, model, "grpo", credit, iterations=200, lr=3e-3, seed=s)

**An iteration** (`learn`) is the trainer's: `n_tasks` tasks drawn from the panel (`scpo.train.collect.sample_tasks`
with the run's seed and the iteration), `group_size` episodes of each by the current policy, the method's advantages
on the batch (with the columns it needs: the exact values V^pi(s_t) for `exact_advantage`, K Monte-Carlo
continuations drawn from their law for `mc_advantage` (`scpo.testbeds.gradient_fidelity.sampled_policy_values`), the
planner's progress for the V* oracle), and one Adam step on the trainer's policy-gradient loss at ratio 1
(`TabularWorld.policy_loss`). The panel's success J (the mean over its tasks of the probability of winning within the
budget at temperature 1: sampled success, computed exactly) is recorded before the first iteration, every
`eval_every` iterations and after the last. Within a seed every method starts from the same weights and draws its
first batch with the same tasks and random stream, so runs are paired by seed.

**PPO** (`PPO`) is trained with a learned critic (`scpo.testbeds.tabular_critic.TabularCritic`): each iteration its
advantages are GAE from the critic's values of the batch's states read before the critic trains on the batch, then
the critic takes its value-loss steps and the policy its step. Along a run, `probe_methods` score the run's own batch at
each evaluation (`probe_batch`): PPO's update beside the other methods' on the same episodes of the same policy, and
the correlation of each method's advantages with the exact advantage A^pi(s_t, a_t).

**Gradient fidelity** (`fidelity`): per batch of the fixed policy, the cosine of each method's update with grad J of
the panel (`cos_panel`) and with the exact gradient of the batch's own tasks (`cos_tasks`), as
`scpo.testbeds.gradient_fidelity` measures the language-model policy (`summarize_cosines` summarises both); beside
the methods, the row `exact_batch_gradient` is that exact gradient of the drawn tasks itself, whose `cos_panel` is
the most any update from those tasks' episodes can reach (`room_gradient_cosines` says why it is low where rooms
share little).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, estimate
from scpo.credit.registry import method_spec
from scpo.envs.registry import env_spec
from scpo.rollout.exact_values import ExactTable
from scpo.testbeds.gradient_fidelity import sampled_policy_values
from scpo.testbeds.policy_gradients import cosine, trainable
from scpo.testbeds.tabular_critic import PPO, TabularCritic, value_error, value_fit
from scpo.testbeds.tabular_policy import BatchRows, TabularWorld
from scpo.train.collect import sample_tasks

__all__ = [
    "EXACT_BATCH",
    "PPO",
    "method_advantages",
    "imitate",
    "fidelity",
    "learn",
    "probe_batch",
    "room_gradient_cosines",
]

EXACT_BATCH = "exact_batch_gradient"  # fidelity's reference row: the exact gradient of the batch's drawn tasks


def method_advantages(
    world: TabularWorld,
    batch: RolloutBatch,
    rows: BatchRows,
    table: ExactTable | None,
    methods: Sequence[str],
    credit: CreditConfig,
    rng: np.random.Generator,
    data_root: str = "data",
) -> dict[str, np.ndarray]:
    """{method: advantages per row} on `batch`, with the columns the methods need labelled from `table` (the
    policy's exact solution; only the methods that read values need it) and the environment's planner (module
    docstring)."""
    specs = [method_spec(m) for m in methods]
    values = None if table is None else table.v[rows.node]
    if any(s.exact_values for s in specs):
        batch = batch.with_column("exact_value", values)
    if any(s.policy_values for s in specs):
        k = credit.mc_advantage.rollouts
        batch = batch.with_column("policy_value", sampled_policy_values(batch, values, k, credit.success_reward, rng))
    if any(s.oracle for s in specs):
        batch = env_spec(world.env_name).label_progress(batch, data_root)
    return {m: r.advantages for m, r in estimate(batch, list(methods), credit).items()}


def imitate(
    world: TabularWorld, model: torch.nn.Module, demos: Sequence[tuple[str, str]], epochs: int, lr: float = 1e-3
) -> list[float]:
    """Behaviour cloning: `epochs` full-batch Adam steps of the cross-entropy of the demonstrated commands
    (`demos`: (observation, command) pairs; the commands as the world lists them at every node) -> the losses."""
    commands = list(world.graph.commands[0])
    x = world.encode([o for o, _ in demos])
    y = torch.as_tensor([commands.index(a) for _, a in demos])
    opt = torch.optim.Adam(trainable(model), lr=lr)
    losses = []
    for _ in range(epochs):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def fidelity(
    world: TabularWorld,
    model: torch.nn.Module,
    methods: Sequence[str],
    credit: CreditConfig,
    *,
    n_batches: int = 64,
    n_tasks: int = 4,
    group_size: int = 8,
    seed: int = 0,
    data_root: str = "data",
) -> pd.DataFrame:
    """Per (batch, method): the update's norm and its cosines with grad J of the panel and of the batch's tasks."""
    table = world.table(model)
    panel = world.success_gradient(model, table)
    per_task = {k: world.success_gradient(model, table, [k]) for k in range(len(world.graph.tasks))}
    index = {t: k for k, t in enumerate(world.graph.tasks)}
    rows_out = []
    for b in range(n_batches):
        drawn = sample_tasks(list(world.graph.tasks), n_tasks, seed, b)
        batch, rows = world.rollouts(model, drawn, group_size, seed=_stream(seed, b))
        adv = method_advantages(
            world, batch, rows, table, methods, credit, np.random.default_rng([seed, b, 1]), data_root
        )
        own = np.mean([per_task[index[t]] for t in drawn], axis=0)
        success = float(batch.won[batch.step == 0].mean())
        updates = world.update_direction(model, rows, adv)
        updates[EXACT_BATCH] = own  # the best a batch of these tasks can do for the panel (cos_tasks 1)
        for m, g in updates.items():
            rows_out.append(
                {
                    "batch": b,
                    "method": m,
                    "norm": float(np.linalg.norm(g)),
                    "cos_panel": cosine(g, panel),
                    "cos_tasks": cosine(g, own),
                    "batch_success": success,
                }
            )
    return pd.DataFrame(rows_out)


def room_gradient_cosines(world: TabularWorld, model: torch.nn.Module) -> np.ndarray:
    """The cosines between the exact success gradients of the world's tasks, pair by pair (the off-diagonal of the
    [K, K] matrix, row by row): near 0 when what the policy learns for one room does not move its success on another."""
    table = world.table(model)
    grads = np.stack([world.success_gradient(model, table, [k]) for k in range(len(world.graph.tasks))])
    unit = grads / np.linalg.norm(grads, axis=1, keepdims=True)
    cos = unit @ unit.T
    return cos[~np.eye(len(cos), dtype=bool)]


def learn(
    world: TabularWorld,
    model: torch.nn.Module,
    method: str,
    credit: CreditConfig,
    *,
    iterations: int,
    lr: float,
    n_tasks: int = 4,
    group_size: int = 8,
    seed: int = 0,
    eval_every: int = 10,
    data_root: str = "data",
    critic: TabularCritic | None = None,
    probe_methods: Sequence[str] = (),
    probes: list[dict] | None = None,
) -> pd.DataFrame:
    """Train `model` in place with `method` for `iterations` iterations (module docstring) -> the curve: iteration,
    exact panel success (sampled, temperature 1), and the batch's share of won episodes (NaN at the last point).

    `method` "ppo" takes its values from `critic` (required), which trains on each batch after its values are read
    (`scpo.testbeds.tabular_critic`): the curve then holds, per evaluation, the critic's `value_fit` and `value_error`
    against the policy's
    exact values. With `probe_methods`, at each evaluation but the last the run's own batch is scored
    (`probe_batch`: `method` and `probe_methods` side by side) and the records are appended to `probes`."""
    opt = torch.optim.Adam(trainable(model), lr=lr)
    tasks = list(world.graph.tasks)
    if (method == PPO) != (critic is not None):
        raise ValueError(f"method {method!r} with critic={critic!r}: a critic is what ppo needs, and ppo only")
    spec = None if method == PPO else method_spec(method)
    needs_table = spec is not None and (spec.exact_values or spec.policy_values)
    curve = []
    for it in range(iterations + 1):
        evaluate = it % eval_every == 0 or it == iterations
        table = world.table(model) if evaluate or needs_table else None
        if evaluate:
            curve.append({"iteration": it, "success": float(table.success.mean()), "batch_success": float("nan")})
            if critic is not None:
                curve[-1]["value_fit"] = value_fit(critic, table, credit.success_reward)
                curve[-1]["value_error"] = value_error(critic, table, credit.success_reward)
        if it == iterations:
            break
        drawn = sample_tasks(tasks, n_tasks, seed, it)
        batch, rows = world.rollouts(model, drawn, group_size, seed=_stream(seed, it))
        if critic is not None:
            ppo = critic.advantages(batch, rows, credit)
            adv = {PPO: ppo.advantages}
        else:
            adv = method_advantages(
                world, batch, rows, table, [method], credit, np.random.default_rng([seed, it, 1]), data_root
            )
        if it % eval_every == 0:
            curve[-1]["batch_success"] = float(batch.won[batch.step == 0].mean())
            if probe_methods and probes is not None:
                others = method_advantages(
                    world,
                    batch,
                    rows,
                    table,
                    [m for m in probe_methods if m != method],
                    credit,
                    np.random.default_rng([seed, it, 2]),
                    data_root,
                )
                scored = probe_batch(world, model, table, rows, drawn, adv | others)
                probes.extend(r | {"iteration": it} for r in scored)
        if critic is not None:
            critic.fit(rows, ppo)
        loss = world.policy_loss(model, rows, adv[method])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return pd.DataFrame(curve)


def probe_batch(
    world: TabularWorld,
    model: torch.nn.Module,
    table: ExactTable,
    rows: BatchRows,
    drawn: Sequence[str],
    advantages: dict[str, np.ndarray],
) -> list[dict]:
    """Per method on one batch of the current policy: the update's norm, its cosines with grad J of the panel
    (`cos_panel`) and of the batch's drawn tasks (`cos_tasks`), and the Pearson correlation of its advantages with
    the exact on-policy advantage A^pi(s_t, a_t) of the batch's steps (`corr_exact`; NaN where either is constant; a
    whitening does not change it)."""
    index = {t: k for k, t in enumerate(world.graph.tasks)}
    panel = world.success_gradient(model, table)
    own = world.success_gradient(model, table, sorted({index[t] for t in drawn}))
    exact = table.advantage[rows.edge]
    out = []
    for m, g in world.update_direction(model, rows, advantages).items():
        a = np.asarray(advantages[m], dtype=np.float64)
        corr = float(np.corrcoef(a, exact)[0, 1]) if np.ptp(a) > 0 and np.ptp(exact) > 0 else float("nan")
        out.append(
            {
                "method": m,
                "norm": float(np.linalg.norm(g)),
                "cos_panel": cosine(g, panel),
                "cos_tasks": cosine(g, own),
                "corr_exact": corr,
            }
        )
    return out


def _stream(seed: int, iteration: int) -> int:
    """The rollouts' random stream of (seed, iteration): the same for every method at the same seed."""
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0])
