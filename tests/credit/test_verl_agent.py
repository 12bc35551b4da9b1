"""verl-agent drop-in: verl-agent's GiGPO numbers and conventions, and agreement with `compute_advantages`."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import torch

from scpo.credit import CreditConfig, compute_advantages
from scpo.credit.grouping import discounted_returns
from scpo.credit.synthetic import synthetic_batch
from scpo.integrations.verl_agent import (
    compute_g2po_outcome_advantage,
    compute_gigpo_outcome_advantage,
    compute_group_aggregation_values,
    compute_hgpo_outcome_advantage,
    compute_scpo_outcome_advantage,
)
from scpo.scorers import make_scorer

from helpers import reference_loops as loops
from helpers.credit import EPS


def loop_reference(scores, step_rewards, anchor_obs, index, remove_std, w=1.0):
    """verl-agent's conventions as plain loops (torch, float32): episode stats over all rows of a group with
    torch.std (unbiased), one-row group -> mean 0 / std 1; anchor groups by identical obs within a group, one-row
    anchor -> its own mean (0 after centring)."""

    def norm(values, keys, single_mean_zero):
        by = defaultdict(list)
        for v, k in zip(values, keys):
            by[k].append(v)
        out = []
        for v, k in zip(values, keys):
            vals = torch.tensor(by[k])
            if len(vals) == 1:
                mean, std = (torch.tensor(0.0) if single_mean_zero else vals.mean()), torch.tensor(1.0)
            else:
                mean, std = vals.mean(), torch.std(vals)
            out.append(float(v - mean) if remove_std else float((v - mean) / (std + EPS)))
        return np.array(out)

    ep = norm(list(scores), list(index), True)
    step = norm(list(step_rewards), [(i, o) for i, o in zip(index, anchor_obs)], False)
    return ep + w * step


def random_rows(seed, n=40):
    rng = np.random.default_rng(seed)
    index = rng.choice(["g1", "g2", "g3", "solo"], size=n, p=[0.3, 0.3, 0.37, 0.03])
    index[0] = "solo"  # a one-row episode group
    index[1:][index[1:] == "solo"] = "g1"
    return (
        rng.normal(size=n).astype(np.float32),
        rng.normal(size=n).astype(np.float32),
        rng.choice(["s0", "s1", "s2", "s3", "s4"], size=n).astype(object),
        index,
    )


@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gigpo_matches_verl_agent_conventions(mode, seed):
    scores, steps, obs, index = random_rows(seed)
    mask = torch.ones(len(scores), 5)
    mask[:, 3:] = 0
    tlr = torch.zeros(len(scores), 5)
    tlr[:, 2] = torch.from_numpy(scores)  # the score sits on the last response token
    adv, ret = compute_gigpo_outcome_advantage(
        tlr, torch.from_numpy(steps), mask, obs, index, index.copy(), mode=mode, step_advantage_w=0.7
    )
    expected = loop_reference(scores, steps, obs, index, mode == "mean_norm", w=0.7)
    assert adv.shape == (len(scores), 5) and adv.dtype == torch.float32 and adv is ret
    np.testing.assert_allclose(adv[:, 0].numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(adv[:, 3:].numpy(), 0.0)


def test_gigpo_conventions_by_hand():
    tlr = torch.tensor([[0.0, 10.0], [0.0, 0.0], [0.0, 7.0]])
    mask = torch.ones(3, 2)
    adv, _ = compute_gigpo_outcome_advantage(
        tlr,
        torch.tensor([9.5, 0.0, 3.0]),
        mask,
        np.array(["a", "a", "b"], object),
        np.array(["g", "g", "h"]),
        np.array(["t1", "t2", "t3"]),
        mode="mean_norm",
    )
    # g: scores 10, 0 -> +-5 ; anchor a: 9.5, 0 -> +-4.75 ; h: one row keeps 7 ; its anchor b is a singleton -> 0
    np.testing.assert_allclose(adv[:, 1].numpy(), [9.75, -9.75, 7.0])
    with pytest.raises(ValueError, match="Unknown mode: 'z_norm'"):
        compute_gigpo_outcome_advantage(
            tlr, torch.zeros(3), mask, np.array(["a"] * 3, object), np.zeros(3), np.arange(3), mode="z_norm"
        )


def verl_inputs(b):
    """verl-agent-style rows from a RolloutBatch: step-major order (trajectories interleave), penalty applied."""
    order = np.lexsort((b.traj_id, b.step))
    pen = 0.1 * (~b.valid)
    scores = (b.episode_return - pen)[order]
    tlr = torch.zeros(len(order), 4, dtype=torch.float32)
    tlr[:, 1] = torch.from_numpy(scores).float()
    steps = (discounted_returns(b.reward, b.traj_id, b.step, 0.95) - pen)[order]
    return order, tlr, torch.from_numpy(steps), torch.ones(len(order), 4)


@pytest.fixture(scope="module")
def batch():
    return synthetic_batch(n_groups=4, group_size=4, max_steps=10, n_states=8, seed=3)


@pytest.mark.parametrize("scale, mode", [("std", "mean_std_norm"), ("none", "mean_norm")])
def test_gigpo_drop_in_equals_compute_advantages(batch, scale, mode):
    order, tlr, steps, mask = verl_inputs(batch)
    adv, _ = compute_gigpo_outcome_advantage(
        tlr.double(),
        steps.double(),
        mask,
        batch.observation[order],
        batch.group_uid[order],
        batch.traj_uid[order],
        mode=mode,
    )
    res = compute_advantages("gigpo", batch, scale=scale)
    np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], atol=1e-9)


@pytest.mark.parametrize(
    "scpo_mode, options",
    [("advantage", {}), ("advantage", {"kappa": 0.6, "match": "first"}), ("returns", {"kappa_r": 0.3})],
)
@pytest.mark.parametrize("scale, mode", [("std", "mean_std_norm"), ("none", "mean_norm")])
def test_scpo_drop_in_equals_compute_advantages(batch, scpo_mode, options, scale, mode):
    order, tlr, steps, mask = verl_inputs(batch)
    texts = np.array([f"{a} -> {o}" for a, o in zip(batch.action, batch.next_observation)], dtype=object)
    scorer = make_scorer("lexical")
    adv, _ = compute_scpo_outcome_advantage(
        tlr.double(),
        steps.double(),
        mask,
        batch.observation[order],
        batch.group_uid[order],
        batch.traj_uid[order],
        step_texts=texts[order],
        scorer=scorer,
        mode=mode,
        won=batch.won[order],
        episode_rewards=batch.episode_return[order],
        tau=0.5,
        scpo_mode=scpo_mode,
        **options,
    )
    res = compute_advantages("scpo", batch, scorer=scorer, tau=0.5, mode=scpo_mode, scale=scale, **options)
    assert np.abs(res.diagnostics["scpo_credit"]).sum() > 0
    np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], atol=1e-9)


def test_scpo_drop_in_defaults_won_from_scores_and_r_from_success_reward():
    tlr = torch.tensor([[0.0, 10.0], [0.0, 10.0], [0.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    args = (
        tlr,
        torch.tensor([9.5, 10.0, 0.0, 0.0], dtype=torch.float64),
        torch.ones(4, 2),
        np.array(["s", "t", "s", "t"], object),
        np.array(["g"] * 4),
        np.array(["w", "w", "f", "f"]),
    )
    texts = {"step_texts": np.array(["X", "Y", "X", "V"], object), "scorer": make_scorer("lexical")}
    adv, _ = compute_scpo_outcome_advantage(*args, mode="mean_norm", **texts)
    base, _ = compute_gigpo_outcome_advantage(*args, mode="mean_norm")
    # the failed trajectory's first step replays the success's: + kappa * 1 * (10 - 0)
    np.testing.assert_allclose((adv - base)[:, 0].numpy(), [0, 0, 10.0, 0])


# ------------------------------------------------------------------------------------- G2PO, public signature
def g2po_public_reference(episode_rewards, anchor_obs, index, traj_index, valid, scores, remove_std, w=1.0):
    """G2PO as its public code describes it, in plain loops: node values mean of 0.95^(T - t) R over the rows of an
    anchor node (per uid); next node or sentinel (+10 success / 0 failure); node-centric term normalised within the
    node (one row -> 0), edge-centric gain normalised over the uid (unbiased std); verl's episode term."""
    n = len(index)
    node_of, rows_of_node, step, length = {}, defaultdict(list), np.zeros(n, int), np.zeros(n, int)
    for uid in np.unique(index):
        nodes = {}
        for t in np.unique(traj_index[index == uid]):
            rows = np.flatnonzero(traj_index == t)
            for k, r in enumerate(rows):
                step[r], length[r] = k, len(rows)
                node_of[r] = (uid, nodes.setdefault(anchor_obs[r], len(nodes)))
                rows_of_node[node_of[r]].append(r)
    value = {
        nd: np.mean(
            [
                0.95 ** (length[r] - step[r]) * episode_rewards[np.flatnonzero(traj_index == traj_index[r])[0]]
                for r in rs
            ]
        )
        for nd, rs in rows_of_node.items()
    }
    v_next = np.zeros(n)
    for r in range(n):
        rows = np.flatnonzero(traj_index == traj_index[r])
        k = list(rows).index(r)
        v_next[r] = value[node_of[rows[k + 1]]] if k + 1 < len(rows) else (10.0 if episode_rewards[r] == 10 else 0.0)
    pen = 0.1 * (1 - valid.astype(float))

    def norm(vals):
        vals = torch.tensor(vals, dtype=torch.float64)
        return vals - vals.mean() if remove_std else (vals - vals.mean()) / (torch.std(vals) + EPS)

    step_adv = np.zeros(n)
    for rs in rows_of_node.values():
        if len(rs) > 1:
            step_adv[rs] += norm(v_next[rs] - pen[rs]).numpy()
    for uid in np.unique(index):
        rs = np.flatnonzero(index == uid)
        step_adv[rs] += norm(v_next[rs] - np.array([value[node_of[r]] for r in rs])).numpy()
    ep = loop_reference(scores, np.zeros(n), np.zeros(n), index, remove_std, w=0.0)
    return ep + w * step_adv, np.array([value[node_of[r]] for r in range(n)])


