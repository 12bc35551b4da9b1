"""The exact on-policy values (`scpo.rollout.exact_dp`, `scpo.rollout.exact_values`): the dynamic programme worked by
hand on a toy with fixed probabilities, the policy's probabilities equal to the sampler's, and the values of the
project's tiny policy on the corridor against Monte-Carlo rollouts of the same policy (99% binomial intervals)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import binomtest

from scpo.batch import RolloutBatch
from scpo.envs import corridor
from scpo.rollout import TransformersEngine, collect_rollouts
from scpo.rollout.exact_dp import build_graph, edge_probabilities, node_distribution, success_values
from scpo.rollout.exact_values import exact_table, exact_values, row_nodes, solve

from helpers.tiny_policy import corridor_policy


class Toy:
    """Two states: in A `left` stays, `right` moves to B; in B `back` returns to A, `win` wins, `fall` loses."""

    goal = "toy"

    def initial(self):
        return "A"

    def admissible(self, s):
        return ["left", "right"] if s == "A" else ["back", "win", "fall"]

    def step(self, s, a):
        if s == "A":
            return ("A" if a == "left" else "B"), 0.0, False, False
        return {"back": ("A", 0.0, False, False), "win": ("W", 10.0, True, True), "fall": ("F", 0.0, True, False)}[a]

    def observation(self, s):
        return f"at {s}"


def toy_prompt(goal, observation, admissible, history, step, history_length=0):
    return f"{step} | {observation} | {history}"


PI = {"A": [0.4, 0.6], "B": [0.3, 0.5, 0.2]}  # left, right | back, win, fall


def _toy(horizon: int, history_length: int = 0):
    graph = build_graph([Toy()], ["toy"], horizon, toy_prompt, history_length)
    log_probs = np.full((graph.n_nodes, 3), -np.inf)
    for n, s in enumerate(graph.state):
        log_probs[n, : len(PI[s])] = np.log(PI[s])
    return graph, log_probs


def test_hand_computed_values_and_distribution_on_the_toy():
    # F_1(A) = 0, F_1(B) = 0.5; F_2(A) = 0.6 F_1(B) + 0.4 F_1(A) = 0.3, F_2(B) = 0.5 + 0.3 F_1(A) = 0.5;
    # F_3(A) = 0.6 F_2(B) + 0.4 F_2(A) = 0.42
    graph, log_probs = _toy(3)
    table = solve(graph, log_probs)
    at = {(int(t), s): n for n, (t, s) in enumerate(zip(graph.t, graph.state))}
    assert sorted(at) == [(0, "A"), (1, "A"), (1, "B"), (2, "A"), (2, "B")]
    expected_v = {(0, "A"): 0.42, (1, "A"): 0.3, (1, "B"): 0.5, (2, "A"): 0.0, (2, "B"): 0.5}
    for key, v in expected_v.items():
        assert table.v[at[key]] == pytest.approx(v, abs=1e-15), key
    assert table.success.tolist() == pytest.approx([0.42])
    root_edges = np.flatnonzero(graph.source == graph.roots[0])
    assert table.q[root_edges].tolist() == pytest.approx([0.3, 0.5])  # left -> F_2(A), right -> F_2(B)
    assert table.advantage[root_edges].tolist() == pytest.approx([0.3 - 0.42, 0.5 - 0.42])
    b2 = np.flatnonzero(graph.source == at[(2, "B")])
    assert table.q[b2].tolist() == [0.0, 1.0, 0.0]  # back: budget spent; win; fall: a terminal loss
    # d_1 = (A .4, B .6); d_2(A) = .4 * .4 + .6 * .3 = .34, d_2(B) = .4 * .6 = .24
    expected_d = {(0, "A"): 1.0, (1, "A"): 0.4, (1, "B"): 0.6, (2, "A"): 0.34, (2, "B"): 0.24}
    for key, d in expected_d.items():
        assert table.d[at[key]] == pytest.approx(d, abs=1e-15), key
    # within one step nothing can be won from A
    assert solve(*_toy(1)).success.tolist() == [0.0]


def test_history_windows_split_nodes_but_not_values_of_a_markov_policy():
    graph, log_probs = _toy(3, history_length=1)
    # step 2 reaches A by (at A, left) and by (at B, back): two nodes; B by (at A, right)
    assert sorted((int(t), s, w) for t, s, w in zip(graph.t, graph.state, graph.window) if t == 2) == [
        (2, "A", (("at A", "left"),)),
        (2, "A", (("at B", "back"),)),
        (2, "B", (("at A", "right"),)),
    ]
    assert graph.prompt[graph.node_of(0, 2, "B", (("at A", "right"),))] == "2 | at B | [('at A', 'right')]"
    assert solve(graph, log_probs).success.tolist() == pytest.approx([0.42])


def test_probabilities_that_do_not_sum_to_one_are_refused():
    graph, log_probs = _toy(2)
    log_probs[0, 0] = np.log(0.5)
    with pytest.raises(ValueError, match="node 0 sum to 1.10000000, not 1"):
        edge_probabilities(graph, log_probs)
    with pytest.raises(ValueError, match="edge probabilities must have shape"):
        success_values(graph, np.ones(3))
    with pytest.raises(ValueError, match="finite and >= 0"):
        node_distribution(graph, np.full(graph.n_edges, np.nan))


@pytest.fixture(scope="module")
def policy():
    torch.set_num_threads(1)
    return corridor_policy(bc_epochs=2, lr=3e-3)


TASK = "corridor-walk-2-0-0"
HOT = 6.0  # a temperature at which the little-trained policy wins sometimes, and the step budget matters


def _rollouts(policy, n: int, max_steps: int, history_length: int, temperature: float, tasks=(TASK,)):
    torch.manual_seed(0)
    engine = TransformersEngine(policy, 1024, 16, batch_size=4096, action_choice="admissible")
    trajs, _ = collect_rollouts(
        corridor,
        list(tasks),
        n,
        engine,
        env_name="corridor",
        max_steps=max_steps,
        history_length=history_length,
        temperature=temperature,
        progress=False,
    )
    return RolloutBatch.from_trajectories(trajs)


def test_the_policys_probabilities_are_the_samplers(policy):
    tasks = ["corridor-key-3-1-1", "corridor-walk-4-0-2", "corridor-key-6-3-41"]
    batch = _rollouts(policy, 6, max_steps=9, history_length=2, temperature=1.3, tasks=tasks)
    table = exact_table(policy, "corridor", tasks, max_steps=9, history_length=2, temperature=1.3, progress=False)
    node, edge = row_nodes(batch, table.graph)
    np.testing.assert_allclose(np.log(table.p[edge]), batch.choice_logprob.astype(float), atol=1e-5)
    assert np.all(table.graph.t[node] == batch.step)


def test_values_agree_with_monte_carlo_rollouts_of_the_same_policy(policy):
    """3,000 rollouts of the tiny policy: the share won, and the share won after each first command, inside the 99%
    binomial interval around the exact V(s_0) and Q(s_0, a). A step more or less of budget moves V by more than
    the interval's half-width (so an off-by-one in the budget fails here)."""
    n = 3000
    solved = {
        ms: exact_table(policy, "corridor", [TASK], max_steps=ms, history_length=1, temperature=HOT, progress=False)
        for ms in (7, 8, 9)
    }
    table = solved[8]
    batch = _rollouts(policy, n, max_steps=8, history_length=1, temperature=HOT)
    v0 = float(table.success[0])
    half_width = 2.576 * np.sqrt(v0 * (1 - v0) / n)
    assert 0.1 < v0 < 0.9 and min(abs(solved[m].success[0] - v0) for m in (7, 9)) > 1.2 * half_width
    first = batch.step == 0
    won = batch.won[first]
    ci = binomtest(int(won.sum()), n).proportion_ci(0.99)
    assert ci.low <= v0 <= ci.high, (v0, won.mean(), ci)
    root = int(table.graph.roots[0])
    for k, command in enumerate(table.graph.commands[root]):
        chose = batch.action[first] == command
        if chose.sum() < 30:
            continue
        q = float(table.q[table.graph.first_edge[root] + k])
        ci = binomtest(int(won[chose].sum()), int(chose.sum())).proportion_ci(0.99)
        assert ci.low <= q <= ci.high, (command, q, won[chose].mean(), ci)


