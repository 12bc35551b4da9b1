"""A small softmax policy over an enumerable environment's states (an MLP of the observation's cells), with its exact
success, its exact gradient of success and its rollouts as the suite's `RolloutBatch`: the cheap policy of the
Sokoban learning comparison (experiments/sokoban_learning), where the tiny language model would take hours per run.

    world = TabularWorld.build("sokoban", panel, max_steps=15)        # the panel's reachable (t, state) nodes
    model = mlp_policy(world.n_features, world.n_actions, seed=0)
    table = world.table(model)                   # exact V, Q, d (scpo.rollout.exact_dp); table.success per task
    grad = world.success_gradient(model, table)  # grad J, J = mean success over the panel
    batch, rows = world.rollouts(model, drawn_tasks, group_size=8, seed=3)
    g = world.update_direction(model, batch, rows, advantages)

**The policy.** pi(a | s) = softmax(f_theta(x(s)))_a over the node's commands, x(s) the one-hot of each cell of the
observation's grid (`cell_one_hot`: the observation split on whitespace, one symbol per cell), f_theta an MLP
(`mlp_policy`: Linear - tanh - Linear - tanh - Linear). The input is a function of the state only, so the
programme's graph is built at history length 0 (nodes (t, s)) and the policy does not see the step.

**Exact quantities** come from the dynamic programme of `scpo.rollout.exact_dp` over the graph (`solve`) and
`scpo.testbeds.policy_gradients.success_gradient` (the policy-gradient theorem's surrogate with d and Q held fixed).

**Rollouts** are played on the graph, which is the environment's tabular model (checked against the environment by
`scpo.envs.tabular.check_replay`): at node n the action is drawn from pi(. | n) at temperature 1, the edge gives the
next node, the reward and the next observation (precomputed once per edge from the model's `step`). The batch holds
what `RolloutBatch.from_trajectories` makes of the episodes (a group per task, the trajectories' ids, the
environment's texts and rewards; no prompts or tokens), built from the arrays directly, so every estimator
(`scpo.credit.estimate`) runs on it as in training; `rows` gives each row's node and edge, from which the exact
values and the update are read.

**The update** is the trainer's policy-gradient loss at ratio 1 (`scpo.train.loss.policy_loss`, no KL or entropy
term), one unit per step: g = (1/N) sum_i A_i grad log pi(a_i | s_i), the direction gradient fidelity scores and
the learning comparison steps along (one optimizer step per iteration).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from scpo.batch import RolloutBatch, Trajectory
from scpo.envs.registry import env_package, env_spec
from scpo.rollout.exact_dp import PolicyGraph, build_graph
from scpo.rollout.exact_values import ExactTable, solve
from scpo.testbeds.policy_gradients import success_gradient, trainable
from scpo.train.loss import policy_loss

__all__ = ["sokoban_panel", "cell_one_hot", "mlp_policy", "BatchRows", "TabularWorld"]


def sokoban_panel(size: int, seed: int, min_v_star: float, split: str = "train") -> list[str]:
    """`size` Sokoban rooms of `split` whose optimal plan takes at least `min_v_star` moves, drawn as
    `scpo.envs.panel.task_panel` draws from a split of one task type (a permutation seeded by (seed, 11), its first
    `size`, sorted). About half of the 6x6 one-box rooms take 1-3 moves, which a random policy wins in 15 steps more
    often than not."""
    from scpo.envs import sokoban

    pool = [t for t in sokoban.list_tasks(split) if sokoban.optimal_cost(sokoban.initial_state(t)) >= min_v_star]
    if size > len(pool):
        raise ValueError(f"panel size {size}: only {len(pool)} {split} rooms have V* >= {min_v_star:g}")
    rng = np.random.default_rng([int(seed), 11])
    return sorted(pool[i] for i in rng.permutation(len(pool))[:size])


def cell_one_hot(observation: str, alphabet: Sequence[str]) -> np.ndarray:
    """The one-hot [cells * len(alphabet)] of a grid observation: its whitespace-separated symbols, in order, each
    one-hot over `alphabet`. ValueError naming a symbol outside it."""
    cells = observation.split()
    index = {s: k for k, s in enumerate(alphabet)}
    x = np.zeros((len(cells), len(alphabet)), dtype=np.float32)
    for i, c in enumerate(cells):
        if c not in index:
            raise ValueError(f"grid symbol {c!r} is not in the alphabet {list(alphabet)}")
        x[i, index[c]] = 1.0
    return x.reshape(-1)


def mlp_policy(n_features: int, n_actions: int, hidden: int = 64, seed: int = 0) -> torch.nn.Sequential:
    """f_theta: Linear(n_features, hidden) - tanh - Linear(hidden, hidden) - tanh - Linear(hidden, n_actions), with
    torch's default initialisation drawn from `seed`."""
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return torch.nn.Sequential(
            torch.nn.Linear(n_features, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, n_actions),
        ).double()
    finally:
        torch.random.set_rng_state(gen_state)