class DataProtoLike:
    def __init__(self, **non_tensor):
        self.non_tensor_batch = non_tensor


@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
def test_g2po_drop_in_has_the_public_signature_and_numbers(batch, mode):
    order, tlr, steps, mask = verl_inputs(batch)
    er = batch.episode_return[order]
    data = DataProtoLike(
        episode_rewards=er,
        anchor_obs=batch.observation[order],
        traj_uid=batch.traj_uid[order],
        uid=batch.group_uid[order],
    )
    step_rewards, group_idx, next_group_idx = compute_group_aggregation_values(data)
    adv, ret = compute_g2po_outcome_advantage(
        token_level_rewards=tlr.double(),
        step_rewards=step_rewards,
        response_mask=mask,
        index=data.non_tensor_batch["uid"],
        traj_index=data.non_tensor_batch["traj_uid"],
        group_idx=group_idx,
        next_group_idx=next_group_idx,
        is_action_valid=batch.valid[order],
        step_advantage_w=0.8,
        mode=mode,
    )
    expected, values = g2po_public_reference(
        er,
        batch.observation[order],
        batch.group_uid[order],
        batch.traj_uid[order],
        batch.valid[order],
        tlr.double().sum(-1).numpy(),
        mode == "mean_norm",
        w=0.8,
    )
    np.testing.assert_allclose(step_rewards, values, rtol=1e-12)
    np.testing.assert_allclose(adv[:, 0].numpy(), expected, atol=1e-9)
    assert adv is ret
    assert set(next_group_idx[batch.done[order]].tolist()) <= {-1, -2}
    if mode == "mean_std_norm":  # and the pure estimator agrees (no one-row groups in this batch)
        np.testing.assert_allclose(
            adv[:, 0].numpy(), compute_advantages("g2po", batch, w=0.8).advantages[order], atol=1e-9
        )


# ------------------------------------------------------------------------------------- HGPO, public signature
@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
@pytest.mark.parametrize("history_length", [0, 1, 2, 3])
def test_hgpo_drop_in_has_the_public_signature_and_numbers(batch, mode, history_length):
    order, tlr, steps, mask = verl_inputs(batch)
    adv, ret = compute_hgpo_outcome_advantage(
        step_rewards=steps.double(),
        response_mask=mask,
        anchor_obs=batch.observation[order],
        index=batch.group_uid[order],
        traj_index=batch.traj_uid[order],
        types="hard",
        history_length=history_length,
        epsilon=EPS,
        weight_type="mean",
        mode=mode,
    )
    expected = loops.hgpo_authors(
        steps.numpy(),
        batch.observation[order],
        batch.group_uid[order],
        batch.traj_uid[order],
        history_length,
        mode == "mean_norm",
    )
    assert adv.dtype == torch.float32 and adv is ret
    np.testing.assert_allclose(adv[:, 0].numpy(), expected, rtol=1e-5, atol=1e-5)
    if mode == "mean_std_norm":
        res = compute_advantages("hgpo", batch, history_length=history_length)
        np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ every drop-in option, at non-default values