def test_exact_values_label_each_row_with_its_nodes_value(policy):
    batch = _rollouts(policy, 16, max_steps=8, history_length=2, temperature=HOT)
    kwargs = {"max_steps": 8, "history_length": 2, "temperature": HOT, "progress": False}
    values = exact_values(batch, policy, "corridor", **kwargs)
    table = exact_table(policy, "corridor", [TASK], **kwargs)
    node, edge = row_nodes(batch, table.graph)
    assert values.tolist() == table.v[node].tolist()
    assert np.all(values[batch.step == 0] == table.success[0])
    last = np.r_[batch.traj_id[1:] != batch.traj_id[:-1], True]
    assert np.all(table.q[edge][last] == batch.won[last])  # a trajectory's last step: its outcome
    assert batch.won.any() and not batch.won.all()  # both outcomes among the labelled rows


def test_exact_values_refuse_what_they_cannot_replay(policy):
    batch = _rollouts(policy, 2, max_steps=8, history_length=0, temperature=1.0, tasks=("corridor-key-3-1-1",))
    kwargs = {"max_steps": 8, "history_length": 0, "progress": False}
    free = RolloutBatch(**{**batch.columns(), "candidate_ids": np.array([None] * batch.n_rows, dtype=object)})
    with pytest.raises(ValueError, match="chosen among the admissible commands"):
        exact_values(free, policy, "corridor", **kwargs)
    other = batch.select(np.ones(batch.n_rows, bool))
    other.observation = other.observation.copy()
    other.observation[1] = "You are in room 9 of 3."
    with pytest.raises(ValueError, match=r"step 1: the tabular model's observation .* differs from the saved"):
        exact_values(other, policy, "corridor", **kwargs)
    assert batch.traj_len.min() > 2  # the key task takes at least 5 steps
    with pytest.raises(ValueError, match="ended before this step"):
        exact_values(batch, policy, "corridor", max_steps=2, history_length=0, progress=False)
    with pytest.raises(ValueError, match="declares no tabular model"):
        exact_values(batch, policy, "webshop", **kwargs)