@dataclass
class BatchRows:
    """Per row of a rollout batch: the graph node it acted on and the edge it took."""

    node: np.ndarray
    edge: np.ndarray


@dataclass
class TabularWorld:
    """The reachable (t, state) nodes of some tasks (`graph`, history length 0); the input of each distinct
    observation (`features`, float64) and each node's row in it (`node_row`); the number of commands per node; per
    edge the reward, the next observation and whether the episode ends there (`done`: a win, a terminal loss or the
    budget spent)."""

    env_name: str
    graph: PolicyGraph
    features: torch.Tensor
    node_row: np.ndarray
    n_commands: np.ndarray
    edge_reward: np.ndarray
    edge_next_observation: list[str]
    edge_done: np.ndarray
    task_types: list[str]
    alphabet: tuple[str, ...]
    features_of: Callable[[str, Sequence[str]], np.ndarray] = cell_one_hot

    @classmethod
    def build(
        cls,
        env_name: str,
        tasks: Sequence[str],
        *,
        max_steps: int,
        alphabet: Sequence[str],
        data_root: str = "data",
        env_options: dict | None = None,
        features_of: Callable[[str, Sequence[str]], np.ndarray] = cell_one_hot,
    ) -> TabularWorld:
        """The world of `tasks` of `env_name` (its declared tabular model) within `max_steps`; inputs
        `features_of(observation, alphabet)`."""
        spec = env_spec(env_name)
        if spec.tabular is None:
            raise ValueError(f"environment {env_name!r} declares no tabular model")
        models = [spec.tabular_model(t, data_root=data_root, **(env_options or {})) for t in tasks]
        graph = build_graph(models, list(tasks), max_steps, env_package(env_name).build_prompt, history_length=0)
        distinct = {o: k for k, o in enumerate(dict.fromkeys(graph.observation))}
        features = torch.as_tensor(np.stack([features_of(o, alphabet) for o in distinct]), dtype=torch.float64)
        node_row = np.asarray([distinct[o] for o in graph.observation])
        reward = np.zeros(graph.n_edges)
        next_obs = []
        for e in range(graph.n_edges):
            n = int(graph.source[e])
            model = models[int(graph.task[n])]
            after, r, _, _ = model.step(graph.state[n], graph.commands[n][int(graph.action[e])])
            reward[e] = r
            next_obs.append(model.observation(after))
        package = env_package(env_name)
        types = [package.task_type(t, data_root=data_root) for t in tasks]
        return cls(
            env_name,
            graph,
            features,
            node_row,
            np.asarray([len(c) for c in graph.commands]),
            reward,
            next_obs,
            graph.next < 0,
            types,
            tuple(alphabet),
            features_of,
        )

    def encode(self, observations: Sequence[str]) -> torch.Tensor:
        """The policy's inputs [len(observations), n_features] of any observations (e.g. demonstrations')."""
        return torch.as_tensor(
            np.stack([self.features_of(o, self.alphabet) for o in observations]), dtype=torch.float64
        )

    @property
    def n_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def n_actions(self) -> int:
        return int(self.n_commands.max())

    def log_probs(self, model: torch.nn.Module, nodes: Sequence[int] | np.ndarray | None = None) -> torch.Tensor:
        """log pi [len(nodes), K] at `nodes` (default every node), -inf beyond a node's commands; each distinct
        input through the model once."""
        if nodes is None:
            nodes = np.arange(self.graph.n_nodes)
            logits = model(self.features)[torch.as_tensor(self.node_row)]
        else:
            nodes = np.asarray(nodes)
            rows, inverse = np.unique(self.node_row[nodes], return_inverse=True)
            logits = model(self.features[torch.as_tensor(rows)])[torch.as_tensor(inverse)]
        k = torch.as_tensor(self.n_commands[nodes])
        beyond = torch.arange(logits.shape[1])[None, :] >= k[:, None]
        return torch.log_softmax(logits.masked_fill(beyond, float("-inf")), dim=-1)

    def table(self, model: torch.nn.Module) -> ExactTable:
        """The policy's exact solution on the graph (V, Q, d; `success` per task)."""
        with torch.no_grad():
            return solve(self.graph, self.log_probs(model).numpy())

    def success_gradient(
        self, model: torch.nn.Module, table: ExactTable, tasks: Sequence[int] | None = None
    ) -> np.ndarray:
        """grad of J = the mean success over `tasks` (task indices; default every task), flat over the model's
        parameters (float64)."""
        return success_gradient(table, lambda rows: self.log_probs(model, rows), trainable(model), tasks=tasks)

    def rollouts(
        self, model: torch.nn.Module, tasks: Sequence[str], group_size: int, seed: int
    ) -> tuple[RolloutBatch, BatchRows]:
        """`group_size` episodes of each of `tasks` (a group per task, group seed `seed`), actions drawn with
        numpy's generator seeded by `seed`; the batch and each row's node and edge."""
        graph = self.graph
        index = {t: k for k, t in enumerate(graph.tasks)}
        with torch.no_grad():
            cum = self.log_probs(model).exp().cumsum(dim=1).numpy()
        rng = np.random.default_rng(seed)
        task_of = np.repeat([index[t] for t in tasks], group_size)
        node = graph.roots[task_of].copy()
        path_nodes, path_edges = [], []
        running = np.ones(len(node), dtype=bool)
        while running.any():  # one step of every running episode: the inverse-CDF draw of pi(. | n)
            live = np.flatnonzero(running)
            u = rng.random(len(live)) * cum[node[live], self.n_commands[node[live]] - 1]
            a = np.minimum((u[:, None] >= cum[node[live]]).sum(1), self.n_commands[node[live]] - 1)
            edge = np.full(len(node), -1)
            edge[live] = graph.first_edge[node[live]] + a
            path_nodes.append(node.copy())
            path_edges.append(edge)
            running[live] = ~self.edge_done[edge[live]]
            node = np.where(running, graph.next[np.maximum(edge, 0)], node)
        path_nodes, path_edges = np.stack(path_nodes, 1), np.stack(path_edges, 1)
        taken = path_edges >= 0
        nodes, edges = path_nodes[taken], path_edges[taken]  # row-major: trajectory by trajectory, in step order
        lengths = taken.sum(1)
        traj = np.repeat(np.arange(len(task_of)), lengths)
        won = graph.wins[path_edges[np.arange(len(task_of)), lengths - 1]]
        heads = [
            Trajectory(graph.tasks[k], seed, j % group_size, [], env_name=self.env_name)
            for j, k in enumerate(task_of.tolist())
        ]
        g_uid, t_uid = [h.group_uid for h in heads], [h.traj_uid for h in heads]
        codes: dict[str, int] = {}
        group = np.asarray([codes.setdefault(g, len(codes)) for g in g_uid])  # first appearance, as from_trajectories
        batch = RolloutBatch.from_columns(
            group_id=group[traj],
            traj_id=traj,
            step=np.concatenate([np.arange(n) for n in lengths]),
            reward=self.edge_reward[edges],
            done=self.edge_done[edges],
            won=won[traj],
            task_score=won[traj].astype(np.float64),
            seed=np.full(len(traj), seed),
            observation=[graph.observation[n] for n in nodes],
            action=[graph.commands[n][graph.action[e]] for n, e in zip(nodes, edges)],
            next_observation=[self.edge_next_observation[e] for e in edges],
            group_uid=[g_uid[j] for j in traj],
            traj_uid=[t_uid[j] for j in traj],
            task_id=[graph.tasks[task_of[j]] for j in traj],
            task_type=[self.task_types[task_of[j]] for j in traj],
            env_name=[self.env_name] * len(traj),
        )
        return batch, BatchRows(nodes, edges)

    def policy_loss(self, model: torch.nn.Module, rows: BatchRows, advantages: np.ndarray) -> torch.Tensor:
        """The trainer's policy-gradient loss at ratio 1 on the batch (module docstring)."""
        logp = self.log_probs(model, rows.node)
        taken = logp.gather(1, torch.as_tensor(self.graph.action[rows.edge])[:, None])
        adv = torch.as_tensor(np.asarray(advantages, dtype=np.float64))
        loss, _ = policy_loss(
            taken, taken.detach(), None, adv, torch.ones_like(taken), None, clip_ratio=0.2, kl_coef=0.0, entropy_coef=0
        )
        return loss

    def update_direction(
        self, model: torch.nn.Module, rows: BatchRows, advantages: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """{method: g}: the ascent direction of the loss for each method's advantages, flat (float64)."""
        params = trainable(model)
        out = {}
        for m, adv in advantages.items():
            grads = torch.autograd.grad(self.policy_loss(model, rows, adv), params, allow_unused=True)
            out[m] = -torch.cat(
                [(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)]
            ).numpy()
        return out