def verl_rows(b, *, gamma=0.95, lambda_invalid=0.1):
    """`verl_inputs` with another discount / penalty, in float64."""
    order = np.lexsort((b.traj_id, b.step))
    pen = lambda_invalid * (~b.valid)
    tlr = torch.zeros(len(order), 3, dtype=torch.float64)
    tlr[:, 2] = torch.from_numpy((b.episode_return - pen)[order])
    steps = torch.from_numpy((discounted_returns(b.reward, b.traj_id, b.step, gamma) - pen)[order])
    return order, tlr, steps, torch.ones(len(order), 3)


@pytest.fixture(scope="module")
def multi_success_batch():
    """Groups of 5 with 4, 3, 2 and 3 successes: SCPO's reference rules choose between several successes."""
    return synthetic_batch(n_groups=4, group_size=5, max_steps=8, n_states=6, seed=1)


SCPO_OPTIONS = [
    ("advantage", {"reference": "all"}),
    ("advantage", {"reference": "random", "seed": 3}),
    ("advantage", {"reference": "random", "seed": 4}),
    ("advantage", {"kappa": 0.3, "tau": 0.9}),
    ("advantage", {"match": "first", "tau": 0.6}),
    ("returns", {"reference": "all", "kappa_r": 0.2}),
    ("returns", {"success_reward": 4.0}),
    ("returns", {"gamma": 0.5}),
]


@pytest.mark.parametrize("scpo_mode, options", SCPO_OPTIONS)
@pytest.mark.parametrize("scale, mode", [("std", "mean_std_norm"), ("none", "mean_norm")])
def test_scpo_drop_in_forwards_every_option(multi_success_batch, scpo_mode, options, scale, mode):
    sr = options.get("success_reward", 10.0)
    b = (
        multi_success_batch
        if sr == 10.0
        else synthetic_batch(n_groups=4, group_size=5, max_steps=8, n_states=6, seed=1, success_reward=sr)
    )
    order, tlr, steps, mask = verl_rows(b, gamma=options.get("gamma", 0.95), lambda_invalid=0.3)
    texts = np.array([f"{a} -> {o}" for a, o in zip(b.action, b.next_observation)], dtype=object)
    scorer = make_scorer("lexical")
    # won and R_i come from the scores and success_reward (the defaults), the step weight and epsilon are not defaults
    adv, _ = compute_scpo_outcome_advantage(
        tlr,
        steps,
        mask,
        b.observation[order],
        b.group_uid[order],
        b.traj_uid[order],
        step_texts=texts[order],
        scorer=scorer,
        epsilon=1e-3,
        step_advantage_w=0.6,
        mode=mode,
        scpo_mode=scpo_mode,
        **options,
    )
    res = compute_advantages(
        "scpo",
        b,
        scorer=scorer,
        mode=scpo_mode,
        scale=scale,
        epsilon=1e-3,
        step_advantage_w=0.6,
        lambda_invalid=0.3,
        **options,
    )
    default = compute_advantages(
        "scpo", b, scorer=scorer, mode=scpo_mode, scale=scale, epsilon=1e-3, step_advantage_w=0.6, lambda_invalid=0.3
    )
    assert not np.allclose(res.advantages, default.advantages), "the option changes nothing on this batch"
    np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], rtol=1e-12, atol=1e-12)


def test_scpo_drop_in_similarity_anchors_equal_compute_advantages(multi_success_batch):
    b = multi_success_batch
    order, tlr, steps, mask = verl_rows(b)
    texts = np.array([f"{a} -> {o}" for a, o in zip(b.action, b.next_observation)], dtype=object)
    scorer = make_scorer("lexical")
    kwargs = {"mode": "mean_std_norm", "enable_similarity": True, "similarity_thresh": 0.7}
    adv, _ = compute_scpo_outcome_advantage(
        tlr,
        steps,
        mask,
        b.observation[order],
        b.group_uid[order],
        b.traj_uid[order],
        step_texts=texts[order],
        scorer=scorer,
        **kwargs,
    )
    res = compute_advantages("scpo", b, scorer=scorer, enable_similarity=True, similarity_thresh=0.7)
    exact = compute_advantages("scpo", b, scorer=scorer)
    assert not np.allclose(res.advantages, exact.advantages)
    np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], rtol=1e-12, atol=1e-12)
    gig, _ = compute_gigpo_outcome_advantage(
        tlr, steps, mask, b.observation[order], b.group_uid[order], b.traj_uid[order], **kwargs
    )  # its default scorer: difflib
    np.testing.assert_allclose(
        gig[:, 0].numpy(),
        compute_advantages("gigpo", b, enable_similarity=True, similarity_thresh=0.7).advantages[order],
        rtol=1e-12,
        atol=1e-12,
    )


def test_won_is_derived_from_positive_scores_of_the_trajectory():
    # WebShop-like partial scores: 0.5 on the last step is a success (> 0); a penalised failure scores -0.1
    tlr = torch.tensor([[0.0, 0.0], [0.0, 0.5], [0.0, -0.1], [0.0, 0.0]], dtype=torch.float64)
    args = (
        tlr,
        torch.tensor([0.475, 0.5, -0.1, 0.0], dtype=torch.float64),
        torch.ones(4, 2),
        np.array(["s", "t", "s", "u"], object),
        np.array(["g"] * 4),
        np.array(["w", "w", "f", "f"]),
    )
    texts = {"step_texts": np.array(["X", "Y", "X", "V"], object), "scorer": make_scorer("lexical")}
    adv, _ = compute_scpo_outcome_advantage(*args, mode="mean_norm", success_reward=2.0, **texts)
    base, _ = compute_gigpo_outcome_advantage(*args, mode="mean_norm")
    # the failure's first step replays the success's: + kappa * 1 * (R_w - R_f) = 2.0 * (1 - 0)
    np.testing.assert_allclose((adv - base)[:, 0].numpy(), [0, 0, 2.0, 0], rtol=1e-12, atol=1e-12)
    # R_i given explicitly (verl's episode_rewards) replaces success_reward * won
    adv, _ = compute_scpo_outcome_advantage(
        *args, mode="mean_norm", episode_rewards=np.array([0.5, 0.5, 0.0, 0.0]), **texts
    )
    np.testing.assert_allclose((adv - base)[:, 0].numpy(), [0, 0, 0.5, 0], rtol=1e-12, atol=1e-12)
    # an explicit won=False everywhere: no mixed group, nothing changes
    adv, _ = compute_scpo_outcome_advantage(*args, mode="mean_norm", won=np.zeros(4, bool), **texts)
    np.testing.assert_array_equal(adv.numpy(), base.numpy())


