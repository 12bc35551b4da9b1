"""The drop-ins and GiGPO's similarity at the edges a verl-agent user meets: long observations (difflib's autojunk),
one trajectory id in two uid groups, positional calls, verl-agent's public names and the objects the GraphGPO recipe
reads; against verl-agent's code transcribed in tests/helpers/verl_agent_public.py."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scpo.batch import RolloutBatch
from scpo.credit import compute_advantages
from scpo.integrations import verl_agent
from scpo.scorers import make_scorer

from helpers import reference_loops as loops
from helpers import verl_agent_public as public

# Two 408-character ALFWorld rooms that differ in 4 digits. verl-agent scores are_similar(obs, representative):
# SequenceMatcher(None, ROOM_B, ROOM_A). Its autojunk heuristic seeds no block on a character occurring more than 5
# times in ROOM_A, so the first block it finds pairs ROOM_B's "armchair 4, a" with ROOM_A's "coffeemachine 4, and"
# near the end, and only 80 + 4 + 46 = 130 of the 408 characters match: 0.3186 (rapidfuzz's Indel ratio: 0.9902).
_ROOM = (
    "You are in the middle of a room. Looking quickly around you, you see a armchair {}, a armchair 3, a sidetable 2, "
    "a bed 3, a desk 3, a fridge 2, a coffeemachine 1, a bed 1, a coffeemachine {}, a coffeemachine 5, a fridge 1, a "
    "sidetable 1, a armchair 1, a desk 2, a coffeemachine {}, a desk 1, a bed 2, a armchair 2, a coffeemachine 2, a "
    "coffeemachine 4, and a desk {}.\n\nYour task is to: put two cellphone in sofa."
)
ROOM_A, ROOM_B = _ROOM.format(6, 2, 5, 7), _ROOM.format(4, 3, 6, 4)


def two_rooms():
    """verl-agent rows: one group, a won one-step trajectory in room A and a failed one in room B."""
    return (
        torch.tensor([[10.0], [0.0]], dtype=torch.float64),  # token_level_rewards: R_i on the last token
        torch.tensor([9.5, 0.0], dtype=torch.float64),  # step_rewards
        torch.ones(2, 1, dtype=torch.float64),
        np.array([ROOM_A, ROOM_B], dtype=object),
        np.array(["g", "g"], dtype=object),
        np.array(["won", "failed"], dtype=object),
    )


def test_the_two_long_rooms_score_as_verl_agent_scores_them():
    assert len(ROOM_A) == len(ROOM_B) == 408 and sum(a != b for a, b in zip(ROOM_A, ROOM_B)) == 4
    difflib, lexical = make_scorer("difflib"), make_scorer("lexical")
    assert round(float(difflib.score([(ROOM_B, ROOM_A)])[0]), 4) == 0.3186  # verl-agent: are_similar(obs, rep)
    assert round(float(lexical.score([(ROOM_B, ROOM_A)])[0]), 4) == 0.9902
    assert not public.are_similar(ROOM_B, ROOM_A, 0.95)


def test_gigpo_drop_in_keeps_the_long_rooms_apart_as_verl_agent():
    args = two_rooms()
    expected, _ = public.compute_gigpo_outcome_advantage(*args, enable_similarity=True)
    adv, _ = verl_agent.compute_gigpo_outcome_advantage(*args, enable_similarity=True)
    np.testing.assert_allclose(expected[:, 0].numpy(), [5.0, -5.0])  # two anchors of one row: step terms 0
    np.testing.assert_allclose(adv[:, 0].numpy(), [5.0, -5.0], rtol=0, atol=1e-12)
    # rapidfuzz's ratio, a named option, merges them: the step term +-4.75 joins the episode term
    adv, _ = verl_agent.compute_gigpo_outcome_advantage(*args, enable_similarity=True, scorer=make_scorer("lexical"))
    np.testing.assert_allclose(adv[:, 0].numpy(), [9.75, -9.75], rtol=0, atol=1e-12)


def test_gigpo_library_keeps_the_long_rooms_apart_by_default():
    batch = RolloutBatch.from_columns(
        group_id=[0, 0], traj_id=[0, 1], step=[0, 0], reward=[10.0, 0.0], observation=[ROOM_A, ROOM_B]
    )
    res = compute_advantages("gigpo", batch, enable_similarity=True, scale="none")
    np.testing.assert_allclose(res.advantages, [5.0, -5.0], rtol=0, atol=1e-12)
    res = compute_advantages("gigpo", batch, enable_similarity=True, scale="none", similarity_scorer="lexical")
    np.testing.assert_allclose(res.advantages, [10.0, -10.0], rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------- one trajectory id in two uid groups
def shared_id_rows():
    """Two uids whose trajectories are both called t0 and t1 (ids counted from 0 in each group), rows interleaved
    step-major as verl collects them; and the same rows with ids unique across the batch."""
    trajs = [  # (uid, traj id, observations, R): u1's b is reached from a twice and from e once
        ("u1", "t0", ["a", "b", "c"], 10.0),
        ("u1", "t1", ["a", "b", "d"], 0.0),
        ("u1", "t2", ["e", "b", "d"], 0.0),
        ("u2", "t0", ["x", "y"], 0.0),
        ("u2", "t1", ["z", "y", "w"], 10.0),
        ("u2", "t2", ["x", "y"], 0.0),
    ]
    rows = [(u, t, obs[k], k, r, len(obs)) for u, t, obs, r in trajs for k in range(len(obs))]
    rows.sort(key=lambda row: row[3])  # step-major: every trajectory's step 0, then step 1, ...
    uid = np.array([r[0] for r in rows], dtype=object)
    traj = np.array([r[1] for r in rows], dtype=object)
    obs = np.array([r[2] for r in rows], dtype=object)
    score = np.array([r[4] for r in rows])
    steps = np.array([r[4] * 0.95 ** (r[5] - 1 - r[3]) for r in rows])  # discounted returns of R on the last step
    return uid, traj, np.array([f"{u}/{t}" for u, t in zip(uid, traj)], dtype=object), obs, score, steps


def test_hgpo_drop_ins_group_trajectories_within_their_uid():
    uid, shared, unique, obs, score, steps = shared_id_rows()
    mask = torch.ones(len(uid), 1)
    tlr = torch.from_numpy(score).unsqueeze(-1)
    for mode in ("mean_norm", "mean_std_norm"):
        adv, _ = verl_agent.compute_hgpo_outcome_advantage(torch.from_numpy(steps), mask, obs, uid, shared, mode=mode)
        expected = loops.hgpo_authors(steps, obs, uid, shared, 2, mode == "mean_norm")
        np.testing.assert_allclose(adv[:, 0].numpy(), expected, rtol=1e-6, atol=1e-6)
        same, _ = verl_agent.compute_hgpo_outcome_advantage(torch.from_numpy(steps), mask, obs, uid, unique, mode=mode)
        np.testing.assert_array_equal(adv.numpy(), same.numpy())
        for base_group in (False, True):
            args = (tlr, torch.from_numpy(steps), mask, obs, uid)
            adv, _ = verl_agent.compute_hgpo_recipe_outcome_advantage(
                *args, shared, 2, mode=mode, base_group=base_group
            )
            expected = loops.hgpo_recipe(score, steps, obs, uid, shared, 2, mode=mode, base_group=base_group)
            np.testing.assert_allclose(adv[:, 0].numpy(), expected, rtol=1e-6, atol=1e-6)


def test_scpo_and_g2po_drop_ins_group_trajectories_within_their_uid():
    uid, shared, unique, obs, score, steps = shared_id_rows()
    tlr, mask = torch.from_numpy(score).unsqueeze(-1), torch.ones(len(uid), 1)
    texts = np.array([f"go -> {o}" for o in obs], dtype=object)
    for scpo_mode in ("advantage", "returns"):
        got = [
            verl_agent.compute_scpo_outcome_advantage(
                tlr, torch.from_numpy(steps), mask, obs, uid, ids, step_texts=texts, scpo_mode=scpo_mode
            )[0]
            for ids in (shared, unique)
        ]
        np.testing.assert_array_equal(got[0].numpy(), got[1].numpy())
    data = [
        SimpleNamespace(non_tensor_batch={"episode_rewards": score, "anchor_obs": obs, "uid": uid, "traj_uid": ids})
        for ids in (shared, unique)
    ]
    values = [verl_agent.compute_group_aggregation_values(d) for d in data]
    for a, b in zip(*values):
        np.testing.assert_array_equal(a, b)
    # uid u1's t0 is a b c (won): its last step ends in success (-1); u2's t0 is x y (failed): -2
    first_u1_t0 = np.flatnonzero((uid == "u1") & (shared == "t0"))
    assert values[0][2][first_u1_t0[-1]] == -1
    advs = [
        verl_agent.compute_g2po_outcome_advantage(tlr, v[0], mask, uid, ids, v[1], v[2], np.ones(len(uid), bool))[0]
        for v, ids in zip(values, (shared, unique))
    ]
    np.testing.assert_array_equal(advs[0].numpy(), advs[1].numpy())


def test_per_trajectory_statistics_key_trajectories_within_their_uid():
    uid, shared, unique, obs, score, steps = shared_id_rows()
    tlr, mask = torch.from_numpy(score).unsqueeze(-1), torch.ones(len(uid), 2)
    for remove_std in (True, False):
        expected = public.episode_norm_reward(tlr.clone(), mask, uid, shared, 1e-6, remove_std, False)
        got = verl_agent.episode_norm_reward(tlr, mask, uid, shared, 1e-6, remove_std, False)
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)
    rloo, _ = verl_agent.compute_rloo_outcome_advantage(tlr, mask, uid, shared, compute_mean_std_cross_steps=False)
    np.testing.assert_allclose(rloo[:, 0].numpy(), loops.rloo(score, uid, shared, cross_steps=False), atol=1e-12)


# --------------------------------------------------------------------------------------------- public signatures
PUBLIC_PARAMETERS = {  # the public functions' parameters, in order (verl-agent, G2PO, HGPO, verl)
    "compute_gigpo_outcome_advantage": inspect.signature(public.compute_gigpo_outcome_advantage),
    "episode_norm_reward": inspect.signature(public.episode_norm_reward),
    "build_step_group": inspect.signature(public.build_step_group),
    "step_norm_reward": inspect.signature(public.step_norm_reward),
    "compute_g2po_outcome_advantage": "token_level_rewards step_rewards response_mask index traj_index group_idx "
    "next_group_idx is_action_valid epsilon step_advantage_w mode",
    "compute_group_aggregation_values": "batch",
    "compute_hgpo_outcome_advantage": "step_rewards response_mask anchor_obs index traj_index types history_length "
    "epsilon weight_type mode",
    "compute_graph_path_returns": "batch Gs gamma normalize_distance",
    "compute_graphgpo_outcome_advantage": "token_level_rewards step_rewards response_mask anchor_obs index traj_index "
    "epsilon step_advantage_w episode_advantage_w mode",
    "compute_rloo_outcome_advantage": "token_level_rewards response_mask index traj_index epsilon "
    "compute_mean_std_cross_steps",
}


@pytest.mark.parametrize("name", sorted(PUBLIC_PARAMETERS))
def test_public_names_take_the_public_parameters_and_add_keyword_only_ones(name):
    ours = inspect.signature(getattr(verl_agent, name)).parameters.values()
    public_sig = PUBLIC_PARAMETERS[name]
    names = public_sig.split() if isinstance(public_sig, str) else list(public_sig.parameters)
    positional = [p for p in ours if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [p.name for p in positional] == names
    assert all(p.kind is p.KEYWORD_ONLY for p in ours if p not in positional)
    if not isinstance(public_sig, str):  # the transcribed ones: the same defaults
        assert [p.default for p in positional] == [p.default for p in public_sig.parameters.values()]


def test_scpo_drop_in_binds_a_positional_gigpo_call_as_gigpo():
    gigpo = inspect.signature(verl_agent.compute_gigpo_outcome_advantage).parameters
    scpo = inspect.signature(verl_agent.compute_scpo_outcome_advantage).parameters
    positional = [p for p in scpo.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == [p for p in gigpo.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert scpo["step_texts"].kind is inspect.Parameter.KEYWORD_ONLY
    # a group of two successes: SCPO adds nothing, so a GiGPO-style positional call must give GiGPO's numbers
    tlr = torch.tensor([[10.0], [10.0], [10.0]], dtype=torch.float64)
    other = torch.tensor([[0.0], [0.0], [0.0]], dtype=torch.float64)
    tlr, steps = torch.cat([tlr, other]), torch.tensor([9.0, 9.5, 10.0, 0.0, 0.5, 0.0], dtype=torch.float64)
    obs = np.array(["room 1", "room 2", "room 1", "room 1", "room 1", "room 2"], dtype=object)
    uid = np.array(["g", "g", "g", "h", "h", "h"], dtype=object)
    traj = np.array(["a", "a", "b", "c", "c", "d"], dtype=object)
    args = (tlr, steps, torch.ones(6, 1), obs, uid, traj, 1e-3, 0.5, "mean_std_norm", True, 0.5)
    gig, _ = verl_agent.compute_gigpo_outcome_advantage(*args)
    adv, _ = verl_agent.compute_scpo_outcome_advantage(*args, step_texts=obs)
    np.testing.assert_array_equal(adv.numpy(), gig.numpy())
    exact, _ = verl_agent.compute_gigpo_outcome_advantage(*args[:9])
    assert not torch.equal(gig, exact)  # the similarity options were bound (the two rooms merge at 0.5)
    with pytest.raises(TypeError):
        verl_agent.compute_scpo_outcome_advantage(*args, obs)


# ------------------------------------------------------------------------------ verl-agent's GiGPO sub-functions
def room_rows(seed: int, n_uids: int = 3, n_rows: int = 24, shared_ids: bool = True):
    """verl-agent rows of long ALFWorld-like rooms (a few digits differ between them: difflib and rapidfuzz
    disagree), trajectory ids counted from 0 in every uid when `shared_ids`, rows interleaved."""
    rng = np.random.default_rng(seed)
    digits = rng.integers(1, 8, size=(6, 4))
    rooms = [_ROOM.format(*d) for d in digits] + [ROOM_A, ROOM_B]
    uid = np.array([f"u{k}" for k in rng.integers(0, n_uids, n_rows)], dtype=object)
    traj = np.array([f"t{k}" for k in rng.integers(0, 3, n_rows)], dtype=object)
    if not shared_ids:
        traj = np.array([f"{u}/{t}" for u, t in zip(uid, traj)], dtype=object)
    obs = np.array([rooms[k] for k in rng.integers(0, len(rooms), n_rows)], dtype=object)
    tlr = torch.zeros(n_rows, 3, dtype=torch.float64)
    tlr[:, 1] = torch.from_numpy(rng.choice([0.0, 10.0, -0.1, 9.9], n_rows))
    steps = torch.from_numpy(rng.normal(size=n_rows) * 3)
    mask = torch.ones(n_rows, 3, dtype=torch.float64)
    mask[:, 2] = 0
    return tlr, steps, mask, obs, uid, traj


def same_partition(a, b) -> bool:
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


@pytest.mark.parametrize("seed", range(6))
def test_gigpo_drop_in_equals_verl_agent_on_long_rooms_and_shared_ids(seed):
    tlr, steps, mask, obs, uid, traj = room_rows(seed)
    for mode in ("mean_norm", "mean_std_norm"):
        for similarity in (False, True):
            args = (tlr, steps, mask, obs, uid, traj, 1e-6, 0.7, mode, similarity, 0.95)
            expected, _ = public.compute_gigpo_outcome_advantage(tlr.clone(), *args[1:])
            got, _ = verl_agent.compute_gigpo_outcome_advantage(*args)
            np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)
        groups = verl_agent.build_step_group(obs, uid, True, 0.95)
        assert same_partition(groups, public.build_step_group(obs, uid, True, 0.95))
        assert same_partition(verl_agent.build_step_group(obs, uid), public.build_step_group(obs, uid))
        for remove_std in (True, False):
            np.testing.assert_allclose(
                verl_agent.step_norm_reward(steps, mask, groups, 1e-6, remove_std).numpy(),
                public.step_norm_reward(steps, mask, groups, 1e-6, remove_std).numpy(),
                rtol=1e-12,
                atol=1e-12,
            )
            for cross_steps in (True, False):
                np.testing.assert_allclose(
                    verl_agent.episode_norm_reward(tlr, mask, uid, traj, 1e-6, remove_std, cross_steps).numpy(),
                    public.episode_norm_reward(tlr.clone(), mask, uid, traj, 1e-6, remove_std, cross_steps).numpy(),
                    rtol=1e-12,
                    atol=1e-12,
                )


def test_build_step_group_ids_are_deterministic_strings_and_the_threshold_is_verl_agents():
    obs = np.array(["a", "b", "a", "a"], dtype=object)
    uid = np.array(["u", "u", "u", "v"], dtype=object)
    groups = verl_agent.build_step_group(obs, uid, summarize=True)
    assert groups.tolist() == ["step-group-0", "step-group-1", "step-group-0", "step-group-2"]
    assert verl_agent.build_step_group(obs, uid).tolist() == groups.tolist()
    for thresh in (0.0, 1.0):
        with pytest.raises(ValueError, match=r"similarity_thresh should be in \(0, 1\)"):
            verl_agent.build_step_group(obs, uid, True, thresh)


def test_gigpo_library_equals_verl_agent_on_long_rooms():
    """compute_advantages("gigpo") with similarity on trajectory-contiguous rows (verl-agent's rollout order)."""
    rng = np.random.default_rng(5)
    rooms = [_ROOM.format(*d) for d in rng.integers(1, 8, size=(5, 4))] + [ROOM_A, ROOM_B]
    cols = {k: [] for k in ("group_id", "traj_id", "step", "reward", "observation")}
    for t in range(12):
        n = int(rng.integers(1, 5))
        won = bool(rng.integers(0, 2))
        for k in range(n):
            cols["group_id"].append(t // 4)
            cols["traj_id"].append(t)
            cols["step"].append(k)
            cols["reward"].append(10.0 if won and k == n - 1 else 0.0)
            cols["observation"].append(rooms[int(rng.integers(0, len(rooms)))])
    b = RolloutBatch.from_columns(**cols)
    steps = torch.from_numpy(compute_advantages("gigpo", b).returns)
    tlr = torch.from_numpy(b.episode_return.astype(np.float64)).unsqueeze(-1)
    obs = np.asarray(b.observation, dtype=object)
    for scale, mode in (("std", "mean_std_norm"), ("none", "mean_norm")):
        expected, _ = public.compute_gigpo_outcome_advantage(
            tlr.clone(), steps, torch.ones(len(obs), 1), obs, b.group_id, b.traj_id, mode=mode, enable_similarity=True
        )
        res = compute_advantages("gigpo", b, enable_similarity=True, scale=scale)
        np.testing.assert_allclose(res.advantages, expected[:, 0].numpy(), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------ GraphGPO's graph objects
@pytest.mark.parametrize("similarity", [False, True])
def test_complex_graphs_feed_the_recipes_own_path_returns(similarity):
    rng = np.random.default_rng(3)
    states = [ROOM_A, ROOM_B, "You are in the hall.", "You are in the hall!", "On the desk 1, you see a pen."]
    rows = []
    for t in range(8):
        path = [states[int(k)] for k in rng.integers(0, len(states), int(rng.integers(2, 5)))]
        won = bool(rng.integers(0, 2))
        for k in range(len(path) - 1):
            last = k == len(path) - 2
            rows.append((f"u{t % 2}", f"t{t}", path[k], "success" if last and won else path[k + 1]))
    nt = {
        "uid": np.array([r[0] for r in rows], dtype=object),
        "traj_uid": np.array([r[1] for r in rows], dtype=object),
        "anchor_obs": np.array([r[2] for r in rows], dtype=object),
        "next_obs": np.array([r[3] for r in rows], dtype=object),
        "rewards": np.zeros(len(rows)),
        "active_masks": np.ones(len(rows), dtype=bool),
    }
    batch = SimpleNamespace(non_tensor_batch=nt, batch={"input_ids": torch.zeros(len(rows), 1)})
    graphs = verl_agent.ComplexGraph.from_data(batch, enable_similarity=similarity, similarity_thresh=0.9)
    verl_agent.ComplexGraph.Calculate_all_shortest_path(graphs)
    for gamma, normalize in ((0.5, False), (0.3, True)):
        recipe = public.recipe_graph_path_returns(batch, graphs, gamma, normalize)
        ours = verl_agent.compute_graph_path_returns(batch, graphs, gamma, normalize)
        expected = loops.graph_path_returns(
            list(nt["uid"]), list(nt["anchor_obs"]), list(nt["next_obs"]), gamma, normalize, similarity, 0.9
        )
        np.testing.assert_array_equal(recipe.numpy(), ours.numpy())
        np.testing.assert_allclose(ours.numpy(), np.float32(expected), rtol=1e-6)
    g = graphs["u0"]
    assert g.final_state == g.canonicalizer.canonicalize("success") and g.distances[g.final_state] == 0
    assert g.nodes == set(g.distances) == set(g.shortest_path_to_final[0])
    starts = [g.canonicalizer.canonicalize(o) for o, prev in zip(nt["anchor_obs"], [None, *nt["traj_uid"]])]
    firsts = [
        s
        for s, t, prev, u in zip(starts, nt["traj_uid"], [None, *nt["traj_uid"]], nt["uid"])
        if t != prev and u == "u0"
    ]
    assert g.first_state == max(dict.fromkeys(firsts), key=firsts.count)  # most trajectories start there
    # the hall and the hall! are one node with the similarity option (ratio 0.95), two without
    same = g.canonicalizer.canonicalize(states[2]) == g.canonicalizer.canonicalize(states[3])
    assert same is similarity
    # a state the batch never met: its own key, or with similarity the node of the first state it matches
    unseen = "You are in the hall?"
    assert g.canonicalizer.canonicalize(unseen) == (g.canonicalizer.canonicalize(states[2]) if similarity else unseen)


# ------------------------------------------------------------------------------------------------ more edges
def test_defaults_and_options_of_verl_agents_sub_functions():
    tlr, steps, mask, obs, uid, traj = room_rows(7)
    defaults = (
        verl_agent.episode_norm_reward(tlr, mask, uid, traj),
        public.episode_norm_reward(tlr.clone(), mask, uid, traj),
    )
    np.testing.assert_allclose(defaults[0].numpy(), defaults[1].numpy(), rtol=1e-12, atol=1e-12)
    groups = verl_agent.build_step_group(obs, uid)
    assert groups.dtype == object  # verl-agent's uid strings in an object array
    for kwargs in ({}, {"epsilon": 1e-3, "remove_std": False}):
        np.testing.assert_allclose(
            verl_agent.step_norm_reward(steps, mask, groups, **kwargs).numpy(),
            public.step_norm_reward(steps, mask, groups, **kwargs).numpy(),
            rtol=1e-12,
            atol=1e-12,
        )
    # the similarity option's scorer: difflib by default (the rooms apart), rapidfuzz's merges them
    rooms, one = np.array([ROOM_A, ROOM_B], dtype=object), np.array(["g", "g"], dtype=object)
    assert len(set(verl_agent.build_step_group(rooms, one, True, 0.95))) == 2
    assert len(set(verl_agent.build_step_group(rooms, one, True, 0.95, scorer=make_scorer("lexical")))) == 1


def test_a_group_with_one_trajectory_keeps_its_scores_per_trajectory():
    """verl's per-trajectory statistics (compute_mean_std_cross_steps=False): a uid with one trajectory has mean 0
    and std 1, whatever its number of rows."""
    tlr = torch.tensor([[3.0], [3.0], [10.0], [0.0], [0.0]], dtype=torch.float64)
    mask = torch.ones(5, 1, dtype=torch.float64)
    uid = np.array(["solo", "solo", "g", "g", "g"], dtype=object)
    traj = np.array(["t", "t", "w", "f", "f"], dtype=object)
    for remove_std in (True, False):
        got = verl_agent.episode_norm_reward(tlr, mask, uid, traj, 1e-6, remove_std, False)
        expected = public.episode_norm_reward(tlr.clone(), mask, uid, traj, 1e-6, remove_std, False)
        # verl-agent's std 1 of a one-member group is a float32 tensor: its 1 + eps rounds to 1.00000095
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=1e-12)
        assert got[0, 0] == (3.0 if remove_std else 3.0 / (1 + 1e-6))


def test_won_flags_are_truth_values():
    tlr = torch.tensor([[10.0], [10.0], [0.0], [0.0]], dtype=torch.float64)
    args = (tlr, tlr[:, 0].clone(), torch.ones(4, 1), np.array(["s", "t", "s", "u"], object), np.array(["g"] * 4))
    kw = {"step_texts": np.array(["X", "Y", "X", "V"], object), "mode": "mean_norm"}
    traj = np.array(["w", "w", "f", "f"])
    flags, counts = (np.array([True, True, False, False]), np.array([2, 2, 0, 0]))  # 2: any non-zero value is a win
    got = [verl_agent.compute_scpo_outcome_advantage(*args, traj, won=w, **kw)[0] for w in (flags, counts)]
    np.testing.assert_array_equal(got[0].numpy(), got[1].numpy())
    base, _ = verl_agent.compute_gigpo_outcome_advantage(*args, traj, mode="mean_norm")
    np.testing.assert_allclose((got[1] - base)[:, 0].numpy(), [0, 0, 10.0, 0])  # R_ref - R_i = 10 * 1 - 0


def graph_batch(rows, **extra):
    """A recipe-style batch of (uid, traj_uid, anchor_obs, next_obs) rows."""
    nt = {k: np.empty(len(rows), dtype=object) for k in ("uid", "traj_uid", "anchor_obs", "next_obs")}
    for k, key in enumerate(("uid", "traj_uid", "anchor_obs", "next_obs")):
        nt[key][:] = [r[k] for r in rows]
    return SimpleNamespace(non_tensor_batch={**nt, **extra}, batch={})


@pytest.mark.parametrize("similarity", [False, True])
def test_a_group_without_success_has_success_as_a_node_no_step_reaches(similarity):
    b = graph_batch([("u", "t0", "hall", "desk"), ("u", "t0", "desk", "hall"), ("u", "t1", "hall", "sink")])
    (g,) = verl_agent.ComplexGraph.from_data(b, enable_similarity=similarity, similarity_thresh=0.9).values()
    assert g.final_state == "success" and g.distances == {"hall": 1, "desk": 1, "sink": 1, "success": 0}
    assert g.first_state == "hall" and g.shortest_path_to_final is None


def test_success_joins_a_similar_state_under_the_similarity_option():
    # "success!" and "success" score 0.933: with the option the goal is the node of "success!", met first
    b = graph_batch([("u", "t0", "hall", "success!"), ("u", "t1", "sink", "hall")])
    (g,) = verl_agent.ComplexGraph.from_data(b, enable_similarity=True, similarity_thresh=0.9).values()
    assert g.final_state == "success!" and g.distances == {"hall": 1, "success!": 0, "sink": 2}
    (exact,) = verl_agent.ComplexGraph.from_data(b).values()
    assert exact.final_state == "success"  # without the option there is no success: every state 1 hop away
    assert exact.distances == {"hall": 1, "success!": 1, "sink": 1, "success": 0}


def test_the_canonicalizer_places_states_not_met_as_the_recipe_would():
    b = graph_batch([("u", "t0", "You are in the hall.", "success"), ("u", "t1", "On the desk 1.", "success")])
    (g,) = verl_agent.ComplexGraph.from_data(b, enable_similarity=True, similarity_thresh=0.95).values()
    canon = g.canonicalizer.canonicalize
    assert canon("You are in the hall?") == "You are in the hall."  # ratio exactly 0.95: the threshold merges
    # two new states that match each other: the first founds a node, the second joins it
    assert canon("A mug 7 on the shelf.") == "A mug 7 on the shelf."
    assert canon("A mug 7 on the shelf!") == "A mug 7 on the shelf."
    assert canon(12345) == 12345 and canon("12345") == 12345  # the text of what is not a string is its str()
    assert g.first_state == "You are in the hall."  # ties: the first met


def test_list_observations_keep_their_keys_in_the_graphs():
    b = graph_batch([("u", "t0", ["room", 1], ["room", 2]), ("u", "t1", ["room", 1], "success")])
    (g,) = verl_agent.ComplexGraph.from_data(b).values()
    assert g.first_state == ("room", 1) and g.distances == {("room", 1): 1, ("room", 2): 2, "success": 0}
