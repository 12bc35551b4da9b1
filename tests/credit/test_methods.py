"""ProGPO-C, ProGPO-R, G2PO, HGPO and HCAPO against small groups worked by hand, plus ProGPO-C's properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scpo.batch import RolloutBatch
from scpo.credit import compute_advantages
from scpo.credit.progpo_c import coverage_episode_term
from scpo.credit.progpo_r import ObservationSimilarity, depth_potential, fuse_potentials

from helpers.credit import EPS, norm, pop_norm


def two_step_group(obs_w=("s0", "s1"), obs_f=("s0", "s2")) -> RolloutBatch:
    """W (won, reward 10 at its last step) and F (failed), two steps each, same actions."""
    return RolloutBatch.from_columns(
        group_id=[0] * 4,
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0, 10, 0, 0],
        observation=[*obs_w, *obs_f],
        action=["x", "y", "x", "y"],
    )


# ------------------------------------------------------------------------------------------------ ProGPO-C
def all_failed_group() -> RolloutBatch:
    # T1: o0 -> n1 -> n2 ; T2: o0 -> n3 -> n1 (T2 reaches n1 at index 2, after T1 reached it at index 1)
    return RolloutBatch.from_columns(
        group_id=[0] * 4,
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0] * 4,
        observation=["o0", "n1", "o0", "n3"],
        next_observation=["n1", "n2", "n3", "n1"],
    )


def test_progpo_c_by_hand():
    res = compute_advantages("progpo_c", all_failed_group())
    np.testing.assert_array_equal(res.diagnostics["coverage"], [1, 1, 1, 0])
    # C = [2, 1] -> episode 0.5 * (+-0.5 / 0.7071) ; coverage returns T1: 1.95, 1 ; T2: 1, 0 ; anchor o0 {1.95, 1}
    ep = 0.5 * 0.5 / (np.sqrt(0.5) + EPS)
    step = 0.475 / (np.sqrt(2 * 0.475**2) + EPS)
    np.testing.assert_allclose(res.advantages, [ep + step, ep, -ep - step, -ep])
    np.testing.assert_allclose(res.returns, [1.95, 1.0, 1.0, 0.0])
    assert res.stats["frac_all_failed_groups"] == 1.0


def test_progpo_c_simultaneous_first_visits_all_count_whatever_the_order():
    # both trajectories reach n1 first at index 1: both count it, whichever trajectory comes first in the batch
    cols = {"group_id": [0] * 4, "step": [0, 1, 0, 1], "reward": [0] * 4, "observation": ["o0", "n1", "o0", "n1"]}
    b = RolloutBatch.from_columns(traj_id=[0, 0, 1, 1], next_observation=["n1", "n2", "n1", "n3"], **cols)
    swapped = RolloutBatch.from_columns(traj_id=[0, 0, 1, 1], next_observation=["n1", "n3", "n1", "n2"], **cols)
    np.testing.assert_array_equal(compute_advantages("progpo_c", b).diagnostics["coverage"], [1, 1, 1, 1])
    np.testing.assert_array_equal(
        compute_advantages("progpo_c", b).advantages, compute_advantages("progpo_c", swapped).advantages[[2, 3, 0, 1]]
    )


def test_progpo_c_trajectory_scope_counts_own_visits_only():
    res = compute_advantages("progpo_c", all_failed_group(), coverage_scope="trajectory")
    np.testing.assert_array_equal(res.diagnostics["coverage"], [1, 1, 1, 1])
    np.testing.assert_allclose(res.diagnostics["episode_adv"], 0.0)


def test_progpo_c_leaves_groups_with_a_success_to_gigpo():
    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 1, 1, 1, 1],
        traj_id=[0, 0, 1, 1, 2, 2, 3, 3],
        step=[0, 1] * 4,
        reward=[0, 10, 0, 0, 0, 0, 0, 0],
        observation=["s0", "s1", "s0", "s2", "o0", "n1", "o0", "n1"],
        next_observation=["s1", "s3", "s2", "s4", "n1", "n2", "n1", "n1"],
    )
    res, gig = compute_advantages("progpo_c", b), compute_advantages("gigpo", b)
    np.testing.assert_array_equal(res.advantages[:4], gig.advantages[:4])
    np.testing.assert_array_equal(res.diagnostics["coverage"][4:], [1, 1, 1, 0])
    assert not np.allclose(res.advantages[4:], gig.advantages[4:])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=2, max_size=8), st.data())
def test_more_first_visits_never_lower_the_episode_term(coverage, data):
    c = np.array(coverage, dtype=float)
    i = data.draw(st.integers(0, len(c) - 1))
    more = c.copy()
    more[i] += data.draw(st.integers(1, 10))
    group = np.zeros(len(c), dtype=int)
    for scale in ("std", "none"):
        before = coverage_episode_term(c, group, kappa_c=0.5, scale=scale, epsilon=EPS)[i]
        after = coverage_episode_term(more, group, kappa_c=0.5, scale=scale, epsilon=EPS)[i]
        assert after >= before - 1e-12


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.lists(st.integers(0, 3), min_size=1, max_size=5), st.booleans()),
        min_size=1,
        max_size=8,
    )
)
def test_progpo_c_changes_only_all_failed_groups(trajs):
    cols = {k: [] for k in ("group_id", "traj_id", "step", "reward", "observation", "next_observation", "won")}
    for i, (g, states, won) in enumerate(trajs):
        for t, s in enumerate(states):
            cols["group_id"].append(g)
            cols["traj_id"].append(i)
            cols["step"].append(t)
            cols["reward"].append(10.0 if won and t == len(states) - 1 else 0.0)
            cols["observation"].append(f"room {states[t - 1] if t else 9}")
            cols["next_observation"].append(f"room {s}")
            cols["won"].append(won)
    order = np.argsort(cols["group_id"], kind="stable")
    traj_order = list(dict.fromkeys(np.asarray(cols["traj_id"])[order]))
    rows = np.concatenate([np.flatnonzero(np.asarray(cols["traj_id"]) == t) for t in traj_order])
    b = RolloutBatch.from_columns(**{k: np.asarray(v)[rows] for k, v in cols.items()})
    res, gig = compute_advantages("progpo_c", b), compute_advantages("gigpo", b)
    any_won = (np.bincount(b.group_id, weights=b.won.astype(float)) > 0)[b.group_id]
    np.testing.assert_array_equal(res.advantages[any_won], gig.advantages[any_won])


# ------------------------------------------------------------------------------------------------ G2PO
def test_g2po_by_hand():
    res = compute_advantages("g2po", two_step_group())
    # V = mean of 0.95^(T - t) R (public exponent): V(s0) = mean(0.95^2 * 10, 0) = 4.5125, V(s1) = 9.5, V(s2) = 0
    # next: W0 -> s1 (9.5), W1 -> success sentinel (10), F0 -> s2 (0), F1 -> failure sentinel (0)
    np.testing.assert_allclose(res.diagnostics["node_value"], [4.5125, 9.5, 4.5125, 0])
    np.testing.assert_allclose(res.diagnostics["next_value"], [9.5, 10, 0, 0])
    nc = np.array([4.75 / (np.sqrt(2 * 4.75**2) + EPS), 0, -4.75 / (np.sqrt(2 * 4.75**2) + EPS), 0])
    ec = norm([9.5 - 4.5125, 10 - 9.5, 0 - 4.5125, 0])
    np.testing.assert_allclose(res.diagnostics["node_centric"], nc)
    np.testing.assert_allclose(res.diagnostics["edge_centric"], ec)
    np.testing.assert_allclose(res.advantages, norm([10, 10, 0, 0]) + nc + ec)
    half = compute_advantages("g2po", two_step_group(), w=0.5)
    np.testing.assert_allclose(half.advantages, norm([10, 10, 0, 0]) + 0.5 * (nc + ec))


# ------------------------------------------------------------------------------------------------ HGPO
def hgpo_batch() -> RolloutBatch:
    # T0: a -> b (10 at its last step), T1: a -> b, T2: c -> b ; G: T0 9.5, 10 ; T1 0, 0 ; T2 0, 0
    return RolloutBatch.from_columns(
        group_id=[0] * 6,
        traj_id=[0, 0, 1, 1, 2, 2],
        step=[0, 1] * 3,
        reward=[0, 10, 0, 0, 0, 0],
        observation=["a", "b", "a", "b", "c", "b"],
    )


def test_hgpo_by_hand():
    res = compute_advantages("hgpo", hgpo_batch(), history_length=1, alpha=1.0)
    # l=0 (same o_t): {a: 9.5, 0}, {b: 10, 0, 0}, {c} -> 0 ; l=1 (o_{t-1}, o_t), only t >= 1: {(a, b): 10, 0}, {(c, b)}
    # weights (l + 1)^1: l=0 -> 1, l=1 -> 2, renormalised over the depths with a non-zero term
    b0 = [pop_norm(10, [10, 0, 0]), pop_norm(0, [10, 0, 0])]
    one = pop_norm(9.5, [9.5, 0])
    expected = [
        one,
        (1 * b0[0] + 2 * pop_norm(10, [10, 0])) / 3,
        -one,
        (1 * b0[1] + 2 * pop_norm(0, [10, 0])) / 3,
        0.0,
        b0[1],
    ]
    np.testing.assert_allclose(res.advantages, expected, rtol=1e-12)
    np.testing.assert_array_equal(res.diagnostics["hgpo_size1"], [0, 2, 0, 2, 0, 1])
    np.testing.assert_array_equal(res.diagnostics["hgpo_size0"], [2, 3, 2, 3, 1, 3])


def test_hgpo_alpha_and_scale_none():
    res = compute_advantages("hgpo", hgpo_batch(), history_length=1, alpha=2.0, scale="none")
    # weights (l + 1)^2: 1 and 4 ; scale none: centred only
    np.testing.assert_allclose(res.advantages[1], (1 * (10 - 10 / 3) + 4 * 5) / 5)
    np.testing.assert_allclose(res.advantages[0], 4.75)


# ------------------------------------------------------------------------------------------------ HCAPO
def test_hcapo_by_hand():
    b = two_step_group()
    lp = np.log([0.2, 0.6, 0.5, 0.5])
    res = compute_advantages("hcapo", b, hindsight_logprob=lp)
    # W: ratios 0.5, 1.5 -> clipped 0.8, 1.2 ; Q_W = 0.8 * 0.95 * 10, 1.2 * 10 ; F: R = 0 -> Q = 0
    q = np.array([7.6, 12.0, 0.0, 0.0])
    step = norm(q)
    step[:2] = np.maximum(step[:2], 0)
    np.testing.assert_allclose(res.diagnostics["hindsight_ratio"], [0.8, 1.2, 1.0, 1.0])
    np.testing.assert_allclose(res.advantages, norm([10, 10, 0, 0]) + step)


def test_hcapo_without_hindsight_logprob_says_the_trainer_computes_it():
    with pytest.raises(ValueError, match="trainer computes it"):
        compute_advantages("hcapo", two_step_group())
    with pytest.raises(ValueError, match="4 finite values"):
        compute_advantages("hcapo", two_step_group(), hindsight_logprob=np.zeros(3))


# ------------------------------------------------------------------------------------------------ ProGPO-R
def test_progpo_r_by_hand():
    b = RolloutBatch.from_columns(
        group_id=[0] * 4,
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0, 10, 0, 0],
        observation=["a", "b", "a", "c"],
        action=["x", "y", "x", "y"],
    )
    res = compute_advantages("progpo_r", b, depths=(1,), similarity_scorer="none")
    # prefix (a): returns 9.5, 0 -> +-0.7071 ; (a, x, b) and (a, x, c) singletons -> 0
    # Phi(a) = 4.75, Phi(b) = 10, Phi(c) = 0 ; delta = r + 0.95 Phi(next) - Phi (terminal 0):
    # 0 + 9.5 - 4.75, 10 + 0 - 10 (the winning final step: 0, not negative), 0 + 0 - 4.75, 0
    np.testing.assert_allclose(res.diagnostics["potential"], [4.75, 10, 4.75, 0])
    np.testing.assert_allclose(res.diagnostics["delta"], [4.75, 0, -4.75, 0])
    np.testing.assert_allclose(
        res.diagnostics["prefix_adv"], [4.75 / (np.sqrt(2 * 4.75**2) + EPS), 0, -4.75 / (np.sqrt(2 * 4.75**2) + EPS), 0]
    )
    expected = norm([10, 10, 0, 0]) + res.diagnostics["prefix_adv"] + norm([4.75, 0, -4.75, 0])
    np.testing.assert_allclose(res.advantages, expected)


def test_progpo_r_penalty_is_subtracted_from_delta_not_from_the_potentials():
    b = RolloutBatch.from_columns(
        group_id=[0] * 4,
        traj_id=[0, 0, 1, 1],
        step=[0, 1, 0, 1],
        reward=[0, 10, 0, 0],
        observation=["a", "b", "a", "c"],
        action=["x", "y", "x", "y"],
        valid=[True, True, False, True],
    )
    res = compute_advantages("progpo_r", b, depths=(1,), similarity_scorer="none", omega_p=0.0)
    np.testing.assert_allclose(res.diagnostics["potential"], [4.75, 10, 4.75, 0])
    np.testing.assert_allclose(res.diagnostics["delta"], [4.75, 0, -4.75, 0])
    ep = np.array([10, 10, -0.1, 0.0])
    np.testing.assert_allclose(res.advantages, norm(ep) + norm([4.75, 0, -4.85, 0]))


def test_fuse_potentials_inverse_variance():
    assert fuse_potentials([np.array([1.0]), np.array([3.0])], [np.array([1.0]), np.array([3.0])])[0] == 1.5


class PairTable:
    """score_matrix: 1 for equal texts, `sim` between 'p' and 'q', else 0."""

    def __init__(self, sim: float) -> None:
        self.sim = sim

    def score_matrix(self, left, right):
        pair = {("p", "q"), ("q", "p")}
        return np.array([[1.0 if a == b else (self.sim if (a, b) in pair else 0.0) for b in right] for a in left])


class LengthGap:
    """score_matrix: 1 / (1 + |len(a) - len(b)|), distinct for texts of distinct lengths."""

    def score_matrix(self, left, right):
        return np.array([[1.0 / (1.0 + abs(len(a) - len(b))) for b in right] for a in left])


def test_observation_similarity_looks_up_each_groups_own_block():
    """Three groups of 2, 3 and 4 distinct observations (their rows interleaved): every same-group pair reads the
    scorer's value for its two texts, padding scores 1 against padding and 0 against an observation."""
    texts = np.array(["a", "bb", "c", "dd", "eee", "f", "gg", "hhh", "iiii"], dtype=object)
    group = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2])
    order = np.array([5, 0, 2, 6, 1, 3, 7, 8, 4])  # rows interleaved across groups; codes stay dense
    similarity = ObservationSimilarity(group[order], order, texts[order], LengthGap(), 0.4)
    u, v = (a.ravel() for a in np.meshgrid(np.arange(9), np.arange(9), indexing="ij"))
    same = group[u] == group[v]
    expected = LengthGap().score_matrix(texts[u[same]], texts[v[same]]).diagonal()
    np.testing.assert_allclose(similarity.lookup(u[same], v[same]), expected)
    np.testing.assert_array_equal(similarity.lookup(np.array([-1, -1, 3]), np.array([-1, 3, -1])), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("sim, expected_phi, expected_var", [(0.95, [3, 3], [1.0, 1.0]), (0.5, [2, 4], [25, 25])])
def test_semantic_expansion_pools_similar_singleton_keys(sim, expected_phi, expected_var):
    group, obs, step = np.zeros(2, dtype=int), np.array([0, 1]), np.zeros(2, dtype=int)
    similarity = ObservationSimilarity(group, obs, np.array(["p", "q"], dtype=object), PairTable(sim), 0.9)
    phi, var = depth_potential(
        np.array([2.0, 4.0]),
        group,
        obs,
        step,
        1,
        min_members=2,
        prior_variance=25.0,
        variance_floor=1e-6,
        similarity=similarity,
        thresh=0.9,
    )
    # pooled: mean 3, sample variance 2, count 2 -> var 1
    np.testing.assert_allclose(phi, expected_phi)
    np.testing.assert_allclose(var, expected_var)


def test_prefix_groups_partition_equals_explicit_histories():
    from scpo.credit.grouping import combine_codes, factorize
    from scpo.credit.progpo_r import prefix_groups
    from scpo.credit.synthetic import synthetic_batch

    b = synthetic_batch(n_groups=4, group_size=6, max_steps=8, n_states=3, seed=5)
    obs = combine_codes(b.group_id, factorize(b.observation))
    codes = prefix_groups(b.group_id, obs, factorize(b.action), b.traj_id, b.step)
    keys, cur = [], ()
    for r in range(b.n_rows):
        cur = (b.group_id[r], b.observation[r]) if b.step[r] == 0 else cur + (b.action[r - 1], b.observation[r])
        keys.append(repr(cur))
    explicit = factorize(np.array(keys, dtype=object))
    pairs = set(zip(codes.tolist(), explicit.tolist()))
    assert len(pairs) == len(set(codes.tolist())) == len(set(explicit.tolist()))
    assert len(pairs) < b.n_rows  # some histories are shared (the test is not vacuous)


def test_a_scorer_name_passed_as_scorer_is_the_methods_scorer_option():
    """`compute_advantages("scpo", b, scorer="lexical")` reads the name as SCPO's `scorer` option, not as a scorer
    object; a method without that option names the allowed ones."""
    from scpo.credit.synthetic import synthetic_batch

    b = synthetic_batch()
    by_name = compute_advantages("scpo", b, scorer="lexical", tau=0.8).advantages
    np.testing.assert_array_equal(by_name, compute_advantages("scpo", b, tau=0.8).advantages)
    with pytest.raises(ValueError, match="unknown option 'scorer' for credit method 'gigpo'"):
        compute_advantages("gigpo", b, scorer="lexical")


# ------------------------------------------------------------------------------------------ shuffled credit (control)
def test_shuffled_credit_permutes_grpos_advantages_within_each_group():
    from scpo.batch import stable_uid
    from scpo.credit import CreditConfig
    from scpo.credit.grpo import compute_grpo
    from scpo.credit.shuffled import group_permutation

    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 0, 1, 1, 1],
        traj_id=[0, 0, 1, 1, 1, 2, 3, 3],
        step=[0, 1, 0, 1, 2, 0, 0, 1],
        reward=[0, 10, 0, 0, 0, 0, 0, 10],
        group_uid=["ga"] * 5 + ["gb"] * 3,
    )
    base = compute_grpo(b, CreditConfig()).advantages
    res = compute_advantages("shuffled", b)
    src = res.diagnostics["shuffled_source_row"]
    assert sorted(src[:5].tolist()) == [0, 1, 2, 3, 4] and sorted(src[5:].tolist()) == [5, 6, 7]
    np.testing.assert_array_equal(res.advantages, base[src])
    for g in (0, 1):  # the same magnitudes per group
        rows = b.group_id == g
        np.testing.assert_array_equal(np.sort(res.advantages[rows]), np.sort(base[rows]))
    # a group's permutation depends on its own content id and the seed only: the same group in another batch, alone
    alone = b.select(b.group_id == 1)
    alone = RolloutBatch.from_columns(**{**alone.columns(), "group_id": [0, 0, 0], "traj_id": [0, 1, 1]})
    np.testing.assert_array_equal(compute_advantages("shuffled", alone).advantages, res.advantages[5:])
    other = [compute_advantages("shuffled", b, seed=s).diagnostics["shuffled_source_row"][:5] for s in range(1, 8)]
    assert any(p.tolist() != src[:5].tolist() for p in other)  # another seed, another permutation
    # group_permutation in a given order: position k of the order takes the row at position pi[k]
    canonical = np.array(["b", "a", "c", "e", "d", "x", "y", "z"], dtype=object)
    src2 = group_permutation(b.group_id, b.group_uid, 0, canonical)
    order = np.argsort(canonical[:5], kind="stable")
    pi = np.random.default_rng([0, int(stable_uid("shuffled", "ga", length=12), 16)]).permutation(5)
    np.testing.assert_array_equal(src2[order], order[pi])