@pytest.mark.parametrize("mode, raw", [("mean_std_norm", 7.0 / (1 + 1e-6)), ("mean_norm", 7.0)])
def test_one_row_group_keeps_its_raw_score_in_float64(mode, raw):
    tlr = torch.tensor([[0.0, 10.0], [0.0, 0.0], [0.0, 7.0]], dtype=torch.float64)
    adv, _ = compute_gigpo_outcome_advantage(
        tlr,
        torch.tensor([9.5, 0.0, 3.0], dtype=torch.float64),
        torch.ones(3, 2),
        np.array(["a", "a", "b"], object),
        np.array(["g", "g", "h"]),
        np.array(["t1", "t2", "t3"]),
        mode=mode,
    )
    assert adv.dtype == torch.float64
    # the one-row group h keeps its raw score (divided by 1 + eps, verl's std of 1, under mean_std_norm)
    assert adv[2, 1].item() == raw
    ep = 5 / (np.sqrt(50) + 1e-6) if mode == "mean_std_norm" else 5.0
    st = 4.75 / (np.sqrt(2 * 4.75**2) + 1e-6) if mode == "mean_std_norm" else 4.75
    np.testing.assert_allclose(adv[:2, 1].numpy(), [ep + st, -ep - st], rtol=1e-12)


@pytest.mark.parametrize("mode, scale", [("mean_norm", "none"), ("mean_std_norm", "std")])
def test_g2po_drop_in_forwards_every_option(mode, scale):
    b = synthetic_batch(n_groups=4, group_size=5, max_steps=8, n_states=6, seed=8, success_reward=4.0)
    order, tlr, _, mask = verl_rows(b, lambda_invalid=0.3)
    data = DataProtoLike(
        episode_rewards=b.episode_return[order],
        anchor_obs=b.observation[order],
        traj_uid=b.traj_uid[order],
        uid=b.group_uid[order],
    )
    values, group_idx, next_group_idx = compute_group_aggregation_values(data, gamma=0.5, success_reward=4.0)
    adv, _ = compute_g2po_outcome_advantage(
        tlr,
        values,
        mask,
        b.group_uid[order],
        b.traj_uid[order],
        group_idx,
        next_group_idx,
        b.valid[order],
        epsilon=1e-3,
        step_advantage_w=0.4,
        mode=mode,
        invalid_action_penalty=0.3,
        success_value=7.0,
    )
    res = compute_advantages(
        "g2po", b, gamma=0.5, w=0.4, success_value=7.0, lambda_invalid=0.3, epsilon=1e-3, scale=scale
    )
    np.testing.assert_allclose(values, res.diagnostics["node_value"][order], rtol=1e-12)
    np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], rtol=1e-12, atol=1e-12)
    assert set(next_group_idx[b.done[order]].tolist()) == {-1, -2}


def test_group_aggregation_values_by_hand():
    # uid g: t1 = a -> b (R 10), t2 = a (R 0); rows interleaved step-major; node ids per uid in first appearance
    data = DataProtoLike(
        episode_rewards=np.array([10.0, 0.0, 10.0]),
        anchor_obs=np.array(["a", "a", "b"], object),
        traj_uid=np.array(["t1", "t2", "t1"]),
        uid=np.array(["g", "g", "g"]),
    )
    values, group_idx, next_group_idx = compute_group_aggregation_values(data)
    np.testing.assert_array_equal(group_idx, [0, 0, 1])
    np.testing.assert_array_equal(next_group_idx, [1, -2, -1])
    # V(a) = mean(0.95^2 * 10, 0.95 * 0), V(b) = 0.95 * 10
    np.testing.assert_allclose(values, [4.5125, 4.5125, 9.5], rtol=1e-12)


@pytest.mark.parametrize("mode, scale", [("mean_norm", "none"), ("mean_std_norm", "std")])
def test_hgpo_drop_in_forwards_alpha_and_epsilon(batch, mode, scale):
    order, _, steps, mask = verl_rows(batch)
    adv, _ = compute_hgpo_outcome_advantage(
        steps,
        mask,
        batch.observation[order],
        batch.group_uid[order],
        batch.traj_uid[order],
        history_length=2,
        epsilon=1e-2,
        mode=mode,
        alpha=2.5,
    )
    res = compute_advantages("hgpo", batch, history_length=2, alpha=2.5, epsilon=1e-2, scale=scale)
    default = compute_advantages("hgpo", batch, history_length=2, scale=scale)
    assert not np.allclose(res.advantages, default.advantages)
    np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order].astype(np.float32), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ conventions at the edges
def test_outputs_take_the_dtype_and_device_of_the_inputs():
    from scpo.integrations.verl_rows import broadcast

    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    like = torch.empty(0, dtype=torch.float16, device="meta")
    out = broadcast(np.array([0.5, -1.0]), mask, like)
    assert out.dtype == torch.float16 and out.device.type == "meta"
    out = broadcast(np.array([0.5, -1.0]), mask, [[0.0]])  # no dtype / device: float32 on the CPU
    assert out.dtype == torch.float32 and out.device.type == "cpu"
    np.testing.assert_array_equal(out.numpy(), [[0.5, 0.0], [-1.0, -1.0]])
    tlr = torch.tensor([[0.0, 10.0], [0.0, 0.0]], dtype=torch.float16)
    obs, uid, traj = np.array(["s", "s"], object), np.array(["g", "g"]), np.array(["w", "f"])
    for scpo_mode in ("advantage", "returns"):  # SCPO's credit is added in float64, returned in the input's dtype
        adv, _ = compute_scpo_outcome_advantage(
            tlr, torch.zeros(2, dtype=torch.float16), mask, obs, uid, traj, step_texts=obs, scpo_mode=scpo_mode
        )
        assert adv.dtype == torch.float16


