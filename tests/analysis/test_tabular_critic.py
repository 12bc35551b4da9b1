"""PPO's learned critic on the tabular Sokoban policy (scpo.testbeds.tabular_critic): its values and GAE targets by
hand, its value loss falling on a fixed batch, PPO's learning runs and their probes (scpo.testbeds.tabular_learning),
and the benchmark's settings check for a folder from before the critic."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig
from scpo.credit.ppo import PPOOptions, compute_ppo, whiten
from scpo.envs.sokoban.room import SYMBOLS
from scpo.errors import ExpectedError
from scpo.testbeds.tabular_critic import CriticOptions, TabularCritic, value_error, value_fit
from scpo.testbeds.tabular_learning import PPO, learn
from scpo.testbeds.tabular_policy import TabularWorld, mlp_policy, sokoban_panel

from helpers.checks import load_script

ALPHABET = list(SYMBOLS.values())
TASK = "sokoban-6x6-1box-00003"  # V* = 2: a random policy wins some of its episodes within 6 steps


def _setup(seed: int = 0, options: CriticOptions | None = None):
    world = TabularWorld.build("sokoban", [TASK], max_steps=6, alphabet=ALPHABET)
    model = mlp_policy(world.n_features, world.n_actions, hidden=16, seed=seed)
    critic = TabularCritic.from_policy(world, model, options or CriticOptions())
    batch, rows = world.rollouts(model, [TASK], group_size=16, seed=1)
    assert 0 < batch.won[batch.step == 0].mean() < 1  # returns vary: something to fit
    return world, model, critic, batch, rows


def _return_to_go(batch, gamma: float) -> np.ndarray:
    """sum_{l >= 0} gamma^l r_{t+l} within each trajectory, by a backward loop over the rows."""
    out = np.zeros(batch.n_rows)
    for i in reversed(range(batch.n_rows)):
        later = i + 1 < batch.n_rows and batch.traj_id[i + 1] == batch.traj_id[i]
        out[i] = batch.reward[i] + (gamma * out[i + 1] if later else 0.0)
    return out


@pytest.mark.parametrize(
    "bad", [{"lr": 0.0}, {"epochs": 0}, {"cliprange_value": 0.0}, {"gamma": 1.5}, {"lam": -0.1}, {"lam": 1.5}]
)
def test_critic_options_name_a_bad_value(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        CriticOptions(**bad)


@pytest.mark.parametrize("edge", [{"gamma": 0.0, "lam": 0.0}, {"gamma": 1.0, "lam": 1.0}])
def test_critic_options_take_gamma_and_lambda_at_both_ends(edge):
    assert CriticOptions(**edge).gamma == edge["gamma"]


def test_the_critic_is_a_copy_of_the_policys_trunk_under_a_zero_value_head():
    world, model, critic, _, _ = _setup()
    trunk, head = critic.net
    assert len(trunk) == len(model) - 1  # every layer but the policy's output layer, its last tanh included
    for a, b in zip(trunk.parameters(), list(model.parameters())[:-2], strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()  # the same weights, not shared
    x = world.features[:5]
    assert torch.equal(trunk(x), model[:-1](x))
    assert np.all(critic.values(np.arange(world.graph.n_nodes)) == 0.0)
    assert critic.values(np.arange(3)).dtype == np.float64


@pytest.mark.parametrize("gamma", [1.0, 0.5])
def test_gae_targets_by_hand_with_a_constant_critic(gamma):
    """With V = b at every state and lambda = 1, A_t telescopes to the discounted return-to-go minus b: G_t is the
    return-to-go (10 on a win at the last step, discounted back), A whitened over the batch's steps."""
    _, _, critic, batch, rows = _setup(options=CriticOptions(gamma=gamma, lam=1.0))
    with torch.no_grad():
        critic.net[1].out.bias.fill_(2.5)
    result = critic.advantages(batch, rows, CreditConfig())
    g = _return_to_go(batch, gamma)
    assert set(np.unique(batch.reward)) == {0.0, 10.0}
    np.testing.assert_allclose(result.returns, g, atol=1e-12)
    np.testing.assert_allclose(result.diagnostics["value"], 2.5)
    np.testing.assert_allclose(result.advantages, whiten(g - 2.5), atol=1e-12)