def test_shuffled_credit_is_named_and_keeps_grpos_statistics():
    from scpo.credit import CreditConfig
    from scpo.credit.grpo import compute_grpo

    b = two_step_group()
    res = compute_advantages("shuffled", b)
    assert res.method == "shuffled"
    assert res.stats == compute_grpo(b, CreditConfig()).stats  # the group statistics are GRPO's, before the permutation
    np.testing.assert_array_equal(res.diagnostics["episode_adv"], res.advantages)  # the credit map shows what trains


def test_a_trajectory_digest_covers_every_field_of_every_step_in_step_order():
    from scpo.batch import stable_uid
    from scpo.credit.shuffled import trajectory_digests

    columns = {
        "group_id": [0] * 4,
        "traj_id": [5, 5, 9, 9],
        "step": [1, 0, 0, 1],  # trajectory 5's rows out of step order
        "reward": [10.0, 0.0, 0.0, 0.0],
        "observation": ["o1", "o0", "o0", "o1"],
        "action": ["b", "a", "a", "b"],
        "next_observation": ["o2", "o1", "o1", "o2"],
        "valid": [True, True, True, True],
    }
    digests = trajectory_digests(RolloutBatch.from_columns(**columns))
    r0, r10 = repr(np.float64(0.0)), repr(np.float64(10.0))  # the reward column's values, as the digest writes them
    steps = [f"o0\x1fa\x1f{r0}\x1fTrue\x1fo1", f"o1\x1fb\x1f{r10}\x1fTrue\x1fo2"]  # each step's content, in order
    assert digests[0] == digests[1] == stable_uid("trajectory", *steps)
    assert digests[2] == digests[3] == stable_uid("trajectory", steps[0], f"o1\x1fb\x1f{r0}\x1fTrue\x1fo2")
    for field, other in [("valid", [True, False, True, True]), ("reward", [10.0, 1.0, 0.0, 0.0])]:
        changed = trajectory_digests(RolloutBatch.from_columns(**{**columns, field: other}))
        assert changed[0] != digests[0] and changed[2] == digests[2], field  # one field of one step: another digest


def test_a_groups_permutation_applies_to_its_rows_sorted_stably_by_the_canonical_key():
    from scpo.batch import stable_uid
    from scpo.credit.shuffled import group_permutation

    n = 40  # above numpy's insertion-sort cut-off: an unstable sort would reorder the ties
    group_id = np.zeros(n, dtype=int)
    canonical = np.array([f"k{i % 3}" for i in range(n)], dtype=object)
    src = group_permutation(group_id, np.array(["g"] * n, dtype=object), 4, canonical)
    order = np.concatenate([np.flatnonzero(canonical == k) for k in ("k0", "k1", "k2")])  # ties in batch order
    pi = np.random.default_rng([4, int(stable_uid("shuffled", "g", length=12), 16)]).permutation(n)
    np.testing.assert_array_equal(src[order], order[pi])