def test_anchor_keys_of_lists_dicts_and_arrays():
    tlr = torch.zeros(4, 1, dtype=torch.float64)
    tlr[0, 0] = 10.0
    steps = torch.tensor([10.0, 0.0, 4.0, 2.0], dtype=torch.float64)
    index = np.array(["g"] * 4)
    for obs in (
        [["room", 1], ["room", 1], ["room", 2], ["room", 2]],
        [{"text": "room", "id": 1}, {"id": 1, "text": "room"}, {"text": "room", "id": 2}, {"text": "room", "id": 2}],
        [np.array([1, 2]), np.array([1, 2]), np.array([1, 3]), np.array([1, 3])],
    ):
        anchor = np.empty(4, dtype=object)
        anchor[:] = obs
        adv, _ = compute_gigpo_outcome_advantage(
            tlr, steps, torch.ones(4, 1), anchor, index, np.arange(4), step_advantage_w=1.0, mode="mean_norm"
        )
        # anchors {0, 1} (returns 10, 0) and {2, 3} (4, 2); episode scores 10, 0, 0, 0 -> mean 2.5
        np.testing.assert_allclose(adv[:, 0].numpy(), [7.5 + 5, -2.5 - 5, -2.5 + 1, -2.5 - 1], rtol=1e-12)


def test_inputs_that_require_grad_or_are_float32_arrays():
    tlr = torch.tensor([[0.0, 0.1], [0.0, 0.0], [0.0, 0.2]], requires_grad=True)
    steps = np.array([0.1, 0.3, 0.2], dtype=np.float32)
    adv, _ = compute_gigpo_outcome_advantage(
        tlr,
        steps,
        torch.ones(3, 2),
        np.array(["a", "a", "a"], object),
        np.array(["g"] * 3),
        np.arange(3),
        mode="mean_norm",
    )
    s = np.array([0.1, 0.0, 0.2], dtype=np.float32).astype(np.float64)  # float64 arithmetic on the float32 values
    g = steps.astype(np.float64)
    expected = (s - s.mean()) + (g - g.mean())
    assert adv.dtype == torch.float32
    np.testing.assert_allclose(adv[:, 0].detach().numpy(), expected.astype(np.float32), rtol=0, atol=0)


def test_drop_ins_default_to_mean_norm():
    b = synthetic_batch(n_groups=2, group_size=3, max_steps=5, n_states=4, seed=2)
    order, tlr, steps, mask = verl_rows(b)
    obs, uid, tuid = b.observation[order], b.group_uid[order], b.traj_uid[order]
    pairs = [
        (
            compute_gigpo_outcome_advantage(tlr, steps, mask, obs, uid, tuid)[0],
            compute_gigpo_outcome_advantage(tlr, steps, mask, obs, uid, tuid, mode="mean_norm")[0],
        ),
        (
            compute_hgpo_outcome_advantage(steps, mask, obs, uid, tuid)[0],
            compute_hgpo_outcome_advantage(steps, mask, obs, uid, tuid, mode="mean_norm")[0],
        ),
        (
            compute_scpo_outcome_advantage(tlr, steps, mask, obs, uid, tuid, step_texts=obs)[0],
            compute_scpo_outcome_advantage(
                tlr, steps, mask, obs, uid, tuid, step_texts=obs, scorer=make_scorer("lexical"), mode="mean_norm"
            )[0],
        ),
    ]
    data = DataProtoLike(episode_rewards=b.episode_return[order], anchor_obs=obs, traj_uid=tuid, uid=uid)
    values, gi, ngi = compute_group_aggregation_values(data)
    pairs.append(
        (
            compute_g2po_outcome_advantage(tlr, values, mask, uid, tuid, gi, ngi, b.valid[order])[0],
            compute_g2po_outcome_advantage(tlr, values, mask, uid, tuid, gi, ngi, b.valid[order], mode="mean_norm")[0],
        )
    )
    for default, explicit in pairs:
        np.testing.assert_array_equal(default.numpy(), explicit.numpy())
    assert gi.dtype == np.int64 and ngi.dtype == np.int64


