"""Small worked cases for the estimators' less common paths (the ones `make mutate` checks are covered): groups that
share observations, batches above the hash-factorise threshold, similarity anchors over several groups, ProGPO-R's
semantic expansion and depths > 1, the invalid penalty in every estimator, non-default options, result checks and
batch statistics. Every expected value is computed by hand from the formulas in docs/algorithms.md."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import compute_advantages
from scpo.credit.grouping import combine_codes
from scpo.credit.result import CreditResult

from helpers.credit import EPS, norm, pop_norm

TIGHT = {"rtol": 1e-12, "atol": 1e-12}


class Table:
    """score / score_matrix from a symmetric table of text pairs; equal texts score 1, unlisted pairs 0. `requests`:
    the pairs of each call."""

    def __init__(self, pairs: dict | None = None) -> None:
        self.pairs = {}
        for (a, b), s in (pairs or {}).items():
            self.pairs[(a, b)] = self.pairs[(b, a)] = s
        self.calls = 0
        self.requests: list[list[tuple[str, str]]] = []
        self.stats = {"pairs_scored": 0, "cache_hits": 0}

    def score(self, pairs):
        self.calls += 1
        self.requests.append(list(pairs))
        return np.array([1.0 if a == b else self.pairs.get((a, b), 0.0) for a, b in pairs])

    def score_matrix(self, left, right):
        self.calls += 1
        return np.array([[1.0 if a == b else self.pairs.get((a, b), 0.0) for b in right] for a in left])


def batch(trajs, **extra_per_row) -> RolloutBatch:
    """trajs: (group, observations, rewards[, valid]) per trajectory; next_observation = the following observation,
    'end' after the last step; action = 'do ' + next observation."""
    cols = defaultdict(list)
    for i, traj in enumerate(trajs):
        g, obs, rew = traj[:3]
        valid = traj[3] if len(traj) > 3 else [True] * len(obs)
        for t, o in enumerate(obs):
            nxt = obs[t + 1] if t + 1 < len(obs) else "end"
            cols["group_id"].append(g)
            cols["traj_id"].append(i)
            cols["step"].append(t)
            cols["reward"].append(float(rew[t]))
            cols["observation"].append(o)
            cols["next_observation"].append(nxt)
            cols["action"].append(f"do {nxt}")
            cols["valid"].append(bool(valid[t]))
            cols["group_uid"].append(f"task{g}")
    for k, v in extra_per_row.items():
        cols[k] = list(v)
    return RolloutBatch.from_columns(**cols)


# ------------------------------------------------------------------ two groups sharing observations
def shared_obs_batch() -> RolloutBatch:
    """Group 0: W = s0 -> s1 (wins, 10 at its last step), F = s0 -> s2. Group 1 (all failed) starts in the same s0 and
    visits s1 too: U = s0 -> s1, V = s0. Anchors, nodes, clusters and potentials are keyed by (group, observation)."""
    return batch([(0, ["s0", "s1"], [0, 10]), (0, ["s0", "s2"], [0, 0]), (1, ["s0", "s1"], [0, 0]), (1, ["s0"], [0])])


def test_gigpo_anchors_are_keyed_by_group():
    res = compute_advantages("gigpo", shared_obs_batch())
    # group 0 anchor s0: returns {9.5, 0} -> +-4.75 / (std 6.7175 + eps); group 1 anchor s0: {0, 0} -> 0.
    # Pooled over groups s0 would be {9.5, 0, 0, 0} and s1 {10, 0}: group 1 would get non-zero step terms.
    half = 4.75 / (np.sqrt(2 * 4.75**2) + EPS)
    np.testing.assert_allclose(res.diagnostics["step_adv"], [half, 0, -half, 0, 0, 0, 0], **TIGHT)
    np.testing.assert_array_equal(res.diagnostics["anchor_group_size"], [2, 1, 2, 1, 2, 1, 2])
    ep0 = 5 / (np.sqrt(100 / 3) + EPS)  # scores 10, 10, 0, 0: mean 5, std sqrt(100/3)
    np.testing.assert_allclose(res.diagnostics["episode_adv"], [ep0, ep0, -ep0, -ep0, 0, 0, 0], **TIGHT)


def test_hgpo_clusters_are_keyed_by_group():
    res = compute_advantages("hgpo", shared_obs_batch())
    # l = 0: group 0 s0 {9.5, 0} -> +-4.75 / (4.75 + eps) (population std); group 1 s0 {0, 0} -> 0; s1 alone per group
    one = 4.75 / (4.75 + EPS)
    np.testing.assert_allclose(res.advantages, [one, 0, -one, 0, 0, 0, 0], **TIGHT)
    np.testing.assert_array_equal(res.diagnostics["hgpo_size0"], [2, 1, 2, 1, 2, 1, 2])
    np.testing.assert_array_equal(res.diagnostics["hgpo_size1"], [0, 1, 0, 1, 0, 1, 0])


def test_g2po_nodes_are_keyed_by_group():
    res = compute_advantages("g2po", shared_obs_batch())
    # group 0: V(s0) = mean(0.95^2 10, 0.95^2 0) = 4.5125, V(s1) = 0.95 * 10, V(s2) = 0; group 1: every V = 0
    np.testing.assert_allclose(res.diagnostics["node_value"], [4.5125, 9.5, 4.5125, 0, 0, 0, 0], **TIGHT)
    np.testing.assert_allclose(res.diagnostics["next_value"], [9.5, 10, 0, 0, 0, 0, 0], **TIGHT)
    np.testing.assert_allclose(res.advantages[4:], 0.0, atol=1e-12)


def test_progpo_r_potentials_are_keyed_by_group():
    res = compute_advantages("progpo_r", shared_obs_batch(), depths=(1,), similarity_scorer="none")
    # Phi_1(group 0, s0) = mean(9.5, 0) = 4.75, Phi(s1) = 10, Phi(s2) = 0; group 1: all returns 0 -> Phi = 0
    np.testing.assert_allclose(res.diagnostics["potential"], [4.75, 10, 4.75, 0, 0, 0, 0], **TIGHT)
    np.testing.assert_allclose(res.diagnostics["delta"], [4.75, 0, -4.75, 0, 0, 0, 0], **TIGHT)


def test_progpo_c_first_visits_are_per_group():
    # two all-failed groups: group 0 reaches n1 at index 1, group 1 only at index 2 (its first visit there)
    b = batch([(0, ["o", "n1"], [0, 0]), (1, ["o", "n2", "n1"], [0, 0, 0])])
    res = compute_advantages("progpo_c", b)
    # visits: group 0: o@0, n1@1, end@2 ; group 1: o@0, n2@1, n1@2, end@3 -> every visit is a first visit
    np.testing.assert_array_equal(res.diagnostics["coverage"], [1, 1, 1, 1, 1])


# ------------------------------------------------------------------ more than 2,048 rows (hash factorise path)
def test_combine_codes_above_the_hash_threshold_is_the_tuple_partition():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 7, 3000), rng.integers(-1, 50, 3000)
    codes = combine_codes(a, b)
    explicit = {}
    expected = np.array([explicit.setdefault((x, y), len(explicit)) for x, y in zip(a.tolist(), b.tolist())])
    assert sorted(set(codes.tolist())) == list(range(len(explicit)))  # dense 0..K-1
    assert len(set(zip(codes.tolist(), expected.tolist()))) == len(explicit)  # same partition


def test_gigpo_on_a_large_batch_equals_a_loop_over_anchor_groups():
    from scpo.credit.synthetic import synthetic_batch

    b = synthetic_batch()  # 2,293 rows: above the 2,048-row threshold
    assert b.n_rows > 2048
    res = compute_advantages("gigpo", b)
    ret = res.returns - 0.1 * (~b.valid)
    by_anchor = defaultdict(list)
    for r in range(b.n_rows):
        by_anchor[(b.group_id[r], b.observation[r])].append(r)
    expected = np.zeros(b.n_rows)
    for rows in by_anchor.values():
        if len(rows) > 1:
            expected[rows] = norm(ret[rows])
    np.testing.assert_allclose(res.diagnostics["step_adv"], expected, rtol=1e-9, atol=1e-9)
    assert res.stats["anchor_group_size_mean"] == pytest.approx(
        np.mean([len(by_anchor[(b.group_id[r], b.observation[r])]) for r in range(b.n_rows)])
    )


# ------------------------------------------------------------------ similarity anchors (GiGPO, ProGPO-C)
def similarity_batch() -> RolloutBatch:
    """Group 0 meets A, B, C in that order, group 1 meets C, B, A; S(A, B) = 0.96, S(B, C) = 0.95, S(A, C) = 0.5."""
    return batch([(0, ["A", "B"], [0, 10]), (0, ["C", "A"], [0, 0]), (1, ["C", "B"], [0, 10]), (1, ["A"], [0])])


SIM = {("A", "B"): 0.96, ("B", "C"): 0.95, ("A", "C"): 0.5}


def test_similarity_anchors_merge_greedily_per_group_in_order_of_first_appearance():
    scorer = Table(SIM)
    res = compute_advantages("gigpo", similarity_batch(), scorer=scorer, enable_similarity=True, similarity_thresh=0.95)
    # group 0: A founds a cluster, B joins it (0.96), C scores 0.5 against the representative A: its own cluster.
    # group 1: C founds, B joins C (0.95: the threshold itself merges), A scores 0.5 against C: its own cluster.
    np.testing.assert_array_equal(res.diagnostics["anchor_group_size"], [3, 3, 1, 3, 2, 2, 1])
    # returns: group 0 {A, B} = {9.5 (W, A), 10 (W, B), 0 (the failure's A)}; group 1 {C, B} = {9.5, 10}
    g0 = norm([9.5, 10, 0])
    g1 = norm([9.5, 10])
    np.testing.assert_allclose(res.diagnostics["step_adv"], [g0[0], g0[1], 0, g0[2], g1[0], g1[1], 0], **TIGHT)
    # one call per distinct observation after a group's first, (observation, representative) against every
    # representative so far: the representative is the second text, as verl-agent's are_similar(obs, rep)
    assert scorer.requests == [[("B", "A")], [("C", "A")], [("B", "C")], [("A", "C")]]
    scorer = Table(SIM)
    strict = compute_advantages(
        "gigpo", similarity_batch(), scorer=scorer, enable_similarity=True, similarity_thresh=0.951
    )
    # just above 0.95, group 1's B founds its own cluster, and A (0.5 against C, 0.96 against B) joins B's
    np.testing.assert_array_equal(strict.diagnostics["anchor_group_size"], [3, 3, 1, 3, 1, 2, 2])
    assert scorer.requests[-1] == [("A", "C"), ("A", "B")]


def test_similarity_threshold_outside_its_range_is_refused():
    from scpo.credit.gigpo import similarity_anchor_groups

    b = similarity_batch()
    with pytest.raises(ValueError, match=r"similarity_thresh=1.5 must be in \(0, 1\]"):
        similarity_anchor_groups(b.group_id, b.observation, Table(SIM), 1.5)
    with pytest.raises(ValueError, match=r"similarity_thresh=0 must be in \(0, 1\]"):
        similarity_anchor_groups(b.group_id, b.observation, Table(SIM), 0)
    codes = similarity_anchor_groups(b.group_id, b.observation, Table(SIM), 1.0)  # 1 is allowed: exact anchors
    # clusters numbered per group in order of first appearance, after the previous groups' clusters
    np.testing.assert_array_equal(codes, [0, 1, 2, 0, 3, 4, 5])


def test_gigpo_similarity_without_a_scorer_is_refused():
    from scpo.credit import CreditConfig
    from scpo.credit.gigpo import compute_gigpo

    cfg = CreditConfig(gigpo={"enable_similarity": True})
    with pytest.raises(
        ValueError,
        match=r"^gigpo enable_similarity=True needs a scorer \(compute_advantages builds "
        r"the default one\)$",
    ):
        compute_gigpo(similarity_batch(), cfg)


def test_progpo_c_uses_similarity_anchors_in_all_failed_groups():
    # all failed: T0 = A -> P -> Q, T1 = B -> Z; S(A, B) = 0.97 merges the two first steps' anchors
    b = RolloutBatch.from_columns(
        group_id=[0] * 3,
        traj_id=[0, 0, 1],
        step=[0, 1, 0],
        reward=[0] * 3,
        observation=["A", "P", "B"],
        next_observation=["P", "Q", "Z"],
    )
    res = compute_advantages("progpo_c", b, scorer=Table({("A", "B"): 0.97}), enable_similarity=True)
    # coverage: P@1, Q@2, Z@1 all first visits -> C = (2, 1); coverage returns T0 = (1.95, 1), T1 = (1)
    ep = 0.5 * 0.5 / (np.sqrt(0.5) + EPS)
    step = 0.475 / (np.sqrt(2 * 0.475**2) + EPS)
    np.testing.assert_allclose(res.advantages, [ep + step, ep, -ep - step], **TIGHT)
    exact = compute_advantages("progpo_c", b)
    np.testing.assert_allclose(exact.advantages, [ep, ep, -ep], **TIGHT)


# ------------------------------------------------------------------ ProGPO-R: semantic expansion, depth 2, fusion
def expansion_batch() -> RolloutBatch:
    """T0 = s -> p (wins), T1 = s -> q, T2 = t -> q; S(p, q) = 0.95, every other pair of distinct texts 0."""
    return batch([(0, ["s", "p"], [0, 10]), (0, ["s", "q"], [0, 0]), (0, ["t", "q"], [0, 0])])


def test_progpo_r_depth_two_keys_pool_similar_histories():
    res = compute_advantages("progpo_r", expansion_batch(), scorer=Table({("p", "q"): 0.95}), depths=(2,))
    # depth-2 keys (o_t, o_{t-1}): (s, pad) x2 -> mean(9.5, 0) = 4.75; (t, pad) alone, nothing similar -> 0;
    # (p, s) and (q, s) are alone and pool each other: position scores (0.95 + 1) / 2 >= 0.9 -> mean(10, 0) = 5;
    # (q, t) scores (1 + 0) / 2 against (q, s) and (0.95 + 0) / 2 against (p, s): no pooling -> 0
    np.testing.assert_allclose(res.diagnostics["potential"], [4.75, 5, 4.75, 5, 0, 0], **TIGHT)
    # delta = r + 0.95 Phi(next) - Phi, terminal 0
    np.testing.assert_allclose(res.diagnostics["delta"], [0.95 * 5 - 4.75, 10 - 5, 0.95 * 5 - 4.75, -5, 0, 0], **TIGHT)
    exact = compute_advantages("progpo_r", expansion_batch(), depths=(2,), similarity_scorer="none")
    np.testing.assert_allclose(exact.diagnostics["potential"], [4.75, 10, 4.75, 0, 0, 0], **TIGHT)


def test_progpo_r_fuses_depths_by_inverse_variance_after_expansion():
    res = compute_advantages("progpo_r", expansion_batch(), scorer=Table({("p", "q"): 0.95}), depths=(1, 2))

    # depth 1: s {9.5, 0}: mean 4.75, var = 45.125 / 1 / 2; t alone: prior 25; q {0, 0}: var floored at 1e-6;
    #          p alone pools q's two rows (0.95): {10, 0, 0}: mean 10/3, var = (200/3) / 2 / 3 (divisor n - 1 = 2)
    # depth 2 (above): (s, pad) 4.75 / 22.5625, (t, pad) 0 / 25, (p, s) and (q, s) 5 / 25, (q, t) 0 / 25
    def fuse(p1, v1, p2, v2):
        return (p1 / v1 + p2 / v2) / (1 / v1 + 1 / v2)

    s = fuse(4.75, 22.5625, 4.75, 22.5625)
    expected = [s, fuse(10 / 3, 100 / 9, 5, 25), s, fuse(0, 1e-6, 5, 25), fuse(0, 25, 0, 25), fuse(0, 1e-6, 0, 25)]
    np.testing.assert_allclose(res.diagnostics["potential"], expected, **TIGHT)
    assert expected[1] == pytest.approx(50 / 13)


def test_progpo_r_min_members_decides_which_keys_pool():
    # with m = 3, the two-member key q is small too and pools p (0.95): {0, 0, 10}
    res = compute_advantages(
        "progpo_r", expansion_batch(), scorer=Table({("p", "q"): 0.95}), depths=(1,), min_members=3
    )
    np.testing.assert_allclose(res.diagnostics["potential"], [4.75, 10 / 3, 4.75, 10 / 3, 0, 10 / 3], **TIGHT)
    # with m = 1 nothing is small: exact keys
    res = compute_advantages(
        "progpo_r", expansion_batch(), scorer=Table({("p", "q"): 0.95}), depths=(1,), min_members=1
    )
    np.testing.assert_allclose(res.diagnostics["potential"], [4.75, 10, 4.75, 0, 0, 0], **TIGHT)


def test_observation_similarity_padding_matches_only_padding():
    from scpo.credit.progpo_r import ObservationSimilarity

    group = np.array([0, 0, 1])
    codes = np.array([0, 1, 2])
    sim = ObservationSimilarity(group, codes, np.array(["p", "q", "p"], dtype=object), Table({("p", "q"): 0.95}), 0.9)
    np.testing.assert_allclose(
        sim.lookup(np.array([0, 1, 0, -1, -1, 0]), np.array([1, 0, 0, -1, 0, -1])), [0.95, 0.95, 1, 1, 0, 0]
    )
    np.testing.assert_allclose(sim.lookup(np.array([0, 2]), np.array([1, 2])), [0.95, 1])
    # neighbour list, sorted by the first code: (0, 0), (0, 1), (1, 0), (1, 1), (2, 2)
    assert list(zip(sim.nb_u.tolist(), sim.nb_v.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 2)]
    np.testing.assert_allclose(sim.nb_s, [1, 0.95, 0.95, 1, 1])


def test_progpo_r_semantic_expansion_needs_a_scorer():
    from scpo.credit import CreditConfig
    from scpo.credit.progpo_r import compute_progpo_r

    with pytest.raises(
        ValueError, match=r"^progpo_r semantic expansion needs a scorer \(or similarity_scorer='none'\)$"
    ):
        compute_progpo_r(expansion_batch(), CreditConfig())


# ------------------------------------------------------------------ GRPO / HCAPO details
def test_grpo_trajectory_statistics_divide_by_n_minus_one():
    # three trajectories R = 10, 0, 0 (lengths 1, 2, 1): mean 10/3, std sqrt(((20/3)^2 + 2 (10/3)^2) / 2) = sqrt(100/3)
    b = batch([(0, ["a"], [10]), (0, ["a", "b"], [0, 0]), (0, ["c"], [0])])
    res = compute_advantages("grpo", b, stats_over="trajectories")
    sd = np.sqrt(100 / 3) + EPS
    np.testing.assert_allclose(res.advantages, [(20 / 3) / sd] + [(-10 / 3) / sd] * 3, **TIGHT)
    # "steps": the four rows 10, 0, 0, 0
    steps = compute_advantages("grpo", b)
    np.testing.assert_allclose(steps.advantages, norm([10, 0, 0, 0]), **TIGHT)


def test_grpo_trajectory_statistics_with_penalties_and_scale_none():
    # the mean comes from R_i (10, 0, 0 -> 10/3) and is applied to R_i - pen_t (row 2 is invalid: pen 0.5)
    b = batch([(0, ["a"], [10]), (0, ["a", "b"], [0, 0], [True, False]), (0, ["c"], [0])])
    res = compute_advantages("grpo", b, stats_over="trajectories", scale="none", lambda_invalid=0.5)
    np.testing.assert_allclose(res.advantages, [20 / 3, -10 / 3, -10 / 3 - 0.5, -10 / 3], **TIGHT)
    one = compute_advantages("grpo", batch([(0, ["a"], [10]), (1, ["a"], [0])]), stats_over="trajectories")
    np.testing.assert_array_equal(one.advantages, [0.0, 0.0])  # one trajectory per group -> 0


def test_stats_over_unknown_value_is_refused():
    from scpo.credit.grpo import episode_statistics

    with pytest.raises(ValueError, match="stats_over='episodes' is not one of 'steps', 'trajectories'"):
        episode_statistics(np.zeros(2), np.zeros(2), np.zeros(2, int), np.arange(2), stats_over="episodes")


def test_hcapo_clips_a_winning_step_below_the_mean_and_applies_the_penalty():
    # W1 wins in 4 steps, W2 in 1, F fails in 1 with an invalid step. Hindsight probabilities of W1: 0.1, 1, 1, 1
    # -> ratios 0.129, 1.29, 1.29, 1.29 -> clipped 0.8, 1.2, 1.2, 1.2; W2 and F: ratio 1.
    b = batch([(0, ["a", "b", "c", "d"], [0, 0, 0, 10]), (0, ["a"], [10]), (0, ["a"], [0], [False])])
    lp = np.log([0.1, 1, 1, 1, 0.5, 0.5])
    res = compute_advantages("hcapo", b, hindsight_logprob=lp)
    q = np.array([0.8 * 0.95**3 * 10, 1.2 * 0.95**2 * 10, 1.2 * 0.95 * 10, 1.2 * 10, 10, 0])
    np.testing.assert_allclose(res.returns, q, **TIGHT)
    step = norm(q)
    assert step[0] < 0  # W1's first step is below the group's mean Q ...
    step[:5] = np.maximum(step[:5], 0)  # ... and is clipped to 0 in a successful trajectory
    ep = norm([10, 10, 10, 10, 10, -0.1])
    np.testing.assert_allclose(res.diagnostics["step_adv"], step, **TIGHT)
    np.testing.assert_allclose(res.advantages, ep + step, **TIGHT)
    half = compute_advantages("hcapo", b, hindsight_logprob=lp, omega=0.5, clip_low=0.5, clip_high=2.0)
    # ratios 0.129 -> clipped at 0.5, 1.29 (inside [0.5, 2])
    q2 = np.array([0.5 * 0.95**3 * 10, 1 / 0.775 * 0.95**2 * 10, 1 / 0.775 * 0.95 * 10, 1 / 0.775 * 10, 10, 0])
    step2 = 0.5 * norm(q2)
    step2[:5] = np.maximum(step2[:5], 0)
    np.testing.assert_allclose(half.advantages, ep + step2, **TIGHT)


def test_hcapo_ratio_is_relative_to_the_trajectory_mean_without_underflow():
    from scpo.credit.hcapo import hindsight_ratio

    lp = np.array([-2000.0, -2000.0 + np.log(3), -5.0])  # exp(-2000) underflows; the ratio does not
    np.testing.assert_allclose(hindsight_ratio(lp, np.array([0, 0, 1]), 0.1, 10.0), [0.5, 1.5, 1.0], **TIGHT)
    with pytest.raises(ValueError, match="clip_low=1.3 > clip_high=1.2"):
        compute_advantages("hcapo", batch([(0, ["a"], [10])]), hindsight_logprob=[0.0], clip_low=1.3)
    with pytest.raises(ValueError, match="1 finite values .* with 1 non-finite"):
        compute_advantages("hcapo", batch([(0, ["a"], [10])]), hindsight_logprob=[np.nan])


# ------------------------------------------------------------------ the invalid penalty in every estimator
def test_hgpo_subtracts_the_penalty_from_the_step_return():
    # T0 = a -> b wins, T1 = a -> b with an invalid last step (pen 0.5), T2 = a -> b fails
    b = batch([(0, ["a", "b"], [0, 10]), (0, ["a", "b"], [0, 0], [True, False]), (0, ["a", "b"], [0, 0])])
    res = compute_advantages("hgpo", b, history_length=1, lambda_invalid=0.5)
    g_a, g_b = [9.5, 0, 0], [10, -0.5, 0]
    # step 0 rows: only l = 0 (cluster a); step 1 rows: l = 0 (cluster b) and l = 1 (cluster (a, b)), weights 1 and 2
    expected = [
        pop_norm(9.5, g_a),
        (pop_norm(10, g_b) + 2 * pop_norm(10, g_b)) / 3,
        pop_norm(0, g_a),
        pop_norm(-0.5, g_b),
        pop_norm(0, g_a),
        pop_norm(0, g_b),
    ]
    np.testing.assert_allclose(res.advantages, expected, **TIGHT)
    np.testing.assert_allclose(res.returns, [9.5, 10, 0, 0, 0, 0], **TIGHT)  # returns before the penalty


def test_hgpo_alpha_other_than_one_weights_depths_by_l_plus_one_to_the_alpha():
    # clusters differ by depth: l = 0 on b is {T0, T1, T2}, l = 1 on (a, b) is {T0, T1}, l = 2 is empty (2 steps)
    b = batch([(0, ["a", "b"], [0, 10]), (0, ["a", "b"], [0, 0]), (0, ["c", "b"], [0, 0])])
    for alpha in (0.0, 0.5, 3.0):
        res = compute_advantages("hgpo", b, history_length=2, alpha=alpha)
        a0, a1 = pop_norm(10, [10, 0, 0]), pop_norm(10, [10, 0])
        w0, w1 = 1.0, 2.0**alpha
        np.testing.assert_allclose(res.advantages[1], (w0 * a0 + w1 * a1) / (w0 + w1), **TIGHT)
        np.testing.assert_allclose(res.diagnostics["hgpo_a1"], [0, a1, 0, -a1, 0, 0], **TIGHT)
        np.testing.assert_array_equal(res.diagnostics["hgpo_size2"], 0)
        np.testing.assert_allclose(res.advantages[5], pop_norm(0, [10, 0, 0]), **TIGHT)  # only l = 0 survives there


def test_hgpo_context_depth_must_be_non_negative():
    from scpo.credit.hgpo import context_clusters

    with pytest.raises(ValueError, match="context depth l=-1 must be >= 0"):
        context_clusters(np.zeros(2, int), np.array(["a", "b"], object), np.arange(2), -1)


def test_g2po_subtracts_the_penalty_in_the_node_centric_term_and_the_episode_term():
    # T0 = s0 -> s1 wins; T1 = s0 -> s2 fails, its first step invalid (pen 0.1); T2 = s0 -> s2 fails
    b = batch([(0, ["s0", "s1"], [0, 10]), (0, ["s0", "s2"], [0, 0], [False, True]), (0, ["s0", "s2"], [0, 0])])
    res = compute_advantages("g2po", b)
    v_s0 = 0.95**2 * 10 / 3
    v_curr = np.array([v_s0, 9.5, v_s0, 0, v_s0, 0])
    v_next = np.array([9.5, 10, 0, 0, 0, 0])  # s1; success sentinel; s2; failure sentinel ...
    np.testing.assert_allclose(res.diagnostics["node_value"], v_curr, **TIGHT)
    nc = np.zeros(6)
    nc[[0, 2, 4]] = norm([9.5, 0 - 0.1, 0])  # node s0: V(next) - pen
    nc[[3, 5]] = 0.0  # node s2: {0, 0}
    ec = norm(v_next - v_curr)
    ep = norm([10, 10, -0.1, 0, 0, 0])
    np.testing.assert_allclose(res.diagnostics["node_centric"], nc, **TIGHT)
    np.testing.assert_allclose(res.diagnostics["edge_centric"], ec, **TIGHT)
    np.testing.assert_allclose(res.advantages, ep + nc + ec, **TIGHT)
    sentinel = compute_advantages("g2po", b, success_value=20.0)
    np.testing.assert_allclose(sentinel.diagnostics["next_value"], [9.5, 20, 0, 0, 0, 0], **TIGHT)


def test_progpo_c_subtracts_the_penalty_from_coverage_returns():
    # all failed: T0 = o0 -> n1 -> n2, T1 = o0 -> n3 -> n1 (n1 already reached at index 1), T2 = o0 -> n4 (invalid)
    b = RolloutBatch.from_columns(
        group_id=[0] * 5,
        traj_id=[0, 0, 1, 1, 2],
        step=[0, 1, 0, 1, 0],
        reward=[0] * 5,
        observation=["o0", "n1", "o0", "n3", "o0"],
        next_observation=["n1", "n2", "n3", "n1", "n4"],
        valid=[True, True, True, True, False],
    )
    res = compute_advantages("progpo_c", b, lambda_invalid=0.3, kappa_c=2.0)
    np.testing.assert_array_equal(res.diagnostics["coverage"], [1, 1, 1, 0, 1])
    np.testing.assert_allclose(res.returns, [1.95, 1, 1, 0, 1], **TIGHT)
    ep = 2.0 * norm([2, 1, 1])  # C = (2, 1, 1)
    step = norm([1.95, 1, 1 - 0.3])  # anchor o0; n1 and n3 are singletons
    np.testing.assert_allclose(
        res.advantages, [ep[0] + step[0], ep[0], ep[1] + step[1], ep[1], ep[2] + step[2]], **TIGHT
    )
    assert res.stats["progpo_c_coverage_mean"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="coverage_scope='world' is not one of 'group', 'trajectory'"):
        from scpo.credit.progpo_c import first_visit_coverage

        first_visit_coverage(b.group_id, b.traj_id, b.step, b.observation, b.next_observation, "world")


def test_progpo_r_scale_none_weights_and_gamma():
    b = batch([(0, ["a", "b"], [0, 10]), (0, ["a", "c"], [0, 0])])
    res = compute_advantages(
        "progpo_r", b, depths=(1,), similarity_scorer="none", scale="none", omega_p=0.5, omega_d=2.0, gamma=0.5
    )
    # returns (gamma 0.5): 5, 10 ; 0, 0. Phi(a) = 2.5, Phi(b) = 10, Phi(c) = 0.
    # delta = 0 + 0.5 * 10 - 2.5, 10 - 10, 0 + 0 - 2.5, 0 -> centred over the group (mean 0)
    np.testing.assert_allclose(res.diagnostics["delta"], [2.5, 0, -2.5, 0], **TIGHT)
    ep = np.array([5, 5, -5, -5])
    prefix = np.array([2.5, 0, -2.5, 0])  # prefix (a): {5, 0} centred
    np.testing.assert_allclose(res.advantages, ep + 0.5 * prefix + 2.0 * np.array([2.5, 0, -2.5, 0]), **TIGHT)
    prior = compute_advantages(
        "progpo_r", b, depths=(1, 2), similarity_scorer="none", prior_variance=4.0, variance_floor=0.5
    )
    # depth 1: a {9.5, 0}: var 22.5625; b, c alone: prior 4. depth 2 keys (o_t, o_{t-1}): (a, pad) = depth 1's a;
    # (b, a), (c, a) alone: prior 4. So every key has equal depth-1 / depth-2 potentials: Phi = 4.75, 10, 4.75, 0
    np.testing.assert_allclose(prior.diagnostics["potential"], [4.75, 10, 4.75, 0], **TIGHT)
    floor = compute_advantages(
        "progpo_r",
        batch([(0, ["a"], [4]), (0, ["a"], [4]), (0, ["b"], [0])]),
        depths=(1, 2),
        similarity_scorer="none",
        variance_floor=0.5,
        prior_variance=1.0,
    )
    np.testing.assert_allclose(floor.diagnostics["potential"], [4, 4, 0], **TIGHT)


# ------------------------------------------------------------------ SCPO: options through compute_advantages
from scpo.scorers.base import CachedScorer  # noqa: E402


class CachedTable(CachedScorer):
    """The exact-text scorer with the real pair cache (1 for equal texts, else `table` or 0)."""

    def __init__(self, table: dict | None = None) -> None:
        super().__init__()
        self.table = table or {}

    def _score_batch(self, left, right):
        return np.array([self.table.get((a, b), float(a == b)) for a, b in zip(left, right)])


def scpo_batch(trajs) -> RolloutBatch:
    """trajs: (group, actions, won[, next observations]); observation = 'start' then 'after <previous action>'."""
    cols = defaultdict(list)
    for i, traj in enumerate(trajs):
        g, actions, won = traj[:3]
        nexts = traj[3] if len(traj) > 3 else [f"after {a}" for a in actions]
        for t, a in enumerate(actions):
            cols["group_id"].append(g)
            cols["traj_id"].append(i)
            cols["step"].append(t)
            cols["reward"].append(10.0 if (won and t == len(actions) - 1) else 0.0)
            cols["action"].append(a)
            cols["observation"].append("start" if t == 0 else nexts[t - 1])
            cols["next_observation"].append(nexts[t])
            cols["won"].append(won)
            cols["group_uid"].append(f"task{g}")
    return RolloutBatch.from_columns(**cols)


def test_scpo_tau_is_inclusive():
    b = scpo_batch([(0, ["X", "Y"], True), (0, ["X", "V"], False)])
    table = {("X -> after X", "X -> after X"): 0.7}
    gig = compute_advantages("gigpo", b, scale="none")
    at = compute_advantages("scpo", b, scorer=CachedTable(table), scale="none", tau=0.7)
    np.testing.assert_allclose(at.advantages - gig.advantages, [0, 0, 0.7 * 10, 0], **TIGHT)
    above = compute_advantages("scpo", b, scorer=CachedTable(table), scale="none", tau=0.7000001)
    np.testing.assert_array_equal(above.advantages, gig.advantages)
    np.testing.assert_allclose(above.diagnostics["scpo_best_score"], [0, 0, 0.7, 0])


def reference_batch() -> RolloutBatch:
    """Successes S1 = ABC, S2 = DE, S3 = ABZ, S4 = AY; failures F1 = ABQ, F2 = DQ, F5 = AW (rows 10.., 13.., 15..)."""
    return scpo_batch(
        [
            (0, list("ABC"), True),
            (0, list("DE"), True),
            (0, list("ABZ"), True),
            (0, list("AY"), True),
            (0, list("ABQ"), False),
            (0, list("DQ"), False),
            (0, list("AW"), False),
        ]
    )


def test_reference_all_with_several_successes_and_failures():
    b = reference_batch()
    s1, s2, s4 = 0, 3, 8
    res = compute_advantages("scpo", b, scorer=CachedTable(), reference="all", scale="none")
    # F1: S1 and S3 credit A, B (2 steps each; same length -> smaller texts: S1); F2: only S2 credits D;
    # F5: S1, S3 and S4 credit A once each -> the shortest, S4
    np.testing.assert_array_equal(res.diagnostics["scpo_match"][10:], [0, 1, -1, 0, -1, 0, -1])
    np.testing.assert_array_equal(res.diagnostics["scpo_ref_row"][10:], [s1, s1 + 1, -1, s2, -1, s4, -1])
    np.testing.assert_allclose(res.diagnostics["scpo_credit"][10:], [10, 10, 0, 10, 0, 10, 0], **TIGHT)
    np.testing.assert_array_equal(res.diagnostics["scpo_credit"][:10], 0)
    # "shortest": S2 and S4 tie on length; S4 gives the failures 2 credited steps (F1's A, F5's A), S2 one (F2's D)
    short = compute_advantages("scpo", b, scorer=CachedTable(), scale="none")
    np.testing.assert_array_equal(short.diagnostics["scpo_match"][10:], [0, -1, -1, -1, -1, 0, -1])
    np.testing.assert_array_equal(short.diagnostics["scpo_ref_row"][10:], [s4, -1, -1, -1, -1, s4, -1])
    # the gap is per trajectory: R_ref - R_i = 10 on every failed row with a reference, matched or not
    np.testing.assert_allclose(short.diagnostics["scpo_gap"][10:], 10.0)


def test_scpo_stats_by_hand():
    b = reference_batch()
    scorer = CachedTable()
    res = compute_advantages("scpo", b, scorer=scorer, reference="all", scale="none")
    # failed rows: 7 of 17, 4 credited with credit 10 each
    assert res.stats["scpo_frac_rows_shaped"] == pytest.approx(7 / 17)
    assert res.stats["scpo_frac_steps_credited"] == pytest.approx(4 / 7)
    assert res.stats["scpo_credit_mean"] == pytest.approx(40 / 7)
    # distinct failed texts {A, B, Q, D, W} x distinct success texts {A, B, C, D, E, Z, Y}: 35 pairs, scored once
    assert res.stats["scpo_pairs_scored"] == 35 and res.stats["scpo_cache_hits"] == 0
    for _ in range(2):  # counted per call, not accumulated
        again = compute_advantages("scpo", b, scorer=scorer, reference="all", scale="none")
        assert again.stats["scpo_pairs_scored"] == 0 and again.stats["scpo_cache_hits"] == 35
    assert res.stats["frac_mixed_groups"] == 1.0
    plain = compute_advantages("scpo", scpo_batch([(0, ["X"], True), (1, ["X"], False)]), scorer=CachedTable())
    assert plain.stats["scpo_frac_rows_shaped"] == 0 and plain.stats["scpo_frac_steps_credited"] == 0
    assert plain.stats["scpo_credit_mean"] == 0


def test_scpo_step_text_variants():
    # F repeats W's first action from another observation, and its next observation differs from W's
    b = scpo_batch([(0, ["X", "Y"], True, ["o1", "o2"]), (0, ["Z", "X"], False, ["o3", "o1"])])
    default = compute_advantages("scpo", b, scorer=CachedTable(), scale="none")
    # "X -> o1" is F's second step text too: credited at j = 0
    np.testing.assert_array_equal(default.diagnostics["scpo_match"][2:], [-1, 0])
    by_action = compute_advantages("scpo", b, scorer=CachedTable(), scale="none", step_text="action")
    np.testing.assert_array_equal(by_action.diagnostics["scpo_match"][2:], [-1, 0])
    obs_action = compute_advantages("scpo", b, scorer=CachedTable(), scale="none", step_text="obs_action")
    # "o3 -> X" differs from W's "start -> X": nothing is credited
    np.testing.assert_array_equal(obs_action.diagnostics["scpo_match"][2:], [-1, -1])
    c = scpo_batch([(0, ["X", "Y"], True, ["o1", "o2"]), (0, ["X", "Q"], False, ["o9", "o2"])])
    # same observation and action, other next observation: only the texts without it match
    assert compute_advantages("scpo", c, scorer=CachedTable(), step_text="action").diagnostics["scpo_match"][2] == 0
    assert compute_advantages("scpo", c, scorer=CachedTable(), step_text="obs_action").diagnostics["scpo_match"][2] == 0
    assert compute_advantages("scpo", c, scorer=CachedTable()).diagnostics["scpo_match"][2] == -1


def test_step_texts_by_hand():
    from scpo.credit.scpo import step_texts

    b = scpo_batch([(0, ["X", "Y"], True, ["o1", "o2"])])
    assert step_texts(b, "action_next_obs").tolist() == ["X -> o1", "Y -> o2"]
    assert step_texts(b, "action").tolist() == ["X", "Y"]
    assert step_texts(b, "obs_action").tolist() == ["start -> X", "o1 -> Y"]
    assert step_texts(b, "action", np.array([False, True])).tolist() == ["", "Y"]
    with pytest.raises(ValueError, match="step_text='obs' is not one of 'action_next_obs', 'action', 'obs_action'"):
        step_texts(b, "obs")


def test_scpo_success_reward_and_kappa_r_in_returns_mode():
    b = scpo_batch([(0, ["A", "B"], True), (0, ["A", "D"], False)])
    res = compute_advantages("scpo", b, scorer=CachedTable(), mode="returns", success_reward=6.0, kappa_r=0.25)
    # A matches j = 0: b = kappa_r R_success (j* - f) / T_ref s = 0.25 * 6 * 1 / 2 * 1
    np.testing.assert_allclose(res.diagnostics["scpo_bonus"], [0, 0, 0.75, 0], **TIGHT)
    np.testing.assert_allclose(res.returns[2:], [0.75, 0], **TIGHT)  # shaped step returns of the failure
    adv = compute_advantages("scpo", b, scorer=CachedTable(), success_reward=6.0)
    np.testing.assert_array_equal(adv.diagnostics["scpo_bonus"], 0)  # mode advantage: no bonus


def test_scpo_needs_a_scorer():
    from scpo.credit import CreditConfig
    from scpo.credit.scpo import compute_scpo

    with pytest.raises(
        ValueError,
        match=r"^scpo needs a scorer \(compute_advantages builds the configured one: "
        r"credit\.scpo\.scorer\)$",
    ):
        compute_scpo(scpo_batch([(0, ["A"], True)]), CreditConfig())


# ------------------------------------------------------------------ result checks and batch statistics
def test_credit_result_refuses_wrong_lengths_and_non_finite_advantages():
    ok = CreditResult("m", np.zeros(3), np.zeros(3), {"step_adv": np.zeros(3)})
    assert ok.stats == {} and list(ok.diagnostics) == ["step_adv"]
    assert CreditResult("m", np.zeros(2), np.zeros(2)).diagnostics == {}
    with pytest.raises(ValueError, match=r"CreditResult\[m\] 'returns' has 2 rows, advantages has 3"):
        CreditResult("m", np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match=r"CreditResult\[m\] 'step_adv' has 4 rows, advantages has 3"):
        CreditResult("m", np.zeros(3), np.zeros(3), {"step_adv": np.zeros(4)})
    adv = np.zeros(8)
    adv[[1, 2, 3, 4, 5, 7]] = [np.nan, np.inf, -np.inf, np.nan, np.nan, np.nan]
    with pytest.raises(ValueError, match=r"CreditResult\[m\] has non-finite advantages at rows \[1, 2, 3, 4, 5\]$"):
        CreditResult("m", adv, np.zeros(8))


def test_batch_statistics_by_hand():
    # group 0 mixed, group 1 all failed, group 2 all won (three trajectories of one step each, then one of two)
    b = batch([(0, ["a"], [10]), (0, ["a"], [0]), (1, ["a"], [0]), (2, ["a", "b"], [0, 10])])
    for method in ("grpo", "gigpo", "g2po", "hgpo", "progpo_c", "progpo_r"):
        stats = compute_advantages(method, b).stats
        assert (
            stats["frac_all_failed_groups"],
            stats["frac_all_success_groups"],
            stats["frac_mixed_groups"],
        ) == pytest.approx((1 / 3, 1 / 3, 1 / 3)), method
    gig = compute_advantages("gigpo", b).stats
    # anchors: (0, a) x2, (1, a), (2, a), (2, b): sizes 2, 2, 1, 1, 1
    assert gig["anchor_group_size_mean"] == pytest.approx(7 / 5)
    assert gig["frac_singleton_anchor_steps"] == pytest.approx(3 / 5)
    assert compute_advantages("progpo_c", b).stats["progpo_c_coverage_mean"] == 1.0
    assert compute_advantages("progpo_c", batch([(0, ["a"], [10])])).stats["progpo_c_coverage_mean"] == 0.0


# ------------------------------------------------------------------ options every estimator must read
ALL_METHODS = ("grpo", "gigpo", "scpo", "progpo_c", "progpo_r", "g2po", "hgpo", "hcapo")


def test_every_result_carries_its_method_name():
    b = batch([(0, ["a", "b"], [0, 10]), (0, ["a", "c"], [0, 0])])
    for method in ALL_METHODS:
        extra = {"hindsight_logprob": np.zeros(4)} if method == "hcapo" else {}
        assert compute_advantages(method, b, scorer=CachedTable(), **extra).method == method


def test_every_episode_term_follows_stats_over_trajectories():
    # R = 10, 0, 0 over trajectories of lengths 1, 2, 1: mean 10/3, std sqrt(100/3) (n - 1 = 2)
    b = batch([(0, ["a"], [10]), (0, ["a", "b"], [0, 0]), (0, ["c"], [0])])
    sd = np.sqrt(100 / 3) + EPS
    expected = np.array([20 / 3, -10 / 3, -10 / 3, -10 / 3]) / sd
    for method in ("gigpo", "scpo", "progpo_c", "progpo_r", "g2po", "hcapo"):
        extra = {"hindsight_logprob": np.zeros(4)} if method == "hcapo" else {}
        res = compute_advantages(method, b, scorer=CachedTable(), stats_over="trajectories", **extra)
        np.testing.assert_allclose(res.diagnostics["episode_adv"], expected, err_msg=method, **TIGHT)
    # SCPO's gap uses the same sigma: the failure's first step "a -> b" does not match "a -> end"; with the action
    # alone as the text it does, and gains (10 - 0) / sigma
    res = compute_advantages("scpo", b, scorer=CachedTable(), stats_over="trajectories", step_text="action")
    np.testing.assert_allclose(res.diagnostics["scpo_gap"], [0, 10 / sd, 10 / sd, 10 / sd], **TIGHT)


def norm_eps(x, eps, ddof=1):
    """norm with epsilon `eps`; a single value normalises to 0."""
    return norm(x, ddof, eps) if len(x) > 1 else np.zeros(len(x))


def test_every_estimator_reads_epsilon():
    # T0 = a -> b wins, T1 = a -> c, T2 = a -> b fails; epsilon 0.5 everywhere instead of 1e-6
    e = 0.5
    b = batch([(0, ["a", "b"], [0, 10]), (0, ["a", "c"], [0, 0]), (0, ["a", "b"], [0, 0])])
    ep = norm_eps([10, 10, 0, 0, 0, 0], e)
    g = np.array([9.5, 10, 0, 0, 0, 0])
    gig = compute_advantages("gigpo", b, epsilon=e)
    step = np.zeros(6)
    step[[0, 2, 4]] = norm_eps(g[[0, 2, 4]], e)
    step[[1, 5]] = norm_eps(g[[1, 5]], e)
    np.testing.assert_allclose(gig.advantages, ep + step, **TIGHT)
    np.testing.assert_allclose(compute_advantages("grpo", b, epsilon=e).advantages, ep, **TIGHT)
    # HGPO: l = 0 clusters a {9.5, 0, 0}, b {10, 0}; l = 1 cluster (a, b) {10, 0}; population std
    hg = compute_advantages("hgpo", b, epsilon=e, history_length=1)
    a0 = norm_eps([9.5, 0, 0], e, ddof=0)
    b0 = norm_eps([10, 0], e, ddof=0)
    np.testing.assert_allclose(
        hg.advantages, [a0[0], (b0[0] + 2 * b0[0]) / 3, a0[1], 0, a0[2], (b0[1] + 2 * b0[1]) / 3], **TIGHT
    )
    # ProGPO-R (depth 1, exact keys): prefix (a) {9.5, 0, 0}, (a, b) {10, 0}; Phi(a) = 9.5/3, Phi(b) = 5, Phi(c) = 0
    pr = compute_advantages("progpo_r", b, epsilon=e, depths=(1,), similarity_scorer="none")
    prefix = np.zeros(6)
    prefix[[0, 2, 4]] = norm_eps([9.5, 0, 0], e)
    prefix[[1, 5]] = norm_eps([10, 0], e)
    phi_a = 9.5 / 3
    delta = np.array([0.95 * 5 - phi_a, 10 - 5, 0 - phi_a, 0, 0.95 * 5 - phi_a, 0 - 5])
    np.testing.assert_allclose(pr.diagnostics["delta"], delta, **TIGHT)
    np.testing.assert_allclose(pr.advantages, ep + prefix + norm_eps(delta, e), **TIGHT)


def test_progpo_r_prefix_term_subtracts_the_penalty():
    # three trajectories share the prefix (a); the third's first step is invalid: its G is 0 - 0.1
    b = batch([(0, ["a", "b"], [0, 10]), (0, ["a", "c"], [0, 0]), (0, ["a", "c"], [0, 0], [False, True])])
    res = compute_advantages("progpo_r", b, depths=(1,), similarity_scorer="none")
    prefix = np.zeros(6)
    prefix[[0, 2, 4]] = norm([9.5, 0, -0.1])
    prefix[[3, 5]] = 0.0  # (a, x, c) twice with equal returns 0
    np.testing.assert_allclose(res.diagnostics["prefix_adv"], prefix, **TIGHT)


def test_thresholds_are_inclusive_in_the_semantic_expansion():
    # S(p, q) = 0.9 = similarity_thresh: p and q are neighbours and pool (depth 1 and depth 2 alike)
    for depths in ((1,), (2,)):
        res = compute_advantages(
            "progpo_r", expansion_batch(), scorer=Table({("p", "q"): 0.9}), depths=depths, similarity_thresh=0.9
        )
        assert res.diagnostics["potential"][1] == pytest.approx(10 / 3 if depths == (1,) else 5.0)
        below = compute_advantages(
            "progpo_r", expansion_batch(), scorer=Table({("p", "q"): 0.9}), depths=depths, similarity_thresh=0.91
        )
        assert below.diagnostics["potential"][1] == 10.0


def test_depth_potential_default_threshold_pools_only_perfect_scores():
    from scpo.credit.progpo_r import ObservationSimilarity, depth_potential

    group, obs, step = np.zeros(2, dtype=int), np.array([0, 1]), np.zeros(2, dtype=int)
    for score, expected in ((1.0, [3, 3]), (0.99, [2, 4])):
        sim = ObservationSimilarity(group, obs, np.array(["p", "q"], dtype=object), Table({("p", "q"): score}), 0.5)
        phi, _ = depth_potential(
            np.array([2.0, 4.0]),
            group,
            obs,
            step,
            1,
            min_members=2,
            prior_variance=25.0,
            variance_floor=1e-6,
            similarity=sim,
        )
        np.testing.assert_allclose(phi, expected)


def test_prefix_groups_keep_groups_apart_for_shared_codes():
    from scpo.credit.progpo_r import prefix_groups

    # the same observation / action codes in two groups: histories differ by group
    codes = prefix_groups(
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 0, 1]),
        np.array([0, 0, 0, 0]),
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 0, 1]),
    )
    assert len(set(codes.tolist())) == 4
    same = prefix_groups(
        np.array([0, 0, 0, 0]),
        np.array([0, 1, 0, 1]),
        np.array([0, 0, 0, 0]),
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 0, 1]),
    )
    assert same[0] == same[2] and same[1] == same[3] and same[0] != same[1]


def test_context_clusters_mark_rows_before_the_context_with_minus_one():
    from scpo.credit.hgpo import context_clusters

    codes = context_clusters(
        np.zeros(5, int), np.array(["a", "b", "c", "a", "b"], object), np.array([0, 1, 2, 0, 1]), 1
    )
    assert codes[0] == -1 and codes[3] == -1
    assert codes[1] == codes[4] and len({codes[1], codes[2]}) == 2 and min(codes[[1, 2, 4]]) >= 0
    res = compute_advantages("hgpo", batch([(0, ["a", "b"], [0, 10]), (0, ["a", "b"], [0, 0])]))
    for key in ("hgpo_size0", "hgpo_size1", "hgpo_size2", "anchor_group_size"):
        assert res.diagnostics[key].dtype == np.int64, key


def test_similarity_cluster_codes_count_on_across_three_groups():
    from scpo.credit.gigpo import similarity_anchor_groups

    b = batch([(0, ["A", "C"], [0, 0]), (1, ["B"], [0]), (2, ["C", "A"], [0, 0])])
    codes = similarity_anchor_groups(b.group_id, b.observation, Table(SIM), 0.95)
    # group 0: {A}, {C} -> 0, 1; group 1: {B} -> 2; group 2: {C}, {A} -> 3, 4
    np.testing.assert_array_equal(codes, [0, 1, 2, 3, 4])


# ------------------------------------------------------------------ HCAPO: inputs, messages, scale
def test_hcapo_messages_in_full_and_column_inputs():
    from scpo.credit import CreditConfig
    from scpo.credit.hcapo import compute_hcapo

    b = batch([(0, ["a", "b"], [0, 10]), (0, ["a"], [0])])
    with pytest.raises(
        ValueError,
        match=r"^hcapo needs hindsight_logprob \(n_rows,\): the mean token log-prob of each "
        r"step's response under the hindsight prompt at temperature 5\. It calls the "
        r"policy, so the trainer computes it \(scpo\.policy\.hindsight\) and passes it to "
        r"compute_advantages\('hcapo', batch, hindsight_logprob=\.\.\.\)$",
    ):
        compute_hcapo(b, CreditConfig())
    with pytest.raises(
        ValueError,
        match=r"^hindsight_logprob must be 3 finite values \(one per row\), got shape \(2,\) "
        r"with 0 non-finite$",
    ):
        compute_advantages("hcapo", b, hindsight_logprob=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"got shape \(3,\) with 2 non-finite$"):
        compute_advantages("hcapo", b, hindsight_logprob=[0.0, np.inf, np.nan])
    with pytest.raises(ValueError, match=r"^hcapo clip_low=1\.3 > clip_high=1\.2$"):
        compute_advantages("hcapo", b, hindsight_logprob=np.zeros(3), clip_low=1.3)
    lp = np.log([0.2, 0.6, 0.5])
    flat = compute_advantages("hcapo", b, hindsight_logprob=lp)
    column = compute_advantages("hcapo", b, hindsight_logprob=lp.reshape(-1, 1))  # (n, 1) is flattened
    np.testing.assert_array_equal(column.advantages, flat.advantages)
    # clip_low == clip_high is allowed: every ratio is that value
    equal = compute_advantages("hcapo", b, hindsight_logprob=lp, clip_low=1.0, clip_high=1.0)
    np.testing.assert_allclose(equal.diagnostics["hindsight_ratio"], [1.0, 1.0, 1.0])


def test_hcapo_scale_none_and_epsilon():
    b = batch([(0, ["a", "b"], [0, 10]), (0, ["a"], [0], [False])])
    lp = np.zeros(3)
    none = compute_advantages("hcapo", b, hindsight_logprob=lp, scale="none")
    q = np.array([9.5, 10, 0])
    step = q - q.mean()
    step[:2] = np.maximum(step[:2], 0)
    s = np.array([10, 10, -0.1])
    np.testing.assert_allclose(none.advantages, s - s.mean() + step, **TIGHT)
    eps = compute_advantages("hcapo", b, hindsight_logprob=lp, epsilon=0.5)
    step = norm_eps(q, 0.5)
    step[:2] = np.maximum(step[:2], 0)
    np.testing.assert_allclose(eps.advantages, norm_eps(s, 0.5) + step, **TIGHT)


# ------------------------------------------------------------------ ProGPO-C: diagnostics, scale, scope defaults
def test_progpo_c_diagnostics_pick_per_group():
    # group 0 has a success (GiGPO), group 1 failed entirely (coverage)
    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 1, 1, 1],
        traj_id=[0, 0, 1, 1, 2, 2, 3],
        step=[0, 1, 0, 1, 0, 1, 0],
        reward=[0, 10, 0, 0, 0, 0, 0],
        observation=["s", "t", "s", "u", "o", "p", "o"],
        next_observation=["t", "w", "u", "v", "p", "q", "r"],
    )
    res, gig = compute_advantages("progpo_c", b), compute_advantages("gigpo", b)
    np.testing.assert_array_equal(res.diagnostics["all_failed_group"], [False] * 4 + [True] * 3)
    for key in ("episode_adv", "step_adv"):
        np.testing.assert_array_equal(res.diagnostics[key][:4], gig.diagnostics[key][:4])
    # group 1: coverage p@1, q@2 (T2) and r@1 (T3): C = (2, 1); returns T2 (1.95, 1), T3 (1); anchor o {1.95, 1}
    ep = 0.5 * 0.5 / (np.sqrt(0.5) + EPS)
    st = 0.475 / (np.sqrt(2 * 0.475**2) + EPS)
    np.testing.assert_allclose(res.diagnostics["episode_adv"][4:], [ep, ep, -ep], **TIGHT)
    np.testing.assert_allclose(res.diagnostics["step_adv"][4:], [st, 0, -st], **TIGHT)
    np.testing.assert_allclose(res.returns, list(gig.returns[:4]) + [1.95, 1, 1], **TIGHT)
    none = compute_advantages("progpo_c", b, scale="none", epsilon=0.5)
    np.testing.assert_allclose(none.advantages[4:], [0.25 + 0.475, 0.25, -0.25 - 0.475], **TIGHT)
    eps = compute_advantages("progpo_c", b, epsilon=0.5)
    ep_eps = 0.5 * 0.5 / (np.sqrt(0.5) + 0.5)  # kappa_c * norm(C = (2, 1)) with eps 0.5
    np.testing.assert_allclose(eps.diagnostics["episode_adv"][4:], [ep_eps, ep_eps, -ep_eps], **TIGHT)


def test_first_visit_coverage_defaults_to_the_group_and_counts_returns_to_the_start():
    from scpo.credit.progpo_c import first_visit_coverage

    # T0: o -> o (back to its own start: seen at index 0) -> n ; T1: o -> n (n first reached at index 1 by T1)
    group, traj, step = np.zeros(3, int), np.array([0, 0, 1]), np.array([0, 1, 0])
    obs, nxt = np.array(["o", "o", "o"], object), np.array(["o", "n", "n"], object)
    np.testing.assert_array_equal(first_visit_coverage(group, traj, step, obs, nxt), [0, 0, 1])
    np.testing.assert_array_equal(first_visit_coverage(group, traj, step, obs, nxt, "trajectory"), [0, 1, 1])