def test_the_critics_credit_is_compute_ppo_on_its_values():
    """... under the credit options it is given: an invalid step's penalty (lambda_invalid 2.5, not the default) is
    part of its reward."""
    _, _, critic, batch, rows = _setup(options=CriticOptions(gamma=0.9, lam=0.7))
    batch = RolloutBatch(**{**batch.columns(), "valid": np.arange(batch.n_rows) % 3 != 0})
    credit = CreditConfig(norm={"lambda_invalid": 2.5})
    with torch.no_grad():
        critic.net[1].out.weight.normal_(generator=torch.Generator().manual_seed(1))
    values = critic.values(rows.node)
    direct = compute_ppo(batch, credit, values=values, options=PPOOptions(gamma=0.9, lam=0.7, whiten="steps"))
    default = compute_ppo(batch, CreditConfig(), values=values, options=PPOOptions(gamma=0.9, lam=0.7, whiten="steps"))
    assert not np.allclose(direct.advantages, default.advantages)
    result = critic.advantages(batch, rows, credit)
    np.testing.assert_array_equal(result.advantages, direct.advantages)
    np.testing.assert_array_equal(result.returns, direct.returns)


def test_values_are_read_at_each_rows_state_before_the_critic_trains():
    _, _, critic, batch, rows = _setup()
    with torch.no_grad():
        critic.net[1].out.weight.normal_(generator=torch.Generator().manual_seed(0))
    before = critic.values(rows.node)
    result = critic.advantages(batch, rows, CreditConfig())
    np.testing.assert_array_equal(result.diagnostics["value"], before)
    record = critic.fit(rows, result)
    assert not np.allclose(critic.values(rows.node), before)
    assert record["value_loss"] == pytest.approx(0.5 * np.mean((before - result.returns) ** 2))
    assert record["returns_vary"] and critic.history == [record]


def test_value_loss_falls_to_the_within_state_floor_on_a_fixed_batch():
    """Each round reads V_old afresh (a new iteration on the same episodes). The least L_V any V(s) can reach is half
    the within-state variance of the returns (one grid, several returns: the policy does not see the step); the
    critic starts at V = 0, worse than the returns' mean, and reaches that floor, its explained variance rising from
    0 to the most the batch allows."""
    world, _, critic, batch, rows = _setup(options=CriticOptions(lr=1e-2, epochs=4))
    g = critic.advantages(batch, rows, CreditConfig()).returns
    state = world.node_row[rows.node]
    means = {s: g[state == s].mean() for s in np.unique(state)}
    floor = 0.5 * np.mean((g - np.array([means[s] for s in state])) ** 2)
    for _ in range(40):
        critic.fit(rows, critic.advantages(batch, rows, CreditConfig()))
    h = critic.history
    assert h[0]["value_loss"] > 1.1 * 0.5 * np.var(g)  # from V = 0: worse than the best constant
    assert floor < 0.9 * h[0]["value_loss"] and h[-1]["value_loss"] < floor + 0.01
    best = 1 - floor / (0.5 * np.var(g))
    assert abs(h[0]["explained_variance"]) < 1e-3 and h[-1]["explained_variance"] > best - 0.01 > 0.02
    assert max(r["clipfrac"] for r in h) > 0  # the first steps move V by more than cliprange_value 0.5


@pytest.mark.parametrize(
    ("returns", "vary"),
    [
        ([0.0, 1e-9], False),  # a spread of exactly RETURNS_VARY (returns below 1 in size): rounding
        ([0.0, 1.5e-9], True),
        ([10.0, 10.0 + 5e-9], False),  # returns of 10: the spread is compared with 1e-9 x 10
        ([10.0, 10.0 + 2e-8], True),
    ],
)
def test_returns_vary_beyond_rounding_relative_to_their_size(returns, vary):
    _, _, critic, _, rows = _setup()
    result = SimpleNamespace(
        returns=np.array(returns),
        diagnostics={"value": np.zeros(2)},
        stats={"value_explained_variance": 0.0},
    )
    assert critic.fit(SimpleNamespace(node=rows.node[:2]), result)["returns_vary"] is vary


