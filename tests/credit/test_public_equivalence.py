"""GraphGPO, RLOO and verl-agent's recipe HGPO, checked against independent loop-based re-implementations of the public
code (tests/helpers/reference_loops.py) on random batches, float64, through `compute_advantages` and through each
drop-in called with its public trainer's arguments (rows in verl's step-major order, trajectories interleaved)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scpo.batch import RolloutBatch
from scpo.credit import compute_advantages
from scpo.integrations.verl_agent import (
    ComplexGraph,
    compute_graph_path_returns,
    compute_graphgpo_outcome_advantage,
    compute_hgpo_recipe_outcome_advantage,
    compute_rloo_outcome_advantage,
)

from helpers import reference_loops as ref

EPS = 1e-6
PEN = 0.1
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
ROOMS = ["hall", "desk 1", "drawer 2", "fridge 1", "sink 1"]


@st.composite
def rollouts(draw):
    """Per trajectory: (group, states (T + 1), won, valid (T), note per state); states repeat within and across
    groups; notes make the state descriptions differ where the observations agree."""
    out = []
    for g in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            states = draw(st.lists(st.sampled_from(ROOMS), min_size=2, max_size=7))
            notes = draw(st.lists(st.sampled_from(["", " holding a mug"]), min_size=len(states), max_size=len(states)))
            valid = draw(st.lists(st.booleans(), min_size=len(states) - 1, max_size=len(states) - 1))
            out.append((g, states, draw(st.booleans()), [v or i % 2 for i, v in enumerate(valid)], notes))
    return out


def to_batch(trajs, described: bool) -> RolloutBatch:
    cols = {k: [] for k in ("group_id", "traj_id", "step", "reward", "observation", "next_observation", "valid")}
    desc, next_desc = [], []
    for t, (g, states, won, valid, notes) in enumerate(trajs):
        for i in range(len(states) - 1):
            cols["group_id"].append(g)
            cols["traj_id"].append(t)
            cols["step"].append(i)
            cols["reward"].append(10.0 if won and i == len(states) - 2 else 0.0)
            cols["observation"].append(f"at {states[i]}")
            cols["next_observation"].append(f"at {states[i + 1]}")
            cols["valid"].append(bool(valid[i]))
            desc.append(f"at {states[i]}.{notes[i]}")
            next_desc.append(f"at {states[i + 1]}.{notes[i + 1]}")
    if described:
        cols["state_description"], cols["next_state_description"] = desc, next_desc
    return RolloutBatch.from_columns(**cols)


def verl_rows(b: RolloutBatch, states, nexts):
    """The batch as a verl-agent DataProto would hold it: rows in step-major order (trajectories interleave), uid /
    traj_uid strings, token_level_rewards with R_i - penalty on the last response token, the response mask."""
    order = np.lexsort((b.traj_id, b.step))
    pen = PEN * (~b.valid[order])
    tlr = torch.zeros(len(order), 3, dtype=torch.float64)
    tlr[:, 1] = torch.from_numpy(b.episode_return[order] - pen)
    mask = torch.ones(len(order), 3, dtype=torch.float64)
    mask[:, 2] = 0
    nt = {
        "uid": np.array([f"u{g}" for g in b.group_id[order]], dtype=object),
        "traj_uid": np.array([f"t{t}" for t in b.traj_id[order]], dtype=object),
        "anchor_obs": np.asarray(states, dtype=object)[order],
        "next_obs": np.asarray(nexts, dtype=object)[order],
        "is_action_valid": b.valid[order],
        "episode_rewards": b.episode_return[order],
    }
    data = SimpleNamespace(non_tensor_batch=nt, batch={"input_ids": torch.zeros(len(order), 2, dtype=torch.long)})
    return order, data, tlr, mask, pen


def graph_inputs(b: RolloutBatch, described: bool):
    states = b.state_description if described else b.observation
    nexts = np.asarray(b.next_state_description if described else b.next_observation, dtype=object).copy()
    last = np.r_[b.traj_id[1:] != b.traj_id[:-1], True]
    nexts[last & (b.episode_return > 0)] = "success"  # what the recipe's rollout loop writes
    return list(states), list(nexts)


# ------------------------------------------------------------------------------------------------------- GraphGPO
@SETTINGS
@given(
    rollouts(),
    st.booleans(),
    st.sampled_from([0.1, 0.2, 0.9]),
    st.booleans(),
    st.sampled_from(["mean_std_norm", "mean_norm"]),
    st.sampled_from([(1.0, 1.0), (0.5, 0.0), (0.0, 2.0)]),
)
def test_graphgpo_equals_the_public_loops(trajs, described, gamma, normalize, mode, weights):
    b = to_batch(trajs, described)
    states, nexts = graph_inputs(b, described)
    uid = [f"u{g}" for g in b.group_id]
    pen = PEN * (~b.valid)
    returns = ref.graph_path_returns(uid, states, nexts, gamma, normalize)
    expected = ref.graphgpo_advantage(
        list(b.episode_return - pen),
        [r - p for r, p in zip(returns, pen)],
        states,
        uid,
        step_w=weights[0],
        episode_w=weights[1],
        remove_std=mode == "mean_norm",
    )
    res = compute_advantages(
        "graphgpo",
        b,
        gamma=gamma,
        normalize_distance=normalize,
        scale="none" if mode == "mean_norm" else "std",
        step_advantage_w=weights[0],
        episode_advantage_w=weights[1],
    )
    np.testing.assert_allclose(res.returns, returns, rtol=1e-12)
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-9, atol=1e-9)

    # the recipe trainer's calls, in verl's row order
    order, data, tlr, mask, pen_v = verl_rows(b, states, nexts)
    graphs = ComplexGraph.from_data(data, enable_similarity=False, similarity_thresh=0.95)
    ComplexGraph.Calculate_all_shortest_path(graphs)
    step_rewards = compute_graph_path_returns(batch=data, Gs=graphs, gamma=gamma, normalize_distance=normalize)
    assert step_rewards.dtype == torch.float32 and step_rewards.shape == (len(order),)
    np.testing.assert_allclose(step_rewards.numpy(), np.asarray(returns)[order], rtol=1e-6)
    step_rewards = torch.as_tensor(np.asarray(returns)[order] - pen_v)  # float64, then the trainer's penalty
    adv, ret = compute_graphgpo_outcome_advantage(
        token_level_rewards=tlr,
        step_rewards=step_rewards,
        response_mask=mask,
        anchor_obs=data.non_tensor_batch["anchor_obs"],
        index=data.non_tensor_batch["uid"],
        traj_index=data.non_tensor_batch["traj_uid"],
        step_advantage_w=weights[0],
        episode_advantage_w=weights[1],
        mode=mode,
    )
    assert adv is ret and adv.dtype == torch.float64
    np.testing.assert_allclose(adv[:, 0].numpy(), np.asarray(expected)[order], rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(adv[:, 2].numpy(), 0.0)


@SETTINGS
@given(rollouts(), st.sampled_from([0.8, 0.9, 0.95]))
def test_graphgpo_similarity_equals_the_public_canonicaliser(trajs, thresh):
    b = to_batch(trajs, described=True)
    states, nexts = graph_inputs(b, True)
    uid = [f"u{g}" for g in b.group_id]
    returns = ref.graph_path_returns(uid, states, nexts, 0.1, False, enable_similarity=True, thresh=thresh)
    res = compute_advantages("graphgpo", b, enable_similarity=True, similarity_thresh=thresh)
    np.testing.assert_allclose(res.returns, returns, rtol=1e-12)
    # the drop-in meets the rows in verl's order, so the greedy merge may differ: compare with the loops in that order
    order, data, *_ = verl_rows(b, states, nexts)
    graphs = ComplexGraph.from_data(data, enable_similarity=True, similarity_thresh=thresh)
    got = compute_graph_path_returns(batch=data, Gs=graphs, gamma=0.1, normalize_distance=False)
    want = ref.graph_path_returns(
        list(data.non_tensor_batch["uid"]),
        list(data.non_tensor_batch["anchor_obs"]),
        list(data.non_tensor_batch["next_obs"]),
        0.1,
        False,
        enable_similarity=True,
        thresh=thresh,
    )
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


# ----------------------------------------------------------------------------------------------------------- RLOO
@SETTINGS
@given(rollouts(), st.booleans())
def test_rloo_equals_verls_loops(trajs, per_trajectory):
    b = to_batch(trajs, described=False)
    scores = list(b.episode_return - PEN * (~b.valid))
    expected = ref.rloo(scores, list(b.group_id), list(b.traj_id), cross_steps=not per_trajectory)
    res = compute_advantages("rloo", b, baseline_over="trajectories" if per_trajectory else "steps")
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-12, atol=1e-12)

    order, data, tlr, mask, _ = verl_rows(b, b.observation, b.next_observation)
    adv, ret = compute_rloo_outcome_advantage(
        token_level_rewards=tlr,
        response_mask=mask,
        index=data.non_tensor_batch["uid"],
        traj_index=data.non_tensor_batch["traj_uid"],
        compute_mean_std_cross_steps=not per_trajectory,
    )
    assert adv is ret
    np.testing.assert_allclose(adv[:, 0].numpy(), np.asarray(expected)[order], rtol=1e-12, atol=1e-12)


def test_rloo_drop_in_as_verl_agents_trainer_calls_it():
    tlr = torch.tensor([[0.0, 10.0], [0.0, 9.9], [0.0, 0.0], [0.0, 5.0]])
    index, traj = np.array(["a", "a", "a", "b"], dtype=object), np.array(["x", "x", "y", "z"], dtype=object)
    adv, _ = compute_rloo_outcome_advantage(
        token_level_rewards=tlr, response_mask=torch.ones(4, 2), index=index, traj_index=traj
    )
    m = 19.9 / 3
    assert adv.dtype == torch.float32
    np.testing.assert_allclose(adv[:, 1].numpy(), [1.5 * (10 - m), 1.5 * (9.9 - m), -1.5 * m, 5.0], rtol=1e-6)


# ------------------------------------------------------------------------------------------- HGPO, verl-agent recipe
def discounted(b: RolloutBatch, gamma: float) -> list[float]:
    out = [0.0] * b.n_rows
    running = 0.0
    for r in reversed(range(b.n_rows)):
        last = r == b.n_rows - 1 or b.traj_id[r + 1] != b.traj_id[r]
        running = b.reward[r] + (0.0 if last else gamma * running)
        out[r] = running
    return out


@SETTINGS
@given(
    rollouts(),
    st.integers(0, 3),
    st.sampled_from(["mean_std_norm", "mean_norm"]),
    st.sampled_from([0.0, 1.0, 2.0]),
    st.booleans(),
)
def test_hgpo_recipe_equals_the_public_loops(trajs, history_length, mode, alpha, base_group):
    b = to_batch(trajs, described=False)
    pen = PEN * (~b.valid)
    g = [x - p for x, p in zip(discounted(b, 0.95), pen)]
    scores = list(b.episode_return - pen)
    expected = ref.hgpo_recipe(
        scores,
        g,
        list(b.observation),
        list(b.group_id),
        list(b.traj_id),
        history_length,
        mode=mode,
        alpha=alpha,
        base_group=base_group,
    )
    res = compute_advantages(
        "hgpo",
        b,
        version="verl_agent",
        base_group=base_group,
        history_length=history_length,
        alpha=alpha,
        scale="none" if mode == "mean_norm" else "std",
    )
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-9, atol=1e-9)

    order, data, tlr, mask, _ = verl_rows(b, b.observation, b.next_observation)
    adv, ret = compute_hgpo_recipe_outcome_advantage(
        token_level_rewards=tlr,
        step_rewards=torch.as_tensor(np.asarray(g)[order]),
        response_mask=mask,
        anchor_obs=data.non_tensor_batch["anchor_obs"],
        index=data.non_tensor_batch["uid"],
        traj_index=data.non_tensor_batch["traj_uid"],
        history_length=history_length,
        mode=mode,
        length_weight_alpha=alpha,
        base_group=base_group,
    )
    assert adv is ret and adv.dtype == torch.promote_types(torch.float32, mask.dtype)  # the recipe's float32 * mask
    np.testing.assert_allclose(adv[:, 0].numpy(), np.asarray(expected)[order], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(adv[:, 2].numpy(), 0.0)


def test_hgpo_recipe_base_term_of_a_row_with_an_empty_mask_is_zero():
    tlr = torch.tensor([[10.0], [0.0], [0.0]])
    mask = torch.tensor([[1.0], [1.0], [0.0]])
    obs = np.array(["a", "b", "c"], dtype=object)  # no shared observation: only the base term is left
    adv, _ = compute_hgpo_recipe_outcome_advantage(
        token_level_rewards=tlr,
        step_rewards=torch.zeros(3),
        response_mask=mask,
        anchor_obs=obs,
        index=np.array(["u"] * 3, dtype=object),
        traj_index=np.array(["t1", "t2", "t3"], dtype=object),
        history_length=2,
        base_group=True,
    )
    expected = ref.hgpo_recipe(
        [10.0, 0, 0], [0.0] * 3, list(obs), ["u"] * 3, ["t1", "t2", "t3"], 2, base_group=True, mask_sums=[1, 1, 0]
    )
    np.testing.assert_allclose(adv[:, 0].numpy(), expected, rtol=1e-6)
    assert expected[2] == 0.0 and expected[0] > 0
