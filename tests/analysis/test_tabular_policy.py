"""The small softmax policy of the Sokoban learning comparison (`scpo.testbeds.tabular_policy`,
`scpo.testbeds.tabular_learning`): its exact success against episodes played in the environment, its exact gradient
against finite differences, its rollouts replayed in the environment, its update by hand, the paired design of the
learning runs, and experiments/sokoban_learning in its quick mode."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import stats

from scpo.batch import Trajectory
from scpo.credit import CreditConfig
from scpo.envs import sokoban
from scpo.envs.sokoban.room import SYMBOLS, is_won, render
from scpo.envs.tabular import check_replay
from scpo.errors import ExpectedError
from scpo.rollout.exact_values import row_nodes
from scpo.testbeds.policy_gradients import trainable
from scpo.testbeds.tabular_learning import imitate, learn, method_advantages
from scpo.testbeds.tabular_policy import TabularWorld, cell_one_hot, mlp_policy, sokoban_panel

from helpers.checks import load_script

ALPHABET = list(SYMBOLS.values())
TASK = "sokoban-6x6-1box-00003"  # V* = 2


def _world(tasks=(TASK,), max_steps=6) -> TabularWorld:
    return TabularWorld.build("sokoban", list(tasks), max_steps=max_steps, alphabet=ALPHABET)


def _sharp(world: TabularWorld, seed: int = 0) -> torch.nn.Module:
    """An MLP whose action probabilities are far from uniform (weights scaled up)."""
    model = mlp_policy(world.n_features, world.n_actions, hidden=16, seed=seed)
    with torch.no_grad():
        model[-1].weight.mul_(8.0)
    return model


def test_cells_one_hot_and_an_unknown_symbol_is_named():
    x = cell_one_hot(" # \t _ \t\n P \t X \t", ALPHABET).reshape(4, -1)
    assert x.sum(1).tolist() == [1, 1, 1, 1] and x[2, ALPHABET.index("P")] == 1
    with pytest.raises(ValueError, match="grid symbol 'Z'"):
        cell_one_hot(" Z \t", ALPHABET)


def test_exact_success_of_an_mlp_policy_matches_its_episodes_in_the_environment():
    """V_0 of a non-uniform MLP policy from the dynamic programme lies in the 99% binomial interval of 3,000 episodes
    played in SokobanEnv, the policy choosing from the encoded grid the environment shows; with one step less not."""
    world = _world(max_steps=6)
    model = _sharp(world)
    exact = float(world.table(model).success[0])
    shorter = float(_world(max_steps=5).table(model).success[0])
    rng = np.random.default_rng(0)
    env = sokoban.make_env(TASK, max_steps=6)
    probs: dict[str, np.ndarray] = {}  # the policy's probabilities per grid, computed once

    def pi(obs: str) -> np.ndarray:
        if obs not in probs:
            with torch.no_grad():
                probs[obs] = torch.softmax(model(world.encode([obs])), -1)[0].numpy()
        return probs[obs]

    wins, n = 0, 3000
    for _ in range(n):
        obs, _ = env.reset()
        done, info = False, {}
        while not done:
            p = pi(obs)
            obs, _, done, info = env.step(sokoban.ACTIONS[rng.choice(4, p=p / p.sum())])
        wins += info["won"]
    lo, hi = stats.binomtest(wins, n).proportion_ci(0.99)
    assert lo <= exact <= hi
    assert not lo <= shorter <= hi


def test_exact_gradient_equals_central_finite_differences():
    world = _world(max_steps=5)
    model = _sharp(world)
    grad = world.success_gradient(model, world.table(model))
    params = trainable(model)
    flat = torch.nn.utils.parameters_to_vector(params).detach().clone()
    rng = np.random.default_rng(1)
    for i in rng.choice(len(flat), 8, replace=False).tolist() + [int(np.argmax(np.abs(grad)))]:
        j = []
        for h in (1e-5, -1e-5):
            x = flat.clone()
            x[i] += h
            torch.nn.utils.vector_to_parameters(x, params)
            j.append(float(world.table(model).success.mean()))
        torch.nn.utils.vector_to_parameters(flat, params)
        assert (j[0] - j[1]) / 2e-5 == pytest.approx(grad[i], abs=1e-8, rel=1e-5)
    assert np.abs(grad).max() > 1e-3


def test_rollouts_replay_in_the_environment_and_their_rows_are_the_graphs():
    tasks = sokoban.list_tasks("train")[:3]
    world = _world(tasks, max_steps=15)
    model = _sharp(world, seed=2)
    batch, rows = world.rollouts(model, tasks, group_size=5, seed=7)
    assert batch.n_groups == 3 and len(batch.trajectory_rows()) == 15
    node, edge = row_nodes(batch, world.graph)
    assert node.tolist() == rows.node.tolist() and edge.tolist() == rows.edge.tolist()
    for r in batch.trajectory_rows():
        states = check_replay(
            sokoban.tabular_model(str(batch.task_id[r[0]])), sokoban.make_env(str(batch.task_id[r[0]])), batch.action[r]
        )
        assert is_won(states[-1]) == bool(batch.won[r[0]])
        assert batch.reward[r].sum() == (10.0 if batch.won[r[0]] else 0.0)
    assert batch.won.any() and not batch.won.all()
    for r in batch.trajectory_rows():  # the ids a Trajectory of the episode has
        head = Trajectory(str(batch.task_id[r[0]]), 7, int(batch.traj_id[r[0]]) % 5, [], env_name="sokoban")
        assert {*batch.traj_uid[r]} == {head.traj_uid} and {*batch.group_uid[r]} == {head.group_uid}
        assert batch.step[r].tolist() == list(range(len(r))) and batch.done[r].tolist() == [False] * (len(r) - 1) + [
            True
        ]
    again, _ = world.rollouts(model, tasks, group_size=5, seed=7)
    assert again.action.tolist() == batch.action.tolist()


def test_an_update_is_the_mean_of_advantage_weighted_score_functions():
    world = _world(max_steps=6)
    model = _sharp(world)
    batch, rows = world.rollouts(model, [TASK], group_size=4, seed=3)
    adv = np.random.default_rng(0).normal(size=batch.n_rows)
    g = world.update_direction(model, rows, {"m": adv})["m"]
    params = trainable(model)
    by_hand = np.zeros_like(g)
    for i in range(batch.n_rows):
        logp = world.log_probs(model, [rows.node[i]])[0, world.graph.action[rows.edge[i]]]
        grads = torch.autograd.grad(logp, params)
        by_hand += adv[i] * torch.cat([x.reshape(-1) for x in grads]).numpy() / batch.n_rows
    np.testing.assert_allclose(g, by_hand, rtol=1e-10, atol=1e-14)


def test_exact_advantages_are_the_tables_and_methods_get_the_columns_they_need():
    world = _world(max_steps=6)
    model = _sharp(world)
    table = world.table(model)
    batch, rows = world.rollouts(model, [TASK], group_size=4, seed=3)
    cfg = CreditConfig()
    cfg.exact_advantage.whiten = False
    adv = method_advantages(
        world, batch, rows, table, ["exact_advantage", "oracle", "mc_advantage", "grpo"], cfg, np.random.default_rng(0)
    )
    np.testing.assert_allclose(adv["exact_advantage"], table.advantage[rows.edge], atol=1e-12)
    assert set(adv) == {"exact_advantage", "oracle", "mc_advantage", "grpo"}


def test_runs_are_paired_by_seed_and_the_exact_advantage_learns():
    """Two methods at one seed draw the same first batch (same tasks, same episodes); 15 iterations of the exact
    advantage raise the exact success of a random MLP on two rooms, shuffled credit does not move it as far."""
    tasks = sokoban_panel(2, 0, 4)
    world = _world(tasks, max_steps=15)
    cfg = CreditConfig()
    firsts = {}
    for method in ("exact_advantage", "shuffled"):
        model = mlp_policy(world.n_features, world.n_actions, seed=0)
        curve = learn(world, model, method, cfg, iterations=15, lr=1e-2, n_tasks=2, group_size=8, seed=0, eval_every=5)
        firsts[method] = curve
    a, b = firsts["exact_advantage"], firsts["shuffled"]
    assert a["success"].iloc[0] == b["success"].iloc[0] and a["batch_success"].iloc[0] == b["batch_success"].iloc[0]
    assert a["iteration"].tolist() == [0, 5, 10, 15]
    assert a["success"].iloc[-1] > 2 * a["success"].iloc[0]
    assert a["success"].iloc[-1] > b["success"].iloc[-1]


def test_imitation_lowers_the_loss_and_raises_success():
    world = _world(sokoban_panel(2, 0, 4), max_steps=15)
    demos = []
    for task in sokoban.list_tasks("train")[:100]:
        s = sokoban.initial_state(task)
        for move in sokoban.expert_plan(s):
            demos.append((render(s), move))
            s = sokoban.step(s, move)[0]
    model = mlp_policy(world.n_features, world.n_actions, seed=0)
    before = float(world.table(model).success.mean())
    losses = imitate(world, model, demos, epochs=100)
    assert losses[-1] < 0.5 * losses[0]
    assert float(world.table(model).success.mean()) > 1.5 * before


def test_sokoban_learning_quick_mode_writes_its_tables_and_refuses_a_folder_of_other_settings(tmp_path):
    script = load_script("experiments/sokoban_learning/sokoban_learning.py")
    script.main(["--quick", "--out", str(tmp_path)])
    summary = (tmp_path / "summary.md").read_text()
    assert "| exact_advantage |" in summary and "| ppo |" in summary and "Rank correlation" in summary
    assert "PPO's critic and its update as it learns: random start" in summary
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert runs["seeds"] == 2 and runs["cpu"]
    import pandas as pd

    diffs = pd.read_csv(tmp_path / "differences.csv")
    assert set(diffs["method"]) == {"exact_advantage", "shuffled", "ppo"} and (diffs["n"] == 2).all()
    assert set(zip(diffs["method"], diffs["reference"])) >= {("ppo", "grpo"), ("ppo", "exact_advantage")}
    assert len(list((tmp_path / "runs").glob("*.csv"))) == 2 * 2 * 4
    critic = pd.read_csv(tmp_path / "ppo_critic.csv")
    assert len(critic) == 2 * (6 + 4) and set(critic["start"]) == {"random", "imitation"}
    probes = pd.read_csv(tmp_path / "ppo_probes.csv")
    assert set(probes["method"]) == {"ppo", "grpo", "exact_advantage"}
    assert set(pd.read_csv(tmp_path / "ppo_summary.csv")["iteration"].astype(str)) >= {"0", "all"}
    with pytest.raises(ExpectedError, match="other settings"):
        script.main(["--quick", "--out", str(tmp_path), "--hidden", "8"])