def test_value_error_and_fit_of_a_constant_critic_and_of_a_constant_target():
    """V = c: the error is the d-weighted RMS of 10 V^pi - c; a target without spread (reward 0) has no explained
    variance (NaN), whatever V is."""
    world, model, critic, _, _ = _setup()
    table = world.table(model)
    w = table.d / table.d.sum()
    with torch.no_grad():
        critic.net[1].out.bias.fill_(3.0)
    assert value_error(critic, table, 10.0) == pytest.approx(np.sqrt(w @ (10 * table.v - 3.0) ** 2))
    assert np.isnan(value_fit(critic, table, 0.0))


def test_value_fit_by_hand_for_a_zero_critic_and_zero_for_the_on_policy_mean():
    """V = 0: 1 - E_d[t^2] / Var_d[t] = -m^2 / Var_d[t] (t = 10 V^pi, m its d-weighted mean); V = m: 0."""
    world, model, critic, _, _ = _setup()
    table = world.table(model)
    w = table.d / table.d.sum()
    t = 10 * table.v
    m = w @ t
    assert value_fit(critic, table, 10.0) == pytest.approx(-(m**2) / (w @ (t - m) ** 2))
    assert value_error(critic, table, 10.0) == pytest.approx(np.sqrt(w @ t**2))
    with torch.no_grad():
        critic.net[1].out.bias.fill_(float(m))
    assert value_fit(critic, table, 10.0) == pytest.approx(0.0, abs=1e-12)


def test_ppo_learns_paired_with_grpo_and_probes_its_batches():
    """PPO draws the same first batch as GRPO at the seed; its probes hold PPO, GRPO and the exact advantage at each
    evaluation but the last, the exact advantage correlating 1 with itself; a critic is what ppo needs, and ppo only."""
    tasks = sokoban_panel(2, 0, 4)
    world = TabularWorld.build("sokoban", tasks, max_steps=15, alphabet=ALPHABET)
    cfg = CreditConfig()
    curves, probes = {}, []
    for method in ("grpo", PPO):
        model = mlp_policy(world.n_features, world.n_actions, seed=0)
        critic = TabularCritic.from_policy(world, model, CriticOptions()) if method == PPO else None
        curves[method] = learn(
            world,
            model,
            method,
            cfg,
            iterations=6,
            lr=1e-2,
            n_tasks=2,
            group_size=8,
            seed=0,
            eval_every=3,
            critic=critic,
            probe_methods=("grpo", "exact_advantage") if critic else (),
            probes=probes,
        )
    assert curves[PPO]["batch_success"].iloc[0] == curves["grpo"]["batch_success"].iloc[0]
    assert curves[PPO][["value_fit", "value_error"]].notna().all().all() and "value_fit" not in curves["grpo"]
    assert len(critic.history) == 6
    assert sorted({(p["iteration"], p["method"]) for p in probes}) == [
        (it, m) for it in (0, 3) for m in ("exact_advantage", "grpo", "ppo")
    ]
    exact = [p["corr_exact"] for p in probes if p["method"] == "exact_advantage"]
    np.testing.assert_allclose(exact, 1.0, atol=1e-12)
    with pytest.raises(ValueError, match="critic"):
        learn(world, model, PPO, cfg, iterations=1, lr=1e-2)
    with pytest.raises(ValueError, match="critic"):
        learn(world, model, "grpo", cfg, iterations=1, lr=1e-2, critic=critic)


def test_a_folder_from_before_the_critic_settings_keeps_its_runs_until_it_holds_a_ppo_run(tmp_path):
    script = load_script("experiments/sokoban_learning/sokoban_learning.py")
    s = {"hidden": 64, "critic_lr_ratio": 10.0, "critic_epochs": 1}
    (tmp_path / "runs").mkdir()
    (tmp_path / "settings.json").write_text(json.dumps({"hidden": 64}))
    script.check_settings(tmp_path, s)  # no PPO run: the older folder's runs stand, the critic's settings added
    assert json.loads((tmp_path / "settings.json").read_text()) == s
    with pytest.raises(ExpectedError, match="other settings"):
        script.check_settings(tmp_path, s | {"critic_epochs": 4})
    (tmp_path / "settings.json").write_text(json.dumps({"hidden": 64}))
    with pytest.raises(ExpectedError, match="other settings"):  # another setting than the critic's
        script.check_settings(tmp_path, s | {"hidden": 32})
    (tmp_path / "runs" / "random_0_ppo.csv").write_text("iteration\n")
    with pytest.raises(ExpectedError, match="other settings"):  # its PPO run was made with unrecorded settings
        script.check_settings(tmp_path, s)
