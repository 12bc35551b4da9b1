"""PPO's learned critic for the small softmax policy of `scpo.testbeds.tabular_policy`: a value network over the same
input as the policy, its values V(s_t) for PPO's turn-level GAE (`scpo.credit.ppo`), and its clipped value loss
(`scpo.policy.critic.clipped_value_loss`). Spec: docs/algorithms.md, "PPO on the Sokoban policy".

    critic = TabularCritic.from_policy(world, model, CriticOptions(lr=1e-2))
    result = critic.advantages(batch, rows, credit)     # V(s_t) before the critic trains on the batch; GAE; whitened
    stats = critic.fit(rows, result)                   # epochs x one full-batch Adam step on L_V; -> value loss, ...

**The network** is separate from the policy: a copy of the policy's trunk (every layer but its last: 252-64-64, tanh)
with `scpo.policy.critic.ValueHead` (Linear(64, 1) at zero weight and bias: an untrained critic predicts V = 0),
its own Adam. verl-agent's PPO recipe does the same with a language model (a critic model initialised from the actor's
base); a value head on the policy's own trunk would add the value loss's gradient to the policy's parameters, and the
policy's update would no longer be the policy-gradient step every other estimator of the benchmark takes.

**An iteration** (verl's order): V_old(s_t) = critic(x(s_t)) on the batch's rows, before any update; PPO's
advantages and returns from them (the registry's `ppo`, `scpo.credit.ppo`, the values as the batch's `critic_value`:
r_t the environment's reward minus the invalid penalty, delta_t = r_t + gamma V_old(s_{t+1}) (1 - done_t) -
V_old(s_t), A_t = sum_l (gamma lambda)^l delta_{t+l}, G_t = A_t + V_old(s_t), A whitened over the batch's steps: the
tabular batch has no tokens); then `epochs` full-batch Adam steps of the clipped value loss

    L_V = 1/2 mean_t max((V(s_t) - G_t)^2, (clip(V(s_t), V_old(s_t) - c, V_old(s_t) + c) - G_t)^2)   (c = 0.5)

(verl's `compute_value_loss`, one weight per turn). Recorded per iteration: L_V (the mean over the steps, verl's
`critic/vf_loss`), the clipped share, and the explained variance of G by V_old on the batch (verl's
`critic/vf_explained_var`). `value_fit` scores the critic against the policy's exact values instead: on the panel's
nodes weighted by their visitation, the explained variance of R V^pi (R the success reward: the only reward of the
environment) by V.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch

from scpo.batch import RolloutBatch
from scpo.credit import estimate
from scpo.credit.result import CreditResult
from scpo.policy.critic import ValueHead, clipped_value_loss
from scpo.rollout.exact_values import ExactTable
from scpo.testbeds.tabular_policy import BatchRows, TabularWorld

__all__ = ["PPO", "CriticOptions", "TabularCritic", "value_fit", "value_error"]

PPO = "ppo"  # the registry's estimator, its values the batch's critic_value column

RETURNS_VARY = 1e-9  # relative spread of a batch's returns above which they differ by more than rounding


@dataclass(frozen=True)
class CriticOptions:
    """The tabular critic's training (module docstring): its own Adam learning rate `lr`, `epochs` full-batch steps of
    the value loss per iteration, verl's `cliprange_value` (verl-agent's PPO recipe: 0.5), GAE's `gamma` and `lam`
    (verl's algorithm.gamma / algorithm.lam)."""

    lr: float = 1e-2
    epochs: int = 1
    cliprange_value: float = 0.5
    gamma: float = 1.0
    lam: float = 1.0

    def __post_init__(self) -> None:
        if not (self.lr > 0 and self.epochs >= 1 and self.cliprange_value > 0):
            raise ValueError(
                f"CriticOptions needs lr > 0, epochs >= 1 and cliprange_value > 0, got lr={self.lr}, "
                f"epochs={self.epochs}, cliprange_value={self.cliprange_value}"
            )
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1):
            raise ValueError(f"CriticOptions: gamma={self.gamma} and lam={self.lam} must lie in [0, 1]")