def test_masked_tokens_stay_zero_and_both_outputs_agree():
    tlr = torch.tensor([[0.0, 10.0], [0.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    args = (
        tlr,
        torch.tensor([9.5, 0.0, 0.0], dtype=torch.float64),
        mask,
        np.array(["s", "s", "t"], object),
        np.array(["g"] * 3),
        np.array(["w", "f", "f"]),
    )
    base, _ = compute_gigpo_outcome_advantage(*args, mode="mean_norm")
    for scpo_mode in ("advantage", "returns"):
        adv, ret = compute_scpo_outcome_advantage(
            *args, step_texts=np.array(["X", "X", "Y"], object), mode="mean_norm", scpo_mode=scpo_mode
        )
        assert torch.equal(adv, ret)
        np.testing.assert_array_equal(adv[mask == 0].numpy(), 0.0)
        assert adv[1, 0] > base[1, 0]  # the failure's replayed first step is credited
        if scpo_mode == "advantage":
            np.testing.assert_allclose((adv - base).numpy(), [[0, 0], [10, 10], [0, 0]], rtol=1e-12)
    adv, ret = compute_hgpo_outcome_advantage(args[1], mask, args[3], args[4], args[5])
    assert torch.equal(adv, ret)
    np.testing.assert_array_equal(adv[mask == 0].numpy(), 0.0)
    np.testing.assert_allclose(adv[:2, 0].numpy(), [4.75, -4.75])


def test_scpo_drop_in_gap_uses_the_failures_own_return():
    # w (one step, R 10) is the first row; f1 (R 0) and f2 (R 5, not a success) replay its step
    tlr = torch.tensor([[10.0], [0.0], [0.0], [5.0]], dtype=torch.float64)
    steps = torch.tensor([10.0, 0.0, 0.0, 5.0], dtype=torch.float64)
    obs = np.array(["s", "s", "x", "s"], object)
    texts = np.array(["X", "X", "Q", "X"], object)
    traj = np.array(["w", "f1", "f1", "f2"])
    won = np.array([True, False, False, False])
    rewards = np.array([10.0, 0.0, 0.0, 5.0])
    common = {"mode": "mean_norm", "won": won, "episode_rewards": rewards}
    adv, _ = compute_scpo_outcome_advantage(
        tlr, steps, torch.ones(4, 1), obs, np.array(["g"] * 4), traj, step_texts=texts, **common
    )
    base, _ = compute_gigpo_outcome_advantage(
        tlr, steps, torch.ones(4, 1), obs, np.array(["g"] * 4), traj, mode="mean_norm"
    )
    # credit = kappa * s * (R_ref - R_i): 10 for f1's first step, 5 for f2's
    np.testing.assert_allclose((adv - base)[:, 0].numpy(), [0, 10, 0, 5], rtol=1e-12)
    # returns mode: f1's bonus 0.5 * 10 * 1 / T_ref(1) * 1 = 5 on its first step, discounted into nothing earlier
    adv, _ = compute_scpo_outcome_advantage(
        tlr,
        steps,
        torch.ones(4, 1),
        obs,
        np.array(["g"] * 4),
        traj,
        step_texts=texts,
        scorer=make_scorer("lexical"),
        scpo_mode="returns",
        **common,
    )
    shaped, _ = compute_gigpo_outcome_advantage(
        tlr,
        steps + torch.tensor([0.0, 5.0, 0.0, 5.0], dtype=torch.float64),
        torch.ones(4, 1),
        obs,
        np.array(["g"] * 4),
        traj,
        mode="mean_norm",
    )
    np.testing.assert_allclose(adv[:, 0].numpy(), [base[0, 0], shaped[1, 0], shaped[2, 0], shaped[3, 0]], rtol=1e-12)


class Exact:
    """1 for equal texts, `pairs` for listed ones, else 0 (a scorer lexical similarity would disagree with)."""

    def __init__(self, pairs):
        self.pairs = {**pairs, **{(b, a): s for (a, b), s in pairs.items()}}
        self.stats = {"pairs_scored": 0, "cache_hits": 0}

    def score(self, pairs):
        return np.array([1.0 if a == b else self.pairs.get((a, b), 0.0) for a, b in pairs])

    def score_matrix(self, left, right):
        return self.score([(a, b) for a in left for b in right]).reshape(len(left), len(right))


@pytest.mark.parametrize("scpo_mode", ["advantage", "returns"])
def test_scpo_drop_in_passes_its_similarity_scorer_and_options_to_the_anchors(scpo_mode):
    # anchors "kitchen" and "zzz" merge only under the given scorer (lexically they share nothing)
    scorer = Exact({("kitchen", "zzz"): 0.99})
    tlr = torch.tensor([[10.0], [10.0], [0.0], [0.0]], dtype=torch.float64)  # verl: R_i on every row
    steps = torch.tensor([9.5, 10.0, 0.0, 0.0], dtype=torch.float64)
    obs = np.array(["kitchen", "hall", "zzz", "hall"], object)
    traj, uid = np.array(["w", "w", "f", "f"]), np.array(["g"] * 4)
    texts = np.array(["X", "Y", "Z", "V"], object)
    adv, _ = compute_scpo_outcome_advantage(
        tlr,
        steps,
        torch.ones(4, 1),
        obs,
        uid,
        traj,
        step_texts=texts,
        scorer=Exact({}),
        similarity_scorer=scorer,
        mode="mean_norm",
        enable_similarity=True,
        similarity_thresh=0.9,
        scpo_mode=scpo_mode,
    )
    # nothing is credited (no text matches): GiGPO with the merged anchor {kitchen, zzz}: 9.5, 0 -> +-4.75;
    # hall: 10, 0 -> +-5; episode: 10, 10, 0, 0 -> +-5
    np.testing.assert_allclose(adv[:, 0].numpy(), [5 + 4.75, 5 + 5, -5 - 4.75, -5 - 5], rtol=1e-12)
    # SCPO's matching scorer is not the anchors': by default difflib's ratio, which keeps kitchen and zzz apart
    adv, _ = compute_scpo_outcome_advantage(
        tlr,
        steps,
        torch.ones(4, 1),
        obs,
        uid,
        traj,
        step_texts=texts,
        scorer=scorer,
        mode="mean_norm",
        enable_similarity=True,
        similarity_thresh=0.9,
        scpo_mode=scpo_mode,
    )
    np.testing.assert_allclose(adv[:, 0].numpy(), [5, 5 + 5, -5, -5 - 5], rtol=1e-12)


def test_numpy_token_rewards_are_summed_in_float64():
    # float32 numpy token rewards (a numpy array has no torch dtype: the result is float32, as verl's): the episode
    # score is the float64 sum of the float32 values; in float32, 1e8 + 1 - 1e8 would be 0
    tlr = np.array([[1e8, 1.0, -1e8], [0.0, 0.0, 0.0]], dtype=np.float32)
    adv, ret = compute_gigpo_outcome_advantage(
        tlr,
        np.zeros(2),
        np.ones((2, 3)),
        np.array(["a", "b"], object),
        np.array(["g"] * 2),
        np.arange(2),
        mode="mean_norm",
    )
    assert adv.dtype == torch.float32 and adv.device.type == "cpu"
    np.testing.assert_array_equal(adv.numpy(), [[0.5] * 3, [-0.5] * 3])


def test_column_shaped_per_row_inputs_are_flattened(batch):
    order, tlr, steps, mask = verl_rows(batch)
    obs, uid, tuid = batch.observation[order], batch.group_uid[order], batch.traj_uid[order]
    col = steps.unsqueeze(-1)
    for flat_out, col_out in [
        (
            compute_gigpo_outcome_advantage(tlr, steps, mask, obs, uid, tuid)[0],
            compute_gigpo_outcome_advantage(tlr, col, mask, obs, uid, tuid)[0],
        ),
        (
            compute_hgpo_outcome_advantage(steps, mask, obs, uid, tuid)[0],
            compute_hgpo_outcome_advantage(col, mask, obs, uid, tuid)[0],
        ),
    ]:
        np.testing.assert_array_equal(col_out.numpy(), flat_out.numpy())
    texts, scorer = (
        np.array([f"{a} -> {o}" for a, o in zip(batch.action, batch.next_observation)], object)[order],
        make_scorer("lexical"),
    )
    er = batch.episode_return[order]
    for scpo_mode in ("advantage", "returns"):
        flat, _ = compute_scpo_outcome_advantage(
            tlr,
            steps,
            mask,
            obs,
            uid,
            tuid,
            step_texts=texts,
            scorer=scorer,
            tau=0.5,
            episode_rewards=er,
            scpo_mode=scpo_mode,
        )
        column, _ = compute_scpo_outcome_advantage(
            tlr,
            col,
            mask,
            obs,
            uid,
            tuid,
            step_texts=texts,
            scorer=scorer,
            tau=0.5,
            episode_rewards=er.reshape(-1, 1),
            scpo_mode=scpo_mode,
        )
        np.testing.assert_array_equal(column.numpy(), flat.numpy())
    data = DataProtoLike(episode_rewards=er, anchor_obs=obs, traj_uid=tuid, uid=uid)
    values, gi, ngi = compute_group_aggregation_values(data)
    data_col = DataProtoLike(episode_rewards=er.reshape(-1, 1), anchor_obs=obs, traj_uid=tuid, uid=uid)
    np.testing.assert_array_equal(compute_group_aggregation_values(data_col)[0], values)
    g2 = compute_g2po_outcome_advantage(tlr, values, mask, uid, tuid, gi, ngi, batch.valid[order])[0]
    g2_col = compute_g2po_outcome_advantage(tlr, values.reshape(-1, 1), mask, uid, tuid, gi, ngi, batch.valid[order])[0]
    np.testing.assert_array_equal(g2_col.numpy(), g2.numpy())


def test_hgpo_drop_in_output_lives_on_the_mask_device():
    mask = torch.ones(3, 2, device="meta")
    out, _ = compute_hgpo_outcome_advantage(
        torch.tensor([1.0, 0.0, 2.0]),
        mask,
        np.array(["a", "a", "b"], object),
        np.array(["g"] * 3),
        np.array(["t0", "t1", "t2"]),
    )
    assert out.device.type == "meta" and out.dtype == torch.float32 and out.shape == (3, 2)


def test_scpo_drop_in_reference_weights_the_return_gaps():
    # S1 = (A, B) and S2 = (C, D) tie on length; F1 (R 0) replays A, F2 (R 5, a failure) replays C: S1 gives the
    # failures credit 10 * 1, S2 gives 5 * 1, so S1 is the reference and only F1's first step gains (10 - 0)
    texts = np.array(["A", "B", "C", "D", "A", "Q", "C", "Q"], object)
    traj = np.array(["s1", "s1", "s2", "s2", "f1", "f1", "f2", "f2"])
    r = np.array([10, 10, 10, 10, 0, 0, 5, 5], dtype=np.float64)
    tlr = torch.from_numpy(r).unsqueeze(-1)
    obs = np.array([f"o{i}" for i in range(8)], object)
    won = np.array([True] * 4 + [False] * 4)
    args = (tlr, torch.zeros(8, dtype=torch.float64), torch.ones(8, 1), obs, np.array(["g"] * 8), traj)
    adv, _ = compute_scpo_outcome_advantage(
        *args, step_texts=texts, scorer=make_scorer("lexical"), mode="mean_norm", won=won, episode_rewards=r
    )
    base, _ = compute_gigpo_outcome_advantage(*args, mode="mean_norm")
    np.testing.assert_allclose((adv - base)[:, 0].numpy(), [0, 0, 0, 0, 10, 0, 0, 0], rtol=1e-12)


def test_scpo_drop_in_returns_mode_reads_the_similarity_options(multi_success_batch):
    b = multi_success_batch
    order, tlr, steps, mask = verl_rows(b)
    texts = np.array([f"{a} -> {o}" for a, o in zip(b.action, b.next_observation)], dtype=object)
    scorer = make_scorer("lexical")
    for kwargs in ({"enable_similarity": True, "similarity_thresh": 0.7}, {}):
        adv, _ = compute_scpo_outcome_advantage(
            tlr,
            steps,
            mask,
            b.observation[order],
            b.group_uid[order],
            b.traj_uid[order],
            step_texts=texts[order],
            scorer=scorer,
            mode="mean_std_norm",
            scpo_mode="returns",
            tau=0.5,
            **kwargs,
        )
        res = compute_advantages("scpo", b, scorer=scorer, mode="returns", tau=0.5, **kwargs)
        np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- GraphGPO, as recipe/GraphGPO's trainer
def test_graphgpo_drop_ins_as_the_recipe_trainer_calls_them():
    """The trainer's sequence: graphs from the rollout batch, path returns, the invalid penalty on the last response
    token and on step_rewards (`apply_invalid_action_penalty`), then the advantage; equal to `compute_advantages`."""
    from types import SimpleNamespace

    from scpo.credit.graphgpo import state_keys
    from scpo.integrations.verl_agent import (
        ComplexGraph,
        compute_graph_path_returns,
        compute_graphgpo_outcome_advantage,
    )

    b = synthetic_batch(n_groups=4, group_size=4, max_steps=8, n_states=5, seed=7)
    b.state_description = np.array([f"{o} (desc)" for o in b.observation], dtype=object)
    b.next_state_description = np.array([f"{o} (desc)" for o in b.next_observation], dtype=object)
    anchor, next_obs = state_keys(b)  # next_obs is "success" after a won trajectory's last step, as the rollout loop
    order = np.lexsort((b.traj_id, b.step))
    n = len(order)
    response_length = 4
    valid_len = np.random.default_rng(0).integers(1, response_length + 1, size=n)
    token_level_scores = torch.zeros(n, response_length)
    token_level_scores[np.arange(n), valid_len - 1] = torch.from_numpy(b.episode_return[order]).float()
    response_mask = (torch.arange(response_length)[None, :] < torch.from_numpy(valid_len)[:, None]).long()
    data = SimpleNamespace(
        batch={"input_ids": torch.zeros(n, 3, dtype=torch.long), "token_level_scores": token_level_scores},
        non_tensor_batch={
            "uid": np.array([f"uid-{g}" for g in b.group_id[order]], dtype=object),
            "traj_uid": np.array([f"traj-{t}" for t in b.traj_id[order]], dtype=object),
            "anchor_obs": anchor[order],
            "next_obs": next_obs[order],
            "is_action_valid": b.valid[order],
            "episode_rewards": b.episode_return[order],
            "text_actions": b.action[order],
        },
    )
    for gamma, scale, mode, env in [(0.1, "std", "mean_std_norm", "alfworld"), (0.2, "none", "mean_norm", None)]:
        Gs = ComplexGraph.from_data(data, enable_similarity=False, similarity_thresh=0.95)
        ComplexGraph.Calculate_all_shortest_path(Gs)
        data.batch["step_rewards"] = compute_graph_path_returns(
            batch=data, Gs=Gs, gamma=gamma, normalize_distance=False
        )
        scores, step_rewards = data.batch["token_level_scores"].clone(), data.batch["step_rewards"].clone()
        invalid = torch.from_numpy(1 - data.non_tensor_batch["is_action_valid"].astype(np.float32))
        scores[np.arange(n), valid_len - 1] -= 0.1 * invalid
        step_rewards -= 0.1 * invalid
        adv, returns = compute_graphgpo_outcome_advantage(
            token_level_rewards=scores,
            step_rewards=step_rewards,
            response_mask=response_mask,
            anchor_obs=data.non_tensor_batch["anchor_obs"],
            index=data.non_tensor_batch["uid"],
            traj_index=data.non_tensor_batch["traj_uid"],
            step_advantage_w=1.0,
            episode_advantage_w=1.0,
            mode=mode,
        )
        assert adv is returns and adv.dtype == torch.float32 and adv.shape == (n, response_length)
        cfg = CreditConfig().for_env(env)
        res = compute_advantages("graphgpo", b, cfg, gamma=gamma, scale=scale)
        np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(adv.numpy()[response_mask.numpy() == 0], 0.0)


def test_field_drop_ins_keep_the_device_dtype_and_defaults():
    """Tensors land where the batch's are (a meta device stands in for a GPU), float32 as the public code's, and the
    defaults are the public signatures' (GraphGPO: exact nodes, mean_std_norm)."""
    from types import SimpleNamespace

    from scpo.integrations.verl_agent import (
        ComplexGraph,
        compute_graph_path_returns,
        compute_graphgpo_outcome_advantage,
        compute_hgpo_recipe_outcome_advantage,
        compute_rloo_outcome_advantage,
    )

    long = "You arrive at countertop 1. On the countertop 1, you see a mug 1, a plate 2, a fork 3 and a spoon "
    nt = {
        "uid": np.array(["u", "u"], dtype=object),
        "anchor_obs": np.array([long + "4.", long + "5."], dtype=object),
        "next_obs": np.array(["success", long + "4."], dtype=object),
    }
    graphs = ComplexGraph.from_data(SimpleNamespace(non_tensor_batch=nt))  # exact nodes by default: 5. -> 4. -> goal
    assert list(graphs) == ["u"] and graphs["u"].shortest_path_to_final is None
    ComplexGraph.Calculate_all_shortest_path(graphs)
    assert graphs["u"].shortest_path_to_final == ({long + "4.": 1, "success": 0, long + "5.": 2}, None)
    assert graphs["u"].final_state == "success" and graphs["u"].first_state is None  # no traj_uid given
    meta = SimpleNamespace(non_tensor_batch=nt, batch={"input_ids": torch.zeros(2, 1, device="meta")})
    returns = compute_graph_path_returns(batch=meta, Gs=graphs, gamma=0.5, normalize_distance=False)
    assert returns.device.type == "meta" and returns.dtype == torch.float32
    on_cpu = compute_graph_path_returns(batch=SimpleNamespace(non_tensor_batch=nt), Gs=graphs, gamma=0.5)
    np.testing.assert_allclose(on_cpu.numpy(), [10.0, 5.0])

    tlr = torch.tensor([[10.0], [0.0], [0.0]])
    index, traj = np.array(["a", "a", "b"], dtype=object), np.array(["t", "t", "t"], dtype=object)
    adv, _ = compute_graphgpo_outcome_advantage(
        tlr, torch.tensor([1.0, 0.0, 3.0]), torch.ones(3, 1), index, index, traj
    )
    # anchors = uids here: step term over {1, 0} in "a" ("b" alone: 0), episode term over {10, 0} ("b" keeps its 0)
    a = 0.5 / (np.std([1.0, 0.0], ddof=1) + EPS) + 5 / (np.std([10.0, 0.0], ddof=1) + EPS)
    np.testing.assert_allclose(adv[:, 0].numpy(), [a, -a, 0.0], rtol=1e-6)  # mean_std_norm: the default mode
    # RLOO per trajectory: the same trajectory id under two uids is two trajectories, as verl's (uid, traj) pairs
    adv, _ = compute_rloo_outcome_advantage(tlr, torch.ones(3, 1), index, traj, compute_mean_std_cross_steps=False)
    np.testing.assert_allclose(adv[:, 0].numpy(), [10.0, 0.0, 0.0])  # N = 1 in each uid: the scores themselves

    int_mask = torch.ones(3, 2, dtype=torch.long)
    obs = np.array(["x", "x", "y"], dtype=object)
    kwargs = {
        "step_rewards": torch.tensor([1.0, 0.0, 2.0]),
        "anchor_obs": obs,
        "index": index,
        "traj_index": np.array(["p", "q", "r"]),
    }
    adv, _ = compute_hgpo_recipe_outcome_advantage(tlr, response_mask=int_mask, history_length=1, **kwargs)
    assert adv.dtype == torch.float32 and adv.shape == (3, 2)
    a = 0.5 / (0.5 + EPS) * 2 / (2 + EPS)  # "x": {1, 0}, population std 0.5, weight (0 + 2)^1 over (2 + eps)
    np.testing.assert_allclose(adv[:, 1].numpy(), [a, -a, 0.0], rtol=1e-6)
    on_meta, _ = compute_hgpo_recipe_outcome_advantage(
        tlr, response_mask=torch.ones(3, 2, device="meta"), history_length=1, **kwargs
    )
    assert on_meta.device.type == "meta"


def test_recipe_base_term_averages_the_twice_masked_episode_term():
    from scpo.integrations.verl_agent import recipe_base_term

    mask = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.0]])
    got = recipe_base_term(np.array([2.0, -3.0, 4.0, 1.0]), mask)
    # one token: 2 ; two: -3 ; an empty mask: 0 ; a fractional mask 0.5, 0.5: (0.25 + 0.25) / 1 = 0.5
    np.testing.assert_allclose(got, [2.0, -3.0, 0.0, 0.5], rtol=1e-15)
    tiny = recipe_base_term(np.array([1.0]), np.array([[1e-9]]))
    assert tiny[0] == pytest.approx(1e-18 / 1e-8, rel=1e-12)  # the sum is clamped at 1e-8
