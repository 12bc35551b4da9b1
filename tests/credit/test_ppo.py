"""PPO's turn-level GAE (scpo.credit.ppo) against trajectories worked by hand: terminal and truncated episodes, gamma
and lambda at 0 and 1, groups of one trajectory, the penalty, whitening as verl's, and a property over random
trajectories (gamma = lambda = 1: the return-to-go minus V)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig
from scpo.credit.ppo import (
    PPOOptions,
    answer_token_counts,
    compute_ppo,
    explained_variance,
    gae_advantages,
    td_errors,
    whiten,
)

from helpers import verl_core_algos as verl

# trajectory a: 3 turns, won at its last (terminal); trajectory b: 2 turns, cut by the step limit (not done)
REWARD = [0.0, 0.0, 10.0, 0.0, 0.0]
VALUES = [4.0, 6.0, 8.0, 1.0, 2.0]
TRAJ = [0, 0, 0, 1, 1]
STEP = [0, 1, 2, 0, 1]
DONE = [False, False, True, False, False]


def test_terminal_and_truncated_episodes_by_hand():
    adv, ret, delta = gae_advantages(REWARD, VALUES, TRAJ, STEP, DONE, gamma=0.5, lam=0.5)
    # a: delta = (0 + .5*6 - 4, 0 + .5*8 - 6, 10 - 8) = (-1, -2, 2); A_2 = 2, A_1 = -2 + .25*2 = -1.5,
    #    A_0 = -1 + .25*-1.5 = -1.375
    # b (cut, no final value: V(s_2) = 0): delta = (0 + .5*2 - 1, 0 + 0 - 2) = (0, -2); A_1 = -2, A_0 = 0 - .5 = -0.5
    np.testing.assert_allclose(delta, [-1, -2, 2, 0, -2], rtol=0, atol=1e-15)
    np.testing.assert_allclose(adv, [-1.375, -1.5, 2, -0.5, -2], rtol=0, atol=1e-15)
    np.testing.assert_allclose(ret, np.add(adv, VALUES), rtol=0, atol=1e-15)


def test_a_truncated_episode_bootstraps_from_its_final_value_and_a_terminal_one_ignores_it():
    final = np.array([100.0, 6.0])  # a is terminal: its 100 is never read; b ended in a state of value 6
    adv, _, delta = gae_advantages(REWARD, VALUES, TRAJ, STEP, DONE, gamma=0.5, lam=0.5, final_value=final)
    # b: delta_1 = 0 + .5*6 - 2 = 1; A_1 = 1, A_0 = 0 + .25*1 = 0.25 ; a unchanged
    np.testing.assert_allclose(delta, [-1, -2, 2, 0, 1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(adv, [-1.375, -1.5, 2, 0.25, 1], rtol=0, atol=1e-15)
    nan_for_terminal = np.array([np.nan, 6.0])
    np.testing.assert_array_equal(
        gae_advantages(REWARD, VALUES, TRAJ, STEP, DONE, gamma=0.5, lam=0.5, final_value=nan_for_terminal)[0], adv
    )
    with pytest.raises(ValueError, match="not finite for a truncated"):
        td_errors(REWARD, VALUES, TRAJ, DONE, 0.5, np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="one per trajectory"):
        td_errors(REWARD, VALUES, TRAJ, DONE, 0.5, np.array([0.0]))


def test_gamma_and_lambda_at_zero_and_one():
    r, v = np.array(REWARD), np.array(VALUES)
    # gamma = 0: every TD error is r - V, and so is A
    adv, _, delta = gae_advantages(r, v, TRAJ, STEP, DONE, gamma=0.0, lam=1.0)
    np.testing.assert_array_equal(delta, r - v)
    np.testing.assert_array_equal(adv, r - v)
    # lambda = 0: A is the one-step TD error
    adv, _, delta = gae_advantages(r, v, TRAJ, STEP, DONE, gamma=0.9, lam=0.0)
    np.testing.assert_allclose(delta, [0.9 * 6 - 4, 0.9 * 8 - 6, 10 - 8, 0.9 * 2 - 1, -2], rtol=1e-15)
    np.testing.assert_array_equal(adv, delta)
    # gamma = lambda = 1: the return-to-go minus V (a: 10 from every turn; b: 0)
    adv, ret, _ = gae_advantages(r, v, TRAJ, STEP, DONE, gamma=1.0, lam=1.0)
    np.testing.assert_allclose(adv, [6, 4, 2, -1, -2], rtol=0, atol=1e-15)
    np.testing.assert_allclose(ret, [10, 10, 10, 0, 0], rtol=0, atol=1e-15)
    # gamma = 1, lambda = 0.5: A_2 = 2, A_1 = (8 - 6) + .5*2 = 3, A_0 = (6 - 4) + .5*3 = 3.5
    np.testing.assert_allclose(gae_advantages(r, v, TRAJ, STEP, DONE, gamma=1.0, lam=0.5)[0][:3], [3.5, 3, 2])
    with pytest.raises(ValueError, match="must lie in"):
        gae_advantages(r, v, TRAJ, STEP, DONE, gamma=1.1, lam=1.0)


def test_done_before_the_last_row_cuts_the_next_value():
    # a 2-turn trajectory whose first row says done: its TD error does not look at the next row's value
    delta = td_errors([1.0, 0.0], [0.5, 7.0], [0, 0], [True, True], 1.0)
    np.testing.assert_array_equal(delta, [0.5, -7.0])


def _batch(group_id, response_lengths=None, valid=None) -> RolloutBatch:
    extra = {}
    if response_lengths is not None:
        extra["prompt_ids"] = [[1]] * len(STEP)
        extra["response_ids"] = [[7] * k for k in response_lengths]
    return RolloutBatch.from_columns(
        group_id=group_id,
        traj_id=TRAJ,
        step=STEP,
        reward=REWARD,
        done=DONE,
        valid=valid if valid is not None else [True] * len(STEP),
        **extra,
    )


def test_groups_do_not_enter_the_advantage_and_a_group_of_one_is_its_trajectory_alone():
    cfg = CreditConfig()
    raw = PPOOptions(gamma=0.5, lam=0.5, whiten="none")
    together = compute_ppo(_batch([0, 0, 0, 0, 0]), cfg, values=VALUES, options=raw)
    alone = compute_ppo(_batch([0, 0, 0, 1, 1]), cfg, values=VALUES, options=raw)  # b is a group of one
    np.testing.assert_array_equal(together.advantages, alone.advantages)
    np.testing.assert_allclose(alone.advantages, [-1.375, -1.5, 2, -0.5, -2], rtol=0, atol=1e-15)
    only_b = RolloutBatch.from_columns(group_id=[0, 0], traj_id=[0, 0], step=[0, 1], reward=[0, 0], done=[False] * 2)
    np.testing.assert_array_equal(compute_ppo(only_b, cfg, values=VALUES[3:], options=raw).advantages, [-0.5, -2])
    np.testing.assert_array_equal(alone.diagnostics["anchor_group_size"], [3, 3, 3, 2, 2])
    np.testing.assert_array_equal(alone.diagnostics["value"], VALUES)
    np.testing.assert_allclose(alone.diagnostics["td_error"], [-1, -2, 2, 0, -2], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(alone.diagnostics["step_adv"], alone.advantages)
    np.testing.assert_array_equal(alone.diagnostics["episode_adv"], 0.0)


def test_the_invalid_penalty_is_a_reward_of_its_turn():
    cfg = CreditConfig()  # lambda_invalid 0.1
    res = compute_ppo(
        _batch([0] * 5, valid=[True, False, True, True, True]),
        cfg,
        values=VALUES,
        options=PPOOptions(gamma=1.0, lam=1.0, whiten="none"),
    )
    # a's return-to-go: 10 - 0.1 from turns 0 and 1, 10 from turn 2
    np.testing.assert_allclose(res.advantages, [9.9 - 4, 9.9 - 6, 2, -1, -2], rtol=1e-15)
    np.testing.assert_allclose(res.returns, [9.9, 9.9, 10, 0, 0], rtol=1e-15)


def test_whitening_by_steps_and_by_tokens_as_verls_masked_whiten():
    cfg = CreditConfig()
    lengths = [3, 1, 2, 4, 2]
    batch = _batch([0] * 5, response_lengths=lengths)
    raw = compute_ppo(batch, cfg, values=VALUES, options=PPOOptions(gamma=0.5, lam=0.5, whiten="none")).advantages
    by_steps = compute_ppo(batch, cfg, values=VALUES, options=PPOOptions(gamma=0.5, lam=0.5, whiten="steps"))
    n = 5.0  # verl's masked_mean divides by n + 1e-8; its variance is then made unbiased by n / (n - 1)
    mean = raw.sum() / (n + 1e-8)
    var = ((raw - mean) ** 2).sum() / (n + 1e-8) * n / (n - 1)
    np.testing.assert_allclose(by_steps.advantages, (raw - mean) / np.sqrt(var + 1e-8), rtol=1e-14)
    by_tokens = compute_ppo(batch, cfg, values=VALUES, options=PPOOptions(gamma=0.5, lam=0.5, whiten="tokens"))
    # verl: each turn's advantage on every token of its answer, masked_whiten over the response tokens
    width = max(lengths)
    mat = torch.tensor(np.repeat(raw[:, None], width, axis=1))
    mask = torch.tensor([[1.0] * k + [0.0] * (width - k) for k in lengths], dtype=torch.float64)
    reference = verl.masked_whiten(mat, mask)[:, 0].numpy()
    np.testing.assert_allclose(by_tokens.advantages, reference, rtol=1e-12)
    assert not np.allclose(by_tokens.advantages, by_steps.advantages)
    np.testing.assert_array_equal(answer_token_counts(batch), lengths)
    default = compute_ppo(batch, cfg, values=VALUES, options=PPOOptions(gamma=0.5, lam=0.5))
    assert default.advantages.tolist() == by_tokens.advantages.tolist()


def test_whitening_needs_two_entries_and_tokens_need_the_policys_answers():
    with pytest.raises(ValueError, match="at least 2"):
        whiten(np.array([1.0]))
    with pytest.raises(ValueError, match="at least 2"):
        whiten(np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    np.testing.assert_allclose(whiten(np.array([1.0, 3.0])), [-1 / np.sqrt(2 + 1e-8), 1 / np.sqrt(2 + 1e-8)], rtol=1e-7)
    with pytest.raises(ValueError, match="whiten='steps'"):
        compute_ppo(_batch([0] * 5), CreditConfig(), values=VALUES, options=PPOOptions())


def test_the_critics_values_are_a_declared_need():
    cfg, opts = CreditConfig(), PPOOptions(whiten="steps")
    with pytest.raises(ValueError, match="needs the critic's values"):
        compute_ppo(_batch([0] * 5), cfg, options=opts)
    with pytest.raises(ValueError, match="5 finite values"):
        compute_ppo(_batch([0] * 5), cfg, values=VALUES[:4], options=opts)
    with pytest.raises(ValueError, match="1 non-finite"):
        compute_ppo(_batch([0] * 5), cfg, values=[*VALUES[:4], np.inf], options=opts)
    with pytest.raises(ValueError):
        PPOOptions(lam=1.5)
    assert PPOOptions().model_dump() == {"gamma": 1.0, "lam": 1.0, "whiten": "tokens"}


def test_explained_variance_by_hand():
    g = np.array([0.0, 2.0, 4.0])  # var 4 (ddof 1)
    assert explained_variance(g, g) == pytest.approx(1.0 - 0.0 / (4 + 1e-5))
    assert explained_variance(np.full(3, 2.0), g) == pytest.approx(1.0 - 4 / (4 + 1e-5), abs=1e-12)
    # V = (1, 2, 3): G - V = (-1, 0, 1), var 1 -> 1 - 1/4
    assert explained_variance(np.array([1.0, 2.0, 3.0]), g) == pytest.approx(1 - 1 / (4 + 1e-5), rel=1e-12)
    with pytest.raises(ValueError, match="same length"):
        explained_variance(g[:2], g)
    res = compute_ppo(_batch([0] * 5), CreditConfig(), values=VALUES, options=PPOOptions(whiten="steps"))
    assert res.stats["value_explained_variance"] == pytest.approx(explained_variance(np.array(VALUES), res.returns))


def test_turn_level_gae_is_verls_token_gae_with_one_token_per_turn():
    """Each trajectory one row of verl's (batch, response_length) tensors, one position per turn: verl's GAE over the
    row is the turn-level GAE, and both whiten alike."""
    rng = np.random.default_rng(3)
    lengths = [4, 1, 6, 3]
    traj = np.repeat(np.arange(4), lengths)
    step = np.concatenate([np.arange(k) for k in lengths])
    reward, values = rng.normal(size=len(step)), rng.normal(size=len(step))
    done = np.concatenate([[False] * (k - 1) + [True] for k in lengths])
    adv, ret, _ = gae_advantages(reward, values, traj, step, done, gamma=0.9, lam=0.7)
    width = max(lengths)
    mat = {k: np.zeros((4, width)) for k in ("r", "v", "m")}
    for i, k in enumerate(lengths):
        rows = traj == i
        mat["r"][i, :k], mat["v"][i, :k], mat["m"][i, :k] = reward[rows], values[rows], 1.0
    t = {k: torch.tensor(x) for k, x in mat.items()}
    v_adv, v_ret = verl.compute_gae_advantage_return(t["r"], t["v"], t["m"], 0.9, 0.7)
    inside = mat["m"].astype(bool)
    np.testing.assert_allclose(ret, v_ret.numpy()[inside], rtol=1e-12)
    np.testing.assert_allclose(whiten(adv), v_adv.numpy()[inside], rtol=1e-12)


@st.composite
def trajectories(draw):
    lengths = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))
    n = sum(lengths)
    floats = st.floats(-10, 10, allow_nan=False)
    reward = np.array(draw(st.lists(floats, min_size=n, max_size=n)))
    values = np.array(draw(st.lists(floats, min_size=n, max_size=n)))
    done_last = draw(st.lists(st.booleans(), min_size=len(lengths), max_size=len(lengths)))
    final = np.array(draw(st.lists(floats, min_size=len(lengths), max_size=len(lengths))))
    return lengths, reward, values, done_last, final


def _loop_gae(lengths, reward, values, done_last, final, gamma, lam):
    """GAE per trajectory as a plain backward loop (the reference)."""
    out, start = [], 0
    for i, k in enumerate(lengths):
        r, v = reward[start : start + k], values[start : start + k]
        nxt, acc, adv = (0.0 if done_last[i] else final[i]), 0.0, [0.0] * k
        for t in reversed(range(k)):
            acc = r[t] + gamma * nxt - v[t] + gamma * lam * acc
            adv[t], nxt = acc, v[t]
        out += adv
        start += k
    return np.array(out)


@settings(max_examples=60, deadline=None)
@given(trajectories(), st.floats(0, 1), st.floats(0, 1))
def test_gae_equals_a_backward_loop_and_lambda_one_gamma_one_is_return_to_go_minus_v(data, gamma, lam):
    lengths, reward, values, done_last, final = data
    traj = np.repeat(np.arange(len(lengths)), lengths)
    step = np.concatenate([np.arange(k) for k in lengths])
    done = np.concatenate([[False] * (k - 1) + [d] for k, d in zip(lengths, done_last)])
    adv, ret, _ = gae_advantages(reward, values, traj, step, done, gamma=gamma, lam=lam, final_value=final)
    np.testing.assert_allclose(adv, _loop_gae(lengths, reward, values, done_last, final, gamma, lam), atol=1e-9)
    np.testing.assert_allclose(ret - values, adv, atol=1e-12)
    adv1, _, _ = gae_advantages(reward, values, traj, step, done, gamma=1.0, lam=1.0, final_value=final)
    bootstrap = np.where(done_last, 0.0, final)
    to_go = np.concatenate([np.cumsum(reward[traj == i][::-1])[::-1] + bootstrap[i] for i in range(len(lengths))])
    np.testing.assert_allclose(adv1, to_go - values, atol=1e-9)


def test_inputs_of_other_types_give_the_same_float_results():
    expected = gae_advantages(REWARD, VALUES, TRAJ, STEP, DONE, gamma=0.5, lam=0.5, final_value=[0.0, 6.5])
    ints = gae_advantages(
        [0, 0, 10, 0, 0], [4, 6, 8, 1, 2], TRAJ, STEP, [0, 0, 1, 0, 0], gamma=0.5, lam=0.5, final_value=[0, 6.5]
    )
    for a, b in zip(expected, ints):
        np.testing.assert_array_equal(a, b)
        assert b.dtype == np.float64
    np.testing.assert_allclose(ints[2], [-1, -2, 2, 0, 1.25], rtol=0, atol=1e-15)  # 0 + .5*6.5 - 2: 6.5 kept whole
    # None for a terminal trajectory's final value (never read), a column of final values
    column = gae_advantages(
        REWARD, VALUES, TRAJ, STEP, DONE, gamma=0.5, lam=0.5, final_value=np.array([[None], [6.5]], dtype=object)
    )
    np.testing.assert_array_equal(column[0], expected[0])


def test_error_messages_name_the_problem():
    with pytest.raises(ValueError, match=r"^final_value has 1 entries, expected one per trajectory \(2\)$"):
        td_errors(REWARD, VALUES, TRAJ, DONE, 0.5, np.array([0.0]))
    with pytest.raises(
        ValueError, match=r"^final_value is not finite for a truncated trajectory \(last row not done\)$"
    ):
        td_errors(REWARD, VALUES, TRAJ, DONE, 0.5, np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match=r"^gamma=1.0 and lam=1.5 must lie in \[0, 1\]$"):
        gae_advantages(REWARD, VALUES, TRAJ, STEP, DONE, gamma=1.0, lam=1.5)
    with pytest.raises(ValueError, match=r"^gamma=-0.5 and lam=1.0 must lie in \[0, 1\]$"):
        gae_advantages(REWARD, VALUES, TRAJ, STEP, DONE, gamma=-0.5, lam=1.0)
    no_tokens = (
        r"^ppo whiten='tokens' weights each step by its answer's token count, and the batch has no response_ids "
        r"\(rollouts without the policy's tokens\): set the ppo option whiten='steps'$"
    )
    with pytest.raises(ValueError, match=no_tokens):
        answer_token_counts(_batch([0] * 5))
    needs = (
        r"^ppo needs the critic's values V\(s_t\) per step: the batch's critic_value column \(the trainer's critic "
        r"fills it, scpo.train.critic\) or values=\.\.\.$"
    )
    with pytest.raises(ValueError, match=needs):
        compute_ppo(_batch([0] * 5), CreditConfig(), options=PPOOptions())
    with pytest.raises(ValueError, match=r"^values must be 5 finite values \(one per row\), got shape \(4,\) with 0 "):
        compute_ppo(_batch([0] * 5), CreditConfig(), values=VALUES[:4], options=PPOOptions())


def test_compute_ppo_reads_its_options_from_the_config_and_passes_final_values_on():
    from types import SimpleNamespace

    from scpo.credit.options import NormOptions

    cfg = SimpleNamespace(ppo=PPOOptions(gamma=0.5, lam=0.5, whiten="none"), norm=NormOptions())
    res = compute_ppo(_batch([0] * 5), cfg, values=[[v] for v in VALUES], final_value=[100.0, 6.0])
    assert res.method == "ppo"
    np.testing.assert_allclose(res.advantages, [-1.375, -1.5, 2, 0.25, 1], rtol=0, atol=1e-15)  # a terminal, b cut
    ints = compute_ppo(_batch([0] * 5), cfg, values=[4, 6, 8, 1, 2])
    assert ints.diagnostics["value"].dtype == np.float64
    np.testing.assert_array_equal(ints.diagnostics["value"], VALUES)
    assert answer_token_counts(_batch([0] * 5, response_lengths=[3, 1, 2, 4, 2])).dtype == np.int64


def test_the_explained_variance_statistic_needs_two_rows():
    cfg = CreditConfig()
    raw = PPOOptions(whiten="none")
    one = RolloutBatch.from_columns(group_id=[0], traj_id=[0], step=[0], reward=[10.0])
    assert np.isnan(compute_ppo(one, cfg, values=[4.0], options=raw).stats["value_explained_variance"])
    two = RolloutBatch.from_columns(group_id=[0, 0], traj_id=[0, 0], step=[0, 1], reward=[0.0, 10.0])
    # G = (10, 10): var 0 -> 1 - var(G - V) / 1e-5 with V = (4, 6): G - V = (6, 4), var 2
    ev = compute_ppo(two, cfg, values=[4.0, 6.0], options=raw).stats["value_explained_variance"]
    assert ev == pytest.approx(1 - 2 / 1e-5)


def test_ppo_is_registered_and_estimated_from_the_batchs_critic_values_by_hand():
    """Through the one entry point (`estimate`), the batch's critic_value column: params.yaml's defaults (gamma =
    lambda = 1, tokens whitening) and the invalid penalty 0.1 on row 3."""
    from scpo.credit import estimate, method_spec

    spec = method_spec("ppo")
    assert spec.columns == ("critic_value",) and spec.critic and spec.needs_policy and spec.bound is None
    batch = _batch([0] * 5, response_lengths=[1, 2, 3, 1, 1], valid=[True, True, True, False, True])
    batch = batch.with_column("critic_value", VALUES)
    res = estimate(batch, ["ppo"])["ppo"]
    # a (terminal): r' = (0, 0, 10), V = (4, 6, 8): delta = (2, 2, 2), A = (6, 4, 2), G = 10 each
    # b (cut, nothing to bootstrap from): r' = (-0.1, 0), V = (1, 2): delta = (0.9, -2), A = (-1.1, -2), G = (-0.1, 0)
    adv = np.array([6.0, 4.0, 2.0, -1.1, -2.0])
    w = np.array([1.0, 2.0, 3.0, 1.0, 1.0])  # each turn counted once per answer token (verl's masked_whiten)
    mean = (w @ adv) / (8 + 1e-8)
    var = (w @ (adv - mean) ** 2) / (8 + 1e-8) * 8 / 7
    np.testing.assert_allclose(res.advantages, (adv - mean) / np.sqrt(var + 1e-8), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.returns, [10, 10, 10, -0.1, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.diagnostics["td_error"], [2, 2, 2, 0.9, -2], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(res.diagnostics["value"], VALUES)
    by_hand = compute_ppo(batch, CreditConfig(), values=np.array(VALUES), options=PPOOptions())
    np.testing.assert_array_equal(res.advantages, by_hand.advantages)
    assert estimate(batch, ["ppo"], options={"ppo": {"gamma": 0.5}})["ppo"].returns[0] != res.returns[0]


def test_an_unmet_critic_need_is_refused_in_one_line_or_skipped():
    from scpo.credit import compute_advantages, estimate

    batch = _batch([0] * 5, response_lengths=[1, 2, 3, 1, 1])
    message = (
        "credit method 'ppo' needs the critic's values V(s_t) per step (the batch's critic_value column: the "
        "trainer's learned critic, scpo.train.critic, fills it before credit)"
    )
    for call in (lambda: estimate(batch, ["grpo", "ppo"]), lambda: compute_advantages("ppo", batch)):
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == message and "\n" not in str(err.value)
    assert set(estimate(batch, ["grpo", "ppo"], unmet="skip")) == {"grpo"}


def test_the_critic_value_column_survives_a_file_and_a_selection(tmp_path):
    batch = _batch([0] * 5, response_lengths=[1, 2, 3, 1, 1]).with_column("critic_value", VALUES)
    back = RolloutBatch.read(batch.to_parquet(tmp_path / "b.parquet"))
    np.testing.assert_array_equal(back.critic_value, VALUES)
    assert back.critic_value.dtype == np.float64
    np.testing.assert_array_equal(batch.select(batch.traj_id == 1).critic_value, VALUES[3:])
    steps = [s.critic_value for t in batch.to_trajectories() for s in t.steps]
    assert steps == VALUES and RolloutBatch.from_trajectories(batch.to_trajectories()).critic_value.tolist() == VALUES


def test_fidelity_scores_the_critic_only_on_rollouts_that_carry_its_values():
    """The fidelity benchmarks score PPO on its own runs' rollouts (they carry the critic's values) and leave it out
    elsewhere, in the order asked; any other estimator's unmet need stays an error."""
    from types import SimpleNamespace

    from scpo.credit import estimate
    from scpo.testbeds.fidelity import Timer, _estimate

    cfg = SimpleNamespace(credit=None)
    batch = _batch([0] * 5, response_lengths=[1, 2, 3, 1, 1])
    assert list(_estimate(cfg, batch, ["ppo", "grpo"], None, Timer())) == ["grpo"]
    with_values = batch.with_column("critic_value", VALUES)
    a = _estimate(cfg, with_values, ["ppo", "grpo"], None, Timer())
    assert list(a) == ["ppo", "grpo"]
    np.testing.assert_array_equal(a["ppo"], estimate(with_values, ["ppo"])["ppo"].advantages)
    with pytest.raises(ValueError, match="credit method 'hcapo' needs"):
        _estimate(cfg, batch, ["grpo", "hcapo"], None, Timer())
