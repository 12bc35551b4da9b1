"""verl-agent drop-in: verl-agent's GiGPO numbers and conventions, and agreement with `compute_advantages`."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import torch

from scpo.credit import compute_advantages
from scpo.credit.grouping import discounted_returns
from scpo.credit.synthetic import synthetic_batch
from scpo.integrations.verl_agent import (compute_g2po_outcome_advantage, compute_gigpo_outcome_advantage,
                                          compute_group_aggregation_values, compute_hgpo_outcome_advantage,
                                          compute_scpo_outcome_advantage)
from scpo.scorers import make_scorer

EPS = 1e-6


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
    index[0] = "solo"                                                   # a one-row episode group
    index[1:][index[1:] == "solo"] = "g1"
    return (rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32),
            rng.choice(["s0", "s1", "s2", "s3", "s4"], size=n).astype(object), index)


@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gigpo_matches_verl_agent_conventions(mode, seed):
    scores, steps, obs, index = random_rows(seed)
    mask = torch.ones(len(scores), 5)
    mask[:, 3:] = 0
    tlr = torch.zeros(len(scores), 5)
    tlr[:, 2] = torch.from_numpy(scores)                               # the score sits on the last response token
    adv, ret = compute_gigpo_outcome_advantage(tlr, torch.from_numpy(steps), mask, obs, index, index.copy(),
                                               mode=mode, step_advantage_w=0.7)
    expected = loop_reference(scores, steps, obs, index, mode == "mean_norm", w=0.7)
    assert adv.shape == (len(scores), 5) and adv.dtype == torch.float32 and adv is ret
    np.testing.assert_allclose(adv[:, 0].numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(adv[:, 3:].numpy(), 0.0)


def test_gigpo_conventions_by_hand():
    tlr = torch.tensor([[0.0, 10.0], [0.0, 0.0], [0.0, 7.0]])
    mask = torch.ones(3, 2)
    adv, _ = compute_gigpo_outcome_advantage(tlr, torch.tensor([9.5, 0.0, 3.0]), mask, np.array(["a", "a", "b"], object),
                                             np.array(["g", "g", "h"]), np.array(["t1", "t2", "t3"]), mode="mean_norm")
    # g: scores 10, 0 -> +-5 ; anchor a: 9.5, 0 -> +-4.75 ; h: one row keeps 7 ; its anchor b is a singleton -> 0
    np.testing.assert_allclose(adv[:, 1].numpy(), [9.75, -9.75, 7.0])
    with pytest.raises(ValueError, match="Unknown mode: 'z_norm'"):
        compute_gigpo_outcome_advantage(tlr, torch.zeros(3), mask, np.array(["a"] * 3, object), np.zeros(3),
                                        np.arange(3), mode="z_norm")


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
    adv, _ = compute_gigpo_outcome_advantage(tlr.double(), steps.double(), mask, batch.observation[order],
                                             batch.group_uid[order], batch.traj_uid[order], mode=mode)
    res = compute_advantages("gigpo", batch, scale=scale)
    np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], atol=1e-9)


@pytest.mark.parametrize("scpo_mode, options", [("advantage", {}), ("advantage", {"kappa": 0.6, "match": "first"}),
                                                ("returns", {"kappa_r": 0.3})])
@pytest.mark.parametrize("scale, mode", [("std", "mean_std_norm"), ("none", "mean_norm")])
def test_scpo_drop_in_equals_compute_advantages(batch, scpo_mode, options, scale, mode):
    order, tlr, steps, mask = verl_inputs(batch)
    texts = np.array([f"{a} -> {o}" for a, o in zip(batch.action, batch.next_observation)], dtype=object)
    scorer = make_scorer("lexical")
    adv, _ = compute_scpo_outcome_advantage(tlr.double(), steps.double(), mask, batch.observation[order],
                                            batch.group_uid[order], batch.traj_uid[order], texts[order], scorer,
                                            mode=mode, won=batch.won[order], episode_rewards=batch.episode_return[order],
                                            tau=0.5, scpo_mode=scpo_mode, **options)
    res = compute_advantages("scpo", batch, scorer=scorer, tau=0.5, mode=scpo_mode, scale=scale, **options)
    assert np.abs(res.diagnostics["scpo_credit"]).sum() > 0
    np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], atol=1e-9)


def test_scpo_drop_in_defaults_won_from_scores_and_r_from_success_reward():
    tlr = torch.tensor([[0.0, 10.0], [0.0, 10.0], [0.0, 0.0], [0.0, 0.0]], dtype=torch.float64)
    args = (tlr, torch.tensor([9.5, 10.0, 0.0, 0.0], dtype=torch.float64), torch.ones(4, 2),
            np.array(["s", "t", "s", "t"], object), np.array(["g"] * 4), np.array(["w", "w", "f", "f"]),
            np.array(["X", "Y", "X", "V"], object), make_scorer("lexical"))
    adv, _ = compute_scpo_outcome_advantage(*args, mode="mean_norm")
    base, _ = compute_gigpo_outcome_advantage(*args[:6], mode="mean_norm")
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
    value = {nd: np.mean([0.95 ** (length[r] - step[r]) * episode_rewards[np.flatnonzero(traj_index == traj_index[r])[0]]
                          for r in rs]) for nd, rs in rows_of_node.items()}
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
    for nd, rs in rows_of_node.items():
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
    data = DataProtoLike(episode_rewards=er, anchor_obs=batch.observation[order], traj_uid=batch.traj_uid[order],
                         uid=batch.group_uid[order])
    step_rewards, group_idx, next_group_idx = compute_group_aggregation_values(data)
    adv, ret = compute_g2po_outcome_advantage(
        token_level_rewards=tlr.double(), step_rewards=step_rewards, response_mask=mask, index=data.non_tensor_batch["uid"],
        traj_index=data.non_tensor_batch["traj_uid"], group_idx=group_idx, next_group_idx=next_group_idx,
        is_action_valid=batch.valid[order], step_advantage_w=0.8, mode=mode)
    expected, values = g2po_public_reference(er, batch.observation[order], batch.group_uid[order],
                                             batch.traj_uid[order], batch.valid[order], tlr.double().sum(-1).numpy(),
                                             mode == "mean_norm", w=0.8)
    np.testing.assert_allclose(step_rewards, values, rtol=1e-12)
    np.testing.assert_allclose(adv[:, 0].numpy(), expected, atol=1e-9)
    assert adv is ret
    assert set(next_group_idx[batch.done[order]].tolist()) <= {-1, -2}
    if mode == "mean_std_norm":   # and the pure estimator agrees (no one-row groups in this batch)
        np.testing.assert_allclose(adv[:, 0].numpy(), compute_advantages("g2po", batch, w=0.8).advantages[order],
                                   atol=1e-9)


# ------------------------------------------------------------------------------------- HGPO, public signature
def hgpo_public_reference(step_rewards, anchor_obs, index, traj_index, history_length, remove_std, alpha=1.0):
    """HGPO as its public code describes it, in loops: within a uid, clusters of the same observation (one row -> 0);
    inside each, for l = 0..K, sub-clusters by the l previous observations (steps with t < l left out), kept when
    larger than one; population-std scores; weights (l + 1)^alpha over the non-zero scores."""
    out = np.zeros(len(index))
    for uid in np.unique(index):
        rows = np.flatnonzero(index == uid)
        trajs = {t: [r for r in rows if traj_index[r] == t] for t in np.unique(traj_index[rows])}
        pos = {r: (t, k) for t, rs in trajs.items() for k, r in enumerate(rs)}
        by_obs = defaultdict(list)
        for r in rows:
            by_obs[anchor_obs[r]].append(r)
        for members in by_obs.values():
            if len(members) < 2:
                continue
            scores = defaultdict(list)
            for depth in range(history_length + 1):
                clusters = defaultdict(list)
                for r in members:
                    t, k = pos[r]
                    if k >= depth:
                        clusters[tuple(anchor_obs[q] for q in trajs[t][k - depth:k])].append(r)
                for key, rs in clusters.items():
                    if len(rs) < 2:
                        continue
                    v = np.array([step_rewards[r] for r in rs])
                    z = v - v.mean() if remove_std else (v - v.mean()) / (v.std() + EPS)
                    for r, a in zip(rs, z):
                        scores[r].append((depth + 1, a))
            for r, pairs in scores.items():
                kept = [(ln ** alpha, a) for ln, a in pairs if a != 0]
                out[r] = sum(w * a for w, a in kept) / sum(w for w, _ in kept) if kept else 0.0
    return out


@pytest.mark.parametrize("mode", ["mean_norm", "mean_std_norm"])
@pytest.mark.parametrize("history_length", [0, 1, 2, 3])
def test_hgpo_drop_in_has_the_public_signature_and_numbers(batch, mode, history_length):
    order, tlr, steps, mask = verl_inputs(batch)
    adv, ret = compute_hgpo_outcome_advantage(step_rewards=steps.double(), response_mask=mask,
                                              anchor_obs=batch.observation[order], index=batch.group_uid[order],
                                              traj_index=batch.traj_uid[order], types="hard",
                                              history_length=history_length, epsilon=EPS, weight_type="mean", mode=mode)
    expected = hgpo_public_reference(steps.numpy(), batch.observation[order], batch.group_uid[order],
                                     batch.traj_uid[order], history_length, mode == "mean_norm")
    assert adv.dtype == torch.float32 and adv is ret
    np.testing.assert_allclose(adv[:, 0].numpy(), expected, rtol=1e-5, atol=1e-5)
    if mode == "mean_std_norm":
        res = compute_advantages("hgpo", batch, history_length=history_length)
        np.testing.assert_allclose(adv[:, 0].numpy(), res.advantages[order], rtol=1e-5, atol=1e-5)
