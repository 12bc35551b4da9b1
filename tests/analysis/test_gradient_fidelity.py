"""Gradient fidelity (`scpo.testbeds.gradient_fidelity`, `policy_gradients`, `sampled_gradient`): the exact gradient
of success against finite differences (a float64 MLP policy on the corridor's nodes, and a few weights of the tiny LM),
an estimator's update against the formula (1/N) sum_i A_i grad log pi(a_i | x_i), the sampled reference and its
corrected cosine against the exact gradient, and the whole measurement on a few batches, with and without a table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, available_methods
from scpo.envs import corridor
from scpo.rollout import TransformersEngine, collect_rollouts
from scpo.rollout.exact_values import choice_inputs, choice_log_probs, exact_graph, exact_table, solve
from scpo.testbeds.gradient_fidelity import gradient_fidelity, sampled_policy_values, summarize_cosines
from scpo.testbeds.policy_gradients import cosine, success_gradient, task_gradients, update_gradients
from scpo.testbeds.sampled_gradient import (
    corrected_cosine,
    leave_one_out_success,
    sampled_gradient,
    value_standard_error,
)

from helpers.tiny_policy import corridor_policy

TASKS = ["corridor-key-3-1-1", "corridor-walk-4-0-2"]


class MLPPolicy(torch.nn.Module):
    """pi(. | row) = softmax over the row's commands of tanh(x W1) W2, x a fixed random feature vector per row."""

    def __init__(self, n_rows: int, n_commands: np.ndarray, width: int, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n_rows, 6, generator=g, dtype=torch.float64)
        self.w1 = torch.nn.Parameter(torch.randn(6, 5, generator=g, dtype=torch.float64))
        self.w2 = torch.nn.Parameter(torch.randn(5, width, generator=g, dtype=torch.float64))
        self.absent = torch.arange(width)[None, :] >= torch.as_tensor(n_commands)[:, None]

    def forward(self, rows) -> torch.Tensor:
        rows = torch.as_tensor(np.asarray(rows))
        logits = torch.tanh(self.x[rows] @ self.w1) @ self.w2
        return torch.log_softmax(logits.masked_fill(self.absent[rows], float("-inf")), -1)


def _mlp_problem(history_length: int):
    graph = exact_graph("corridor", TASKS, max_steps=7, history_length=history_length)
    rows: dict[str, int] = {}
    node_row = np.array([rows.setdefault(p, len(rows)) for p in graph.prompt])
    first = np.unique(node_row, return_index=True)[1]
    n_commands = np.array([len(graph.commands[n]) for n in first])
    mlp = MLPPolicy(len(rows), n_commands, int(n_commands.max()))

    def success(task=None) -> float:
        with torch.no_grad():
            table = solve(graph, mlp(np.arange(len(rows))).numpy()[node_row])
        return float(table.success.mean() if task is None else table.success[task])

    return graph, node_row, mlp, success


@pytest.mark.parametrize("history_length", [0, 2])
def test_exact_gradient_equals_finite_differences_on_a_float64_policy(history_length):
    graph, node_row, mlp, success = _mlp_problem(history_length)
    with torch.no_grad():
        table = solve(graph, mlp(np.arange(int(node_row.max()) + 1)).numpy()[node_row])
    assert 0.01 < table.success.mean() < 0.99
    params = list(mlp.parameters())
    for tasks, task in ((None, None), ([1], 1)):
        grad = success_gradient(table, mlp, params, node_row, tasks=tasks, chunk=7)  # chunks cut the rows
        fd, h = [], 1e-6
        for p in params:
            for i in range(p.numel()):
                with torch.no_grad():
                    p.view(-1)[i] += h
                    up = success(task)
                    p.view(-1)[i] -= 2 * h
                    down = success(task)
                    p.view(-1)[i] += h
                fd.append((up - down) / (2 * h))
        fd = np.asarray(fd)
        assert np.linalg.norm(grad - fd) / np.linalg.norm(fd) < 1e-7, (tasks, grad[:5], fd[:5])


@pytest.fixture(scope="module")
def policy():
    torch.set_num_threads(1)
    return corridor_policy(bc_epochs=2, lr=3e-3)


def test_exact_gradient_of_the_tiny_lm_equals_finite_differences_on_its_strongest_weights(policy):
    kwargs = {"max_steps": 6, "history_length": 1, "temperature": 3.0, "progress": False}
    table = exact_table(policy, "corridor", TASKS, **kwargs)
    grad = task_gradients(policy, table, progress=False).mean(0)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    assert grad.shape == flat.shape
    picks = np.argsort(-np.abs(grad))[:4]
    offsets = np.cumsum([0] + [p.numel() for p in params])
    h = 1e-2
    for j in picks:
        k = int(np.searchsorted(offsets, j, side="right") - 1)
        p, i = params[k], int(j - offsets[k])
        values = []
        for step in (h, -2 * h, h):
            with torch.no_grad():
                p.view(-1)[i] += step
            values.append(exact_table(policy, "corridor", TASKS, **kwargs).success.mean())
        fd = (values[0] - values[1]) / (2 * h)
        assert fd == pytest.approx(grad[j], rel=2e-2), (j, fd, grad[j])


