"""The gradient of success estimated from the policy's own episodes, for gradient fidelity where the states cannot be
enumerated (ALFWorld, WebShop; docs/algorithms.md, "Gradient fidelity without enumeration").

**The reference.** For each panel task k, M independent episodes of the policy from reset, w_i = 1[episode i won]:

    g_hat = (1/K) sum_k (1/M) sum_i (w_i - b_{-i}) sum_t grad log pi(a_t | x_t),    b_{-i} = mean of the other w_j

(REINFORCE with a leave-one-out baseline: the baseline does not depend on episode i, so E[g_hat] = grad J exactly,
J the mean success over the panel). It is computed with the trainer's own log-probabilities
(`scpo.testbeds.gradient_fidelity.update_gradients`), as two independent halves g_1, g_2 (M/2 episodes each).

**The corrected cosine.** The noise of g_hat makes the plain cos(g, g_hat) smaller than cos(g, grad J). With g, g_1
and g_2 independent, <g, (g_1 + g_2)/2> estimates <g, grad J> without bias and <g_1, g_2> estimates |grad J|^2
without bias (E<g_1, g_2> = <E g_1, E g_2>), so

    cos*(g) = <g, (g_1 + g_2)/2> / (|g| sqrt(<g_1, g_2>))

estimates cos(g, grad J) consistently (a ratio of unbiased estimates: it can leave [-1, 1] when the reference is
noisy). `reliability` = cos(g_1, g_2) says how noisy: near 1 the reference is nearly exact; near 0 (or below) it
carries no direction and cos* is undefined (NaN where <g_1, g_2> <= 0). Tested on the corridor against the exact
gradient (tests/analysis/test_gradient_fidelity.py).

**Values.** `mc_advantage`'s values come from the branches (`scpo.rollout.branches`: K continuations per visited
state); for the success objective each continuation's return is R_success or 0, so a value's standard error follows
from its own estimate: `value_standard_error`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scpo.batch import RolloutBatch
from scpo.envs.registry import env_package
from scpo.rollout import collect_rollouts
from scpo.testbeds.policy_gradients import update_gradients

__all__ = ["SampledGradient", "leave_one_out_success", "sampled_gradient", "corrected_cosine", "value_standard_error"]


def leave_one_out_success(batch: RolloutBatch) -> np.ndarray:
    """Per row, w_i - b_{-i}: its trajectory's success minus the mean success of the other trajectories of its group
    (ValueError for a group of one trajectory: it has no baseline)."""
    first = np.r_[True, batch.traj_id[1:] != batch.traj_id[:-1]]
    groups, per_traj = batch.group_id[first], batch.won[first].astype(np.float64)
    size = np.bincount(groups)
    if np.any(size[np.unique(groups)] < 2):
        raise ValueError("a leave-one-out baseline needs at least 2 episodes per task")
    total = np.bincount(groups, weights=per_traj)
    adv = per_traj - (total[groups] - per_traj) / (size[groups] - 1)
    return adv[np.cumsum(first) - 1]


@dataclass
class SampledGradient:
    """The two halves g_1, g_2 of the reference (flat over the trainable parameters) and their episodes' count."""

    halves: tuple[np.ndarray, np.ndarray]
    episodes_per_task: int

    @property
    def mean(self) -> np.ndarray:
        return (self.halves[0] + self.halves[1]) / 2

    @property
    def reliability(self) -> float:
        """cos(g_1, g_2)."""
        a, b = self.halves
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def sampled_gradient(
    policy,
    tasks: Sequence[str],
    episodes_per_task: int,
    *,
    env_name: str,
    engine,
    max_steps: int,
    history_length: int,
    temperature: float = 1.0,
    data_root: str = "data",
    env_options: dict | None = None,
    seed: int = 0,
) -> SampledGradient:
    """The reference of the module docstring: `episodes_per_task` (even, >= 4) episodes of each task by `engine` (the
    policy's sampler), in two independent halves."""
    if episodes_per_task < 4 or episodes_per_task % 2:
        raise ValueError(f"episodes_per_task must be even and >= 4 (two halves of >= 2), got {episodes_per_task}")
    halves = []
    for half in range(2):
        trajs, _ = collect_rollouts(
            env_package(env_name),
            list(tasks),
            episodes_per_task // 2,
            engine,
            env_name=env_name,
            seed=seed + half,
            data_root=data_root,
            max_steps=max_steps,
            history_length=history_length,
            temperature=temperature,
            env_options=env_options,
            progress=False,
        )
        batch = RolloutBatch.from_trajectories(trajs)
        # update_gradients gives (1/N) sum_rows A grad log pi: scaled to (1/K)(1/M) sum over episodes
        scale = batch.n_rows / (len(tasks) * (episodes_per_task // 2))
        adv = leave_one_out_success(batch) * scale
        halves.append(
            update_gradients(policy.model, batch, {"g": adv}, policy.tokenizer.pad_token_id, temperature)["g"]
        )
    return SampledGradient((halves[0], halves[1]), episodes_per_task)


def corrected_cosine(g: np.ndarray, reference: SampledGradient) -> float:
    """cos*(g) of the module docstring; NaN when g is 0 or <g_1, g_2> <= 0."""
    g1, g2 = reference.halves
    norm2 = float(g1 @ g2)
    ng = float(np.linalg.norm(g))
    if norm2 <= 0 or ng == 0:
        return float("nan")
    return float(g @ reference.mean / (ng * np.sqrt(norm2)))


def value_standard_error(values: np.ndarray, rollouts: int, success_reward: float) -> np.ndarray:
    """The standard error of Monte-Carlo success values (`policy_value`, the mean return of `rollouts` continuations,
    each R_success or 0): R sqrt(p (1 - p) / (K - 1)) with p = V / R, the unbiased variance of a Bernoulli mean (0
    when every continuation agreed, which K = 2 makes common: a bound from so few draws is no bound)."""
    if rollouts < 2:
        raise ValueError(f"a standard error needs at least 2 continuations per state, got {rollouts}")
    p = np.asarray(values, dtype=np.float64) / success_reward
    return success_reward * np.sqrt(p * (1 - p) / (rollouts - 1))