@dataclass
class TabularCritic:
    """A value network on `world`'s inputs, its optimizer and options, and one record per `fit` (`history`)."""

    world: TabularWorld
    net: torch.nn.Module
    options: CriticOptions
    optimizer: torch.optim.Optimizer
    history: list[dict] = field(default_factory=list)

    @classmethod
    def from_policy(cls, world: TabularWorld, policy: torch.nn.Sequential, options: CriticOptions) -> TabularCritic:
        """A copy of `policy`'s trunk (all its layers but the last) under a zero-initialised `ValueHead`."""
        trunk = copy.deepcopy(policy[:-1])
        head = ValueHead(policy[-1].in_features).to(policy[-1].weight.dtype)
        net = torch.nn.Sequential(trunk, head)
        return cls(world, net, options, torch.optim.Adam(net.parameters(), lr=options.lr))

    def value_tensor(self, nodes: np.ndarray) -> torch.Tensor:
        """V(s) [len(nodes)] of the graph's `nodes`, with gradients."""
        return self.net(self.world.features[torch.as_tensor(self.world.node_row[np.asarray(nodes)])])

    def values(self, nodes: np.ndarray) -> np.ndarray:
        """V(s) of the graph's `nodes` (float64, no gradient)."""
        with torch.no_grad():
            return self.value_tensor(nodes).numpy().astype(np.float64)

    def advantages(self, batch: RolloutBatch, rows: BatchRows, credit) -> CreditResult:
        """PPO's credit on `batch` from the critic's current values (module docstring); `credit` the credit options
        (their invalid penalty). The CreditResult's `returns` are G_t, its diagnostic "value" V_old(s_t)."""
        values = self.values(rows.node)
        options = {"gamma": self.options.gamma, "lam": self.options.lam, "whiten": "steps"}
        return estimate(batch.with_column("critic_value", values), [PPO], credit, options={PPO: options})[PPO]

    def fit(self, rows: BatchRows, result: CreditResult) -> dict[str, float]:
        """`epochs` Adam steps of L_V towards `result.returns`, clipped around `result`'s values (module docstring);
        -> and appended to `history`: value_loss (mean over the steps), clipfrac (likewise), explained_variance, and
        whether the batch's returns vary beyond rounding (G = A + V of an all-zero-reward batch is 0 only up to
        rounding; there the explained variance is about -var(A) / 1e-5: no signal)."""
        returns = torch.as_tensor(result.returns, dtype=torch.float64)
        old = torch.as_tensor(result.diagnostics["value"], dtype=torch.float64)
        losses, clipped = [], []
        for _ in range(self.options.epochs):
            loss, clipfrac = clipped_value_loss(
                self.value_tensor(rows.node), returns, old, self.options.cliprange_value
            )
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            losses.append(float(loss.detach()))
            clipped.append(float(clipfrac))
        record = {
            "value_loss": float(np.mean(losses)),
            "clipfrac": float(np.mean(clipped)),
            "explained_variance": float(result.stats["value_explained_variance"]),
            "returns_vary": bool(np.ptp(result.returns) > RETURNS_VARY * max(1.0, np.abs(result.returns).max())),
        }
        self.history.append(record)
        return record


def value_error(critic: TabularCritic, table: ExactTable, success_reward: float) -> float:
    """The root mean square of R V^pi(n) - V(n) over the graph's nodes weighted by the policy's node distribution d, in
    reward units: the critic's error on the on-policy states, whatever the spread of the values (`value_fit`)."""
    w = table.d / table.d.sum()
    return float(np.sqrt(w @ (success_reward * table.v - critic.values(np.arange(len(table.v)))) ** 2))


def value_fit(critic: TabularCritic, table: ExactTable, success_reward: float) -> float:
    """The explained variance of R V^pi(n) by the critic's V(n) over the graph's nodes, weighted by the policy's node
    distribution d (the on-policy states): 1 - sum d (R V^pi - V)^2 / sum d (R V^pi - mean_d R V^pi)^2."""
    target = success_reward * table.v
    w = table.d / table.d.sum()
    v = critic.values(np.arange(len(table.v)))
    spread = float(w @ (target - w @ target) ** 2)
    return float(1.0 - (w @ (target - v) ** 2) / spread) if spread > 0 else float("nan")