def test_an_update_is_the_mean_of_advantage_weighted_score_functions(policy):
    torch.manual_seed(1)
    engine = TransformersEngine(policy, 1024, 16, action_choice="admissible")
    trajs, _ = collect_rollouts(corridor, TASKS, 3, engine, env_name="corridor", max_steps=6, progress=False)
    batch = RolloutBatch.from_trajectories(trajs)
    adv = np.linspace(-1.0, 2.0, batch.n_rows)
    g = update_gradients(policy.model, batch, {"a": adv, "b": -3 * adv}, policy.tokenizer.pad_token_id)
    graph = exact_graph("corridor", TASKS, max_steps=6, history_length=2)
    inputs = choice_inputs(policy, graph)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    expected = np.zeros_like(g["a"])
    for r in range(batch.n_rows):  # one row at a time: A_r grad log pi(a_r | x_r) / N
        cands = list(batch.candidate_ids[r])
        k = cands.index(list(batch.response_ids[r]))
        one = type(inputs)([list(batch.prompt_ids[r])], [cands], np.zeros(1, dtype=np.int64), inputs.pad_id)
        log_pi = choice_log_probs(policy.model, one, [0], 1.0)[0, k]
        grads = torch.autograd.grad(log_pi, params, allow_unused=True)
        expected += adv[r] / batch.n_rows * torch.cat([gr.reshape(-1) for gr in grads]).double().numpy()
    np.testing.assert_allclose(g["a"], expected, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(g["b"], -3 * expected, rtol=1e-4, atol=1e-7)
    assert cosine(g["a"], g["b"]) == pytest.approx(-1.0)
    assert np.isnan(cosine(g["a"], np.zeros_like(g["a"])))


def test_sampled_values_share_one_draw_per_state_and_follow_the_binomial():
    batch = RolloutBatch.from_columns(
        group_id=[0] * 4,
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0, 0, 0, 0],
        task_id=["t"] * 4,
        action=["a", "b", "x", "c"],
    )
    values = np.array([0.3, 0.0, 0.3, 1.0])
    draws = np.stack([sampled_policy_values(batch, values, 2, 10.0, np.random.default_rng(s)) for s in range(4000)])
    assert np.all(draws[:, 0] == draws[:, 2])  # both trajectories' first state (no command before): one estimate
    assert set(np.unique(draws[:, 0])) == {0.0, 5.0, 10.0} and np.all(draws[:, 1] == 0) and np.all(draws[:, 3] == 10)
    assert draws[:, 0].mean() == pytest.approx(3.0, abs=0.15)  # E = 10 V
    assert (draws[:, 0] == 10).mean() == pytest.approx(0.09, abs=0.02)  # P(2 of 2) = 0.3^2


def test_gradient_fidelity_on_a_few_batches(policy):
    res = gradient_fidelity(
        policy,
        TASKS,
        max_steps=6,
        history_length=2,
        n_batches=3,
        n_tasks=2,
        group_size=4,
        temperature=3.0,
        credit=CreditConfig(),
        progress=False,
    )
    from scpo.credit import method_spec

    testable = {m for m in available_methods() if not method_spec(m).critic}  # PPO's critic: only the trainer's
    assert set(res.per_batch["method"]) == testable and "ppo" not in testable
    assert len(res.per_batch) == 3 * len(testable)
    finite = res.per_batch.dropna(subset=["cos_panel"])
    assert finite["cos_panel"].between(-1, 1).all() and finite["cos_tasks"].between(-1, 1).all()
    exact = res.per_batch[res.per_batch["method"] == "exact_advantage"]
    assert exact["cos_tasks"].notna().all()
    assert set(res.summary["method"]) == testable
    assert res.summary.set_index("method").loc["grpo"].isna()["diff_mean"]  # the reference has no difference
    assert set(res.success) == set(TASKS) and res.exact_gradient_norm > 0
    assert {"rollouts_s", "estimators_s", "updates_s", "exact_gradient_s"} <= set(res.seconds)


