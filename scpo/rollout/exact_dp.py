"""The exact dynamic programme of a policy's success over an enumerable environment (docs/algorithms.md, "Exact
on-policy ground truth"): the reachable nodes of a task, then, from the policy's action probabilities at every node,
its success values (backward) and its node distribution (forward). Pure numpy over a `PolicyGraph`; the action
probabilities come from `scpo.rollout.exact_values` (the policy's own) or from a test.

**Nodes.** The policy acts on its prompt, `build_prompt(goal, o_t, admissible(s_t), history, t, history_length=H)`:
a function of the step t, the environment state s_t (through its observation and admissible commands) and the last H
(observation, action) pairs. A node is therefore (task, t, s_t, w_t) with the window w_t = ((o_{t-H}, a_{t-H}), ...,
(o_{t-1}, a_{t-1})) (shorter at the start; empty for H = 0), and the policy is a function of the node: the programme
is exact for any history length (for H = 0 a node is (t, s_t)). The nodes are every (t, s, w) reachable from reset by
admissible commands within the budget T: the policy's softmax gives each admissible command a positive probability,
so these are the nodes it reaches with positive probability. An edge is one admissible command of a node: it leads to
a node at t + 1, or ends the episode: a win (value 1), a terminal loss or the budget spent (value 0).

**Values** of the success objective (the probability of winning within the steps left; rewards and their shaping
are not read):

    Q_t(n, a) = 1 if a wins;  0 if it ends the episode otherwise or t + 1 = T;  else V_{t+1}(n')
    V_t(n)    = sum_a pi(a | n) Q_t(n, a)

so V_t(n) = F_{T-t}(s_t) of the issue's notation, F_h(s) = P(win within h steps | s, pi). **Node distribution**:
d_0 = 1 at the task's root, d_{t+1}(n') = sum_{(n, a) -> n'} d_t(n) pi(a | n): the probability that an episode is at
n (still running) at step t.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scpo.envs.tabular import TabularModel

__all__ = ["PolicyGraph", "build_graph", "edge_probabilities", "success_values", "node_distribution"]

PromptBuilder = Callable[
    ..., str
]  # an env package's build_prompt(goal, obs, admissible, history, step, history_length)


@dataclass
class PolicyGraph:
    """The reachable nodes of some tasks within a budget of `horizon` steps (module docstring), flat over tasks.

    Per node (n_nodes): `task` (index into `tasks`), `t`, `state` (the model's), `window` (the last (observation,
    action) pairs), `observation`, `commands` (the admissible commands, the policy's choices in order), `prompt`.
    Per edge (one per (node, command), n_edges, grouped by node in command order): `source` (its node), `action`
    (the command's index in the node's commands), `next` (the node it leads to, -1 when the episode ends), `wins`
    (the command wins). `roots[k]` is task k's node at t = 0, `first_edge[n]` node n's first edge; `index` maps
    (task, t, state, window) to its node.
    """

    tasks: list[str]
    horizon: int
    history_length: int
    task: np.ndarray
    t: np.ndarray
    state: list
    window: list
    observation: list[str]
    commands: list[list[str]]
    prompt: list[str]
    source: np.ndarray
    action: np.ndarray
    next: np.ndarray
    wins: np.ndarray
    roots: np.ndarray
    first_edge: np.ndarray
    index: dict = field(repr=False)

    @property
    def n_nodes(self) -> int:
        return len(self.t)

    @property
    def n_edges(self) -> int:
        return len(self.source)

    def node_of(self, task: int, t: int, state: Hashable, window: tuple) -> int:
        """The node of (task index, t, state, window); KeyError when it is not reachable."""
        return self.index[(task, t, state, window)]

    def edge_of(self, node: int, command: str) -> int:
        """The edge of `command` at `node`; ValueError when the command is not among the node's choices."""
        try:
            k = self.commands[node].index(command)
        except ValueError:
            raise ValueError(
                f"{command!r} is not an admissible command of {self.tasks[self.task[node]]} at step {self.t[node]} "
                f"(those are {self.commands[node]})"
            ) from None
        return int(self.first_edge[node] + k)


def build_graph(
    models: Sequence[TabularModel],
    tasks: Sequence[str],
    horizon: int,
    build_prompt: PromptBuilder,
    history_length: int = 0,
) -> PolicyGraph:
    """Every node reachable in `models` (one per task of `tasks`) from reset by admissible commands within `horizon`
    steps, layer by layer (t = 0, 1, ...); each node's prompt built by `build_prompt` (an env package's)."""
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    if history_length < 0:
        raise ValueError(f"history_length must be >= 0, got {history_length}")
    if len(models) != len(tasks):
        raise ValueError(f"{len(models)} models for {len(tasks)} tasks")
    index: dict = {}
    task, t_of, states, windows = [], [], [], []
    source, action, nxt, wins = [], [], [], []
    roots = []

    def add(k: int, t: int, state, window: tuple) -> int:
        key = (k, t, state, window)
        if key not in index:
            index[key] = len(task)
            task.append(k)
            t_of.append(t)
            states.append(state)
            windows.append(window)
        return index[key]

    for k, model in enumerate(models):
        roots.append(add(k, 0, model.initial(), ()))
        layer = [roots[-1]]
        for t in range(horizon):
            new: dict[int, None] = {}
            for n in layer:
                state, window = states[n], windows[n]
                obs = model.observation(state)
                for j, command in enumerate(model.admissible(state)):
                    after, _, done, won = model.step(state, command)
                    source.append(n)
                    action.append(j)
                    wins.append(bool(won))
                    if done or won or t + 1 == horizon:
                        nxt.append(-1)
                        continue
                    w = (*window, (obs, command))[-history_length:] if history_length else ()
                    m = add(k, t + 1, after, w)
                    nxt.append(m)
                    new[m] = None
            layer = list(new)
    goals = [m.goal for m in models]
    observation = [models[k].observation(s) for k, s in zip(task, states)]
    commands = [models[k].admissible(s) for k, s in zip(task, states)]
    prompt = [
        build_prompt(goals[k], o, c, list(w), t, history_length=history_length)
        for k, o, c, w, t in zip(task, observation, commands, windows, t_of)
    ]
    source_arr = np.asarray(source, dtype=np.int64)
    assert np.all(np.diff(source_arr) >= 0), "edges are added node by node, in node order"
    return PolicyGraph(
        tasks=list(tasks),
        horizon=horizon,
        history_length=history_length,
        task=np.asarray(task, dtype=np.int64),
        t=np.asarray(t_of, dtype=np.int64),
        state=states,
        window=windows,
        observation=observation,
        commands=commands,
        prompt=prompt,
        source=source_arr,
        action=np.asarray(action, dtype=np.int64),
        next=np.asarray(nxt, dtype=np.int64),
        wins=np.asarray(wins, dtype=bool),
        roots=np.asarray(roots, dtype=np.int64),
        first_edge=np.r_[0, np.cumsum(np.bincount(source_arr, minlength=len(task)))[:-1]].astype(np.int64),
        index=index,
    )


def edge_probabilities(graph: PolicyGraph, log_probs: np.ndarray) -> np.ndarray:
    """pi(a | n) per edge from `log_probs` [n_nodes, K] (column k: the node's k-th command; -inf beyond its commands),
    renormalised per node in float64 (a float32 softmax sums to 1 within ~1e-7). ValueError when a node's
    probabilities do not sum to 1 within 1e-5."""
    log_probs = np.asarray(log_probs, dtype=np.float64)
    if log_probs.ndim != 2 or log_probs.shape[0] != graph.n_nodes:
        raise ValueError(f"log_probs must be [n_nodes={graph.n_nodes}, K], got shape {log_probs.shape}")
    p = np.exp(log_probs[graph.source, graph.action])
    total = np.bincount(graph.source, weights=p, minlength=graph.n_nodes)
    bad = np.flatnonzero(~(np.abs(total - 1.0) <= 1e-5))
    if len(bad):
        raise ValueError(f"the action probabilities of node {bad[0]} sum to {total[bad[0]]:.8f}, not 1")
    return p / total[graph.source]


def success_values(graph: PolicyGraph, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """-> (V [n_nodes], Q [n_edges]): the success values of the module docstring, by backward induction over t, from
    the edge probabilities `p` [n_edges]."""
    p = _checked(graph, p)
    v = np.zeros(graph.n_nodes)
    q = np.zeros(graph.n_edges)
    edge_t = graph.t[graph.source]
    for t in range(graph.horizon - 1, -1, -1):
        e = np.flatnonzero(edge_t == t)
        nxt = graph.next[e]
        q[e] = np.where(graph.wins[e], 1.0, np.where(nxt >= 0, v[np.maximum(nxt, 0)], 0.0))
        v += np.bincount(graph.source[e], weights=p[e] * q[e], minlength=graph.n_nodes)
        v = np.minimum(v, 1.0)  # float64 rounding of a sum of probabilities times values <= 1
    return v, q


def node_distribution(graph: PolicyGraph, p: np.ndarray) -> np.ndarray:
    """d [n_nodes]: the probability that an episode of the node's task is at the node (still running) at its step,
    by forward induction from the roots (module docstring), from the edge probabilities `p` [n_edges]."""
    p = _checked(graph, p)
    d = np.zeros(graph.n_nodes)
    d[graph.roots] = 1.0
    edge_t = graph.t[graph.source]
    for t in range(graph.horizon - 1):
        e = np.flatnonzero((edge_t == t) & (graph.next >= 0))
        d += np.bincount(graph.next[e], weights=d[graph.source[e]] * p[e], minlength=graph.n_nodes)
    return d


def _checked(graph: PolicyGraph, p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (graph.n_edges,):
        raise ValueError(f"edge probabilities must have shape ({graph.n_edges},), got {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("edge probabilities must be finite and >= 0")
    return p