def test_summary_intervals_and_paired_differences_by_hand():
    import pandas as pd

    per = pd.DataFrame(
        {
            "batch": [0, 1, 2, 0, 1, 2],
            "method": ["grpo"] * 3 + ["x"] * 3,
            "cos_panel": [0.5, 0.6, 0.7, 0.6, 0.8, 0.9],
            "cos_tasks": [0.1, 0.2, np.nan, 0.3, 0.3, 0.3],
            "norm": [1.0, 1.0, 1.0, 2.0, 2.0, 2.0],
        }
    )
    s = summarize_cosines(per).set_index("method")
    assert s.loc["grpo", "cos_panel_mean"] == pytest.approx(0.6)
    half = 4.302652729911275 * 0.1 / np.sqrt(3)  # t_{0.975, 2} sd / sqrt(n)
    assert s.loc["grpo", "cos_panel_hi"] - 0.6 == pytest.approx(half)
    assert s.loc["grpo", "cos_tasks_n"] == 2 and s.loc["x", "cos_tasks_lo"] == pytest.approx(0.3)
    assert s.loc["x", "diff_mean"] == pytest.approx(0.5 / 3)  # differences 0.1, 0.2, 0.2
    assert s.loc["x", "no_update"] == 0.0
    # a zero update (every advantage 0) has no direction: it counts as cosine 0, in its own mean and in the pairs
    per.loc[2, ["cos_panel", "cos_tasks", "norm"]] = [np.nan, np.nan, 0.0]
    s = summarize_cosines(per).set_index("method")
    assert s.loc["grpo", "no_update"] == pytest.approx(1 / 3) and s.loc["grpo", "cos_panel_n"] == 3
    assert s.loc["grpo", "cos_panel_mean"] == pytest.approx(1.1 / 3)
    assert s.loc["x", "diff_mean"] == pytest.approx((0.1 + 0.2 + 0.9) / 3)


def test_leave_one_out_success_and_value_errors_by_hand():
    batch = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 1, 1],
        traj_id=[0, 0, 1, 2, 3, 4],
        step=[0, 1, 0, 0, 0, 0],
        reward=[0, 0, 0, 0, 0, 0],
        won=[True, True, False, True, False, False],
    )
    # group 0: w = (1, 0, 1): 1 - 1/2, 0 - 2/2, 1 - 1/2; group 1: w = (0, 0)
    assert leave_one_out_success(batch).tolist() == [0.5, 0.5, -1.0, 0.5, 0.0, 0.0]
    with pytest.raises(ValueError, match="at least 2 episodes per task"):
        leave_one_out_success(batch.select(batch.traj_id != 4))
    # K = 4 continuations, 3 won: p = 0.75, R sqrt(p (1 - p) / 3) = 10 * 0.25
    np.testing.assert_allclose(value_standard_error(np.array([7.5, 0.0, 10.0]), 4, 10.0), [2.5, 0.0, 0.0])
    with pytest.raises(ValueError, match="at least 2 continuations"):
        value_standard_error(np.array([5.0]), 1, 10.0)


HOT = {"max_steps": 8, "history_length": 2, "temperature": 6.0}
WALKS = ["corridor-walk-2-0-0", "corridor-walk-3-0-4"]  # won about 1 time in 4 at T = 6: a reference with signal


def test_the_sampled_reference_points_where_the_exact_gradient_does(policy):
    table = exact_table(policy, "corridor", WALKS, progress=False, **HOT)
    exact = task_gradients(policy, table, progress=False).mean(0)
    torch.manual_seed(0)
    engine = TransformersEngine(policy, 1024, 16, action_choice="admissible")
    ref = sampled_gradient(policy, WALKS, 64, env_name="corridor", engine=engine, **HOT)
    assert ref.reliability > 0.5
    assert corrected_cosine(exact, ref) == pytest.approx(1.0, abs=0.1)
    assert corrected_cosine(-exact, ref) == pytest.approx(-1.0, abs=0.1)
    assert np.isnan(corrected_cosine(np.zeros_like(exact), ref))
    with pytest.raises(ValueError, match="even and >= 4"):
        sampled_gradient(policy, WALKS, 3, env_name="corridor", engine=engine, **HOT)


def test_without_a_table_the_sampled_cosine_agrees_with_the_exact_one(policy):
    kwargs = {"n_batches": 2, "n_tasks": 2, "group_size": 6, "progress": False, **HOT}
    both = gradient_fidelity(policy, WALKS, ["grpo", "gigpo", "exact_advantage"], reference_episodes=64, **kwargs)
    pairs = both.per_batch.dropna(subset=["cos_panel", "cos_sampled"])
    assert len(pairs) >= 4 and np.abs(pairs["cos_panel"] - pairs["cos_sampled"]).max() < 0.15
    assert both.reference_reliability > 0.5
    sampled = gradient_fidelity(
        policy, WALKS, ["grpo", "mc_advantage", "exact_advantage"], exact=False, reference_episodes=32, **kwargs
    )
    assert set(sampled.per_batch["method"]) == {"grpo", "mc_advantage"}  # no table: no exact values
    assert "cos_panel" not in sampled.per_batch and sampled.per_batch["cos_sampled"].notna().any()
    assert {"cos_sampled_mean", "diff_mean"} <= set(sampled.summary.columns)
    with pytest.raises(ValueError, match="a sampled reference is needed"):
        gradient_fidelity(policy, WALKS, ["grpo"], exact=False, **kwargs)
    with pytest.raises(ValueError, match="declares no tabular model"):
        gradient_fidelity(policy, WALKS, ["grpo"], env_name="webshop", exact=True, **kwargs)
