"""SCPO revision 2: the spec's worked example, the matching rules and reference choice by hand, revision 1 (mode
"returns") kept as an ablation, and the guarantees as hypothesis properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scpo.batch import RolloutBatch
from scpo.credit import compute_advantages
from scpo.credit.grouping import discounted_returns
from scpo.credit.scpo import SCPOOptions, monotone_match
from scpo.scorers import make_scorer
from scpo.scorers.base import CachedScorer

from helpers.credit import EPS, norm


class TableScorer(CachedScorer):
    """Scores from a table (default: 1 if the texts are equal, else 0)."""

    def __init__(self, table: dict | None = None) -> None:
        super().__init__()
        self.table = table or {}

    def _score_batch(self, left, right):
        return np.array([self.table.get((a, b), float(a == b)) for a, b in zip(left, right)])


def batch_from(trajs: list[tuple[int, list[str], bool]]) -> RolloutBatch:
    """trajs: (group, actions, won). Step text = action -> next_observation; next_observation = 'after ' + action."""
    cols = {
        k: []
        for k in (
            "group_id",
            "traj_id",
            "step",
            "reward",
            "action",
            "observation",
            "next_observation",
            "won",
            "group_uid",
        )
    }
    for i, (g, actions, won) in enumerate(trajs):
        for t, a in enumerate(actions):
            cols["group_id"].append(g)
            cols["traj_id"].append(i)
            cols["step"].append(t)
            cols["reward"].append(10.0 if (won and t == len(actions) - 1) else 0.0)
            cols["action"].append(a)
            cols["observation"].append("start" if t == 0 else f"after {actions[t - 1]}")
            cols["next_observation"].append(f"after {a}")
            cols["won"].append(won)
            cols["group_uid"].append(f"task{g}")
    return RolloutBatch.from_columns(**cols)


# ------------------------------------------------------------------------------------------ the spec's worked example
def test_worked_example_of_the_spec():
    """A = (X, Y, Z) won, B = (X, Y, W) failed, C = (Q, Q, Q) failed, exact-text scorer, scale std."""
    b = batch_from([(0, ["X", "Y", "Z"], True), (0, ["X", "Y", "W"], False), (0, ["Q", "Q", "Q"], False)])
    gig = compute_advantages("gigpo", b)
    res = compute_advantages("scpo", b, scorer=TableScorer())
    # episode term: 9 rows (10, 10, 10, 0 x 6): mean 10/3, unbiased std 5
    ep_fail = -(10 / 3) / (5 + EPS)
    # anchors: "start" {A0: 9.025, B0: 0, C0: 0} -> B0 = -(a/3) / (a/sqrt 3 + eps);
    #          "after X" {A1: 9.5, B1: 0} -> -1/sqrt2
    a = 9.025
    b0 = ep_fail - (a / 3) / (a / np.sqrt(3) + EPS)
    b1 = ep_fail - 4.75 / (9.5 / np.sqrt(2) + EPS)
    np.testing.assert_allclose(gig.advantages[[3, 4]], [b0, b1], rtol=1e-12)
    assert gig.advantages[3] == pytest.approx(-1.24, abs=0.01) and gig.advantages[4] == pytest.approx(-1.37, abs=0.01)
    gap = 10 / (5 + EPS)  # A^E_ref - A^E_B = (R_A - R_B) / (sigma + eps)
    np.testing.assert_allclose(res.advantages[[3, 4]], [b0 + gap, b1 + gap], rtol=1e-12)
    assert np.all(res.advantages[[3, 4]] > 0)  # B's first two steps replay A's: positive credit
    np.testing.assert_array_equal(res.advantages[[0, 1, 2, 5, 6, 7, 8]], gig.advantages[[0, 1, 2, 5, 6, 7, 8]])
    np.testing.assert_array_equal(res.diagnostics["scpo_match"], [-1, -1, -1, 0, 1, -1, -1, -1, -1])
    np.testing.assert_array_equal(res.diagnostics["scpo_ref_row"], [-1, -1, -1, 0, 1, -1, -1, -1, -1])
    np.testing.assert_allclose(res.diagnostics["scpo_credit"], [0, 0, 0, gap, gap, 0, 0, 0, 0], rtol=1e-12)
    # with kappa = 1 and s = 1 a credited step's episode part is the reference's
    ep_ref = (10 - 10 / 3) / (5 + EPS)
    np.testing.assert_allclose(res.advantages[3] - gig.diagnostics["step_adv"][3], ep_ref, rtol=1e-12)


def test_scale_none_moves_the_raw_return_gap_and_kappa_and_scores_scale_it():
    b = batch_from([(0, ["X", "Y"], True), (0, ["X", "V"], False)])
    gig = compute_advantages("gigpo", b, scale="none")
    table = {("X -> after X", "X -> after X"): 0.8}
    res = compute_advantages("scpo", b, scorer=TableScorer(table), scale="none", kappa=0.5, tau=0.7)
    # B0 matches A0 with s = 0.8: credit = kappa s (R_A - R_B) = 0.5 * 0.8 * 10
    np.testing.assert_allclose(res.advantages - gig.advantages, [0, 0, 4.0, 0])
    np.testing.assert_allclose(res.diagnostics["scpo_score"], [0, 0, 0.8, 0])


def test_penalties_do_not_enter_the_gap():
    cols = {
        "group_id": [0] * 4,
        "traj_id": [0, 0, 1, 1],
        "step": [0, 1, 0, 1],
        "reward": [0, 10, 0, 0],
        "action": ["X", "Y", "X", "V"],
        "observation": ["s", "after X", "s", "after X"],
        "next_observation": ["after X", "after Y", "after X", "after V"],
        "valid": [True, True, True, False],
    }
    b = RolloutBatch.from_columns(**cols)
    res = compute_advantages("scpo", b, scorer=TableScorer())
    scores = np.array([10, 10, 0, -0.1])  # R_i - pen_t, the statistics of GiGPO's episode term
    gap = 10 / (scores.std(ddof=1) + EPS)
    np.testing.assert_allclose(res.diagnostics["scpo_gap"], [0, 0, gap, gap], rtol=1e-12)
    np.testing.assert_allclose(res.diagnostics["scpo_credit"], [0, 0, gap, 0], rtol=1e-12)


# ----------------------------------------------------------------------------------------------- matching by hand
def test_monotone_match_argmax_by_hand():
    # reference A B C ; failure A C B with exact scores: j* = 0, then 2 (skipping B), then nothing is left after 2
    s = np.array([[[1, 0, 0], [0, 0, 1], [0, 1, 0]]], dtype=float)
    j, credited, best, advance = monotone_match(s, np.array([3]), np.array([3]), tau=0.7)
    np.testing.assert_array_equal(j[0], [0, 2, -1])
    np.testing.assert_allclose(credited[0], [1, 1, 0])
    np.testing.assert_array_equal(advance[0], [1, 2, 0])
    np.testing.assert_allclose(best[0], [1, 1, 0])


def test_monotone_match_first_vs_argmax_and_the_tau_boundary():
    s = np.array([[[0.8, 0.95, 0.1], [0.2, 0.9, 0.7]]])
    j, cr, best, _ = monotone_match(s, np.array([2]), np.array([3]), tau=0.7, match="first")
    np.testing.assert_array_equal(j[0], [0, 1])  # first j > -1 with S >= 0.7 is 0; then first j > 0 is 1
    np.testing.assert_allclose(cr[0], [0.8, 0.9])
    np.testing.assert_allclose(best[0], [0.95, 0.9])
    j, cr, _, _ = monotone_match(s, np.array([2]), np.array([3]), tau=0.7, match="argmax")
    np.testing.assert_array_equal(j[0], [1, 2])  # argmax j = 1 (0.95), then j = 2 at exactly tau (>=)
    np.testing.assert_allclose(cr[0], [0.95, 0.7])
    j, cr, best, _ = monotone_match(s, np.array([2]), np.array([3]), tau=0.71, match="argmax")
    np.testing.assert_array_equal(j[0], [1, -1])
    np.testing.assert_allclose(best[0], [0.95, 0.7])
    j, _, _, _ = monotone_match(s, np.array([2]), np.array([3]), tau=0.96, match="first")
    np.testing.assert_array_equal(j[0], [-1, -1])
    with pytest.raises(ValueError, match="match='best'"):
        monotone_match(s, np.array([2]), np.array([3]), tau=0.7, match="best")


def test_ties_in_scores_go_to_the_smallest_j_and_padding_is_ignored():
    s = np.array([[[0.9, 0.9, 5.0], [0.9, 0.9, 5.0]], [[0.1, 0.8, 0.0], [0.0, 0.0, 0.0]]])
    j, _, _, _ = monotone_match(s, np.array([2, 1]), np.array([2, 3]), tau=0.7)
    np.testing.assert_array_equal(j, [[0, 1], [1, -1]])  # the 5.0 of instance 0 lies in its padding (T_ref = 2)


# ------------------------------------------------------------------------------------------------ the reference
def test_shortest_reference_ties_broken_by_credit_then_texts_never_by_order():
    # two equally short successes; the failure replays the second one's first two steps
    trajs = [(0, ["A", "B", "C"], True), (0, ["X", "Y", "Z"], True), (0, ["X", "Y", "Q", "Q"], False)]
    for order in ([0, 1, 2], [1, 0, 2], [2, 1, 0]):
        b = batch_from([trajs[i] for i in order])
        res = compute_advantages("scpo", b, scorer=TableScorer())
        fail = np.flatnonzero(~b.won)
        np.testing.assert_array_equal(res.diagnostics["scpo_match"][fail], [0, 1, -1, -1])
        ref = res.diagnostics["scpo_ref_row"][fail[0]]
        assert b.action[ref] == "X"
    # equal credit (nothing matches): the lexicographically smallest texts, "A -> ..." < "X -> ..."
    b = batch_from([(0, ["X", "Y"], True), (0, ["A", "B"], True), (0, ["X", "B"], False)])
    table = {("X -> after X", "X -> after X"): 0.0, ("B -> after B", "B -> after B"): 0.0}
    res = compute_advantages("scpo", b, scorer=TableScorer(table), tau=0.0)
    assert b.action[res.diagnostics["scpo_ref_row"][4]] == "A"


def test_each_mixed_group_keeps_its_own_reference():
    """One reference per group, chosen within the group: two mixed groups, each failure replays its own group's
    success's first step, and both are credited (a reference chosen over the whole batch would credit one group)."""
    for reference in ("shortest", "random"):
        b = batch_from([(0, ["A", "B"], True), (0, ["A", "Z"], False), (1, ["C", "D"], True), (1, ["C", "Y"], False)])
        res = compute_advantages("scpo", b, scorer=TableScorer(), reference=reference)
        np.testing.assert_array_equal(res.diagnostics["scpo_match"], [-1, -1, 0, -1, -1, -1, 0, -1])
        ref_row = res.diagnostics["scpo_ref_row"]
        assert b.action[ref_row[2]] == "A" and b.action[ref_row[6]] == "C"


def test_reference_all_takes_per_failure_the_most_credit():
    b = batch_from(
        [(0, ["A", "B", "C", "E"], True), (0, ["Q", "C"], True), (0, ["A", "B"], False), (0, ["Q", "Z"], False)]
    )
    short = compute_advantages("scpo", b, scorer=TableScorer())
    every = compute_advantages("scpo", b, scorer=TableScorer(), reference="all")
    # shortest (Q C) shares nothing with A B but Q with Q Z; "all" gives A B the long success (2 steps credited)
    np.testing.assert_array_equal(short.diagnostics["scpo_match"][6:], [-1, -1, 0, -1])
    np.testing.assert_array_equal(every.diagnostics["scpo_match"][6:], [0, 1, 0, -1])
    assert b.action[every.diagnostics["scpo_ref_row"][8]] == "Q"


def test_random_reference_is_seeded_by_content():
    trajs = [(0, ["A", "B"], True), (0, ["C", "D", "E"], True), (0, ["A", "D", "E"], False)]
    b = batch_from(trajs)
    runs = [compute_advantages("scpo", b, scorer=TableScorer(), reference="random", seed=s) for s in range(8)]
    # reference (A, B) credits A (j = 0); reference (C, D, E) credits D, E (j = 1, 2)
    refs = {tuple(r.diagnostics["scpo_match"][5:]) for r in runs}
    assert refs == {(0, -1, -1), (-1, 1, 2)}  # both successes are drawn by some seed
    swapped = batch_from([trajs[1], trajs[0], trajs[2]])
    for s in range(8):
        again = compute_advantages("scpo", swapped, scorer=TableScorer(), reference="random", seed=s)
        np.testing.assert_array_equal(again.diagnostics["scpo_match"][5:], runs[s].diagnostics["scpo_match"][5:])


# ------------------------------------------------------------------------------------------ revision 1 (returns)
def test_returns_mode_keeps_revision_1_bonus_by_hand():
    b = batch_from([(0, ["A", "B", "C"], True), (0, ["A", "X", "C", "D"], False)])
    res = compute_advantages("scpo", b, scorer=TableScorer(), mode="returns")
    # A matches j=0 (b = 5 * 1/3), X nothing, C matches j=2 (b = 5 * 2/3), D nothing
    np.testing.assert_allclose(res.diagnostics["scpo_bonus"], [0, 0, 0, 5 / 3, 0, 10 / 3, 0])
    shaped = discounted_returns(np.array([5 / 3, 0, 10 / 3, 0]), np.zeros(4, int), np.arange(4), 0.95)
    np.testing.assert_allclose(res.returns[3:], shaped)
    np.testing.assert_allclose(res.returns[:3], [9.025, 9.5, 10])
    # why revision 1 fails: the bonus leaks through discounting to X (no progress), and X's two-member anchor
    # {B of the success: 9.5, X: 0.95 * 10/3} normalises to -1/sqrt 2 whatever the bonus, as GiGPO's {9.5, 0} does
    gig = compute_advantages("gigpo", b)
    assert res.returns[4] == pytest.approx(0.95 * 10 / 3)
    np.testing.assert_allclose(res.diagnostics["step_adv"][4], gig.diagnostics["step_adv"][4], atol=1e-6)
    assert res.diagnostics["step_adv"][4] == pytest.approx(-1 / np.sqrt(2), abs=1e-6)
    half = compute_advantages("scpo", b, scorer=TableScorer(), mode="returns", kappa_r=0.25)
    np.testing.assert_allclose(half.diagnostics["scpo_bonus"], res.diagnostics["scpo_bonus"] / 2)


def test_shape_episode_only_with_returns_mode():
    with pytest.raises(ValueError, match="shape_episode"):
        SCPOOptions(shape_episode=True)
    b = batch_from([(0, ["A", "B"], True), (0, ["A", "D", "E"], False)])
    plain = compute_advantages("scpo", b, scorer=TableScorer(), mode="returns")
    shaped = compute_advantages("scpo", b, scorer=TableScorer(), mode="returns", shape_episode=True)
    np.testing.assert_array_equal(shaped.advantages[:2], plain.advantages[:2])
    assert np.all(shaped.diagnostics["episode_adv"][2:] > plain.diagnostics["episode_adv"][2:])


def test_success_reward_scales_the_returns_bonus():
    b = batch_from([(0, ["A", "B"], True), (0, ["A", "D"], False)])
    res = compute_advantages("scpo", b, scorer=TableScorer(), mode="returns", success_reward=4.0)
    np.testing.assert_allclose(res.diagnostics["scpo_bonus"], [0, 0, 0.5 * 4.0 * 1 / 2, 0])


# --------------------------------------------------------------------------------------------- properties
ALPHABET = ["go to desk 1", "open drawer 2", "take mug 1", "heat mug 1", "look", "go to fridge 1"]


@st.composite
def traj_lists(draw):
    trajs = []
    for g in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            actions = draw(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=6))
            trajs.append((g, actions, draw(st.booleans())))
    return trajs


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
LEX = make_scorer("lexical")


@SETTINGS
@given(traj_lists(), st.floats(0.3, 1.0), st.floats(0.0, 1.0), st.sampled_from(["argmax", "first"]))
def test_scpo_properties(trajs, tau, kappa, match):
    b = batch_from(trajs)
    res = compute_advantages("scpo", b, scorer=LEX, tau=tau, kappa=kappa, match=match)
    gig = compute_advantages("gigpo", b)
    credit, j = res.diagnostics["scpo_credit"], res.diagnostics["scpo_match"]
    won_any = (np.bincount(b.group_id, weights=b.won.astype(float)) > 0)[b.group_id]
    fail_any = (np.bincount(b.group_id, weights=(~b.won).astype(float)) > 0)[b.group_id]
    untouched = b.won | ~(won_any & fail_any) | (j < 0)
    # successes, unmixed groups and uncredited failed steps keep GiGPO's advantages exactly
    np.testing.assert_array_equal(res.advantages[untouched], gig.advantages[untouched])
    assert np.all(credit >= 0) and np.all(res.diagnostics["scpo_score"][j >= 0] >= tau)
    for t in np.unique(b.traj_id[~untouched]):
        m = j[b.traj_id == t]
        m = m[m >= 0]
        assert np.all(np.diff(m) > 0), f"matched positions {m} of trajectory {t} do not strictly increase"
    # a credited step's episode part never exceeds the reference's
    ref = res.diagnostics["scpo_ref_row"]
    hit = j >= 0
    ep_part = res.advantages - gig.diagnostics["step_adv"]
    assert np.all(ep_part[hit] <= gig.diagnostics["episode_adv"][ref[hit]] + 1e-9)


@SETTINGS
@given(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=6), st.data())
def test_replayed_reference_steps_are_credited_like_the_reference(reference, data):
    k = data.draw(st.integers(1, len(reference)))
    tail = data.draw(st.lists(st.sampled_from(["look", "inventory", "examine desk 1"]), max_size=4))
    longer = reference + data.draw(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=3))
    b = batch_from([(0, reference, True), (0, longer, True), (0, reference[:k] + tail, False)])
    res = compute_advantages("scpo", b, scorer=TableScorer())
    gig = compute_advantages("gigpo", b)
    failed = np.flatnonzero(~b.won)
    np.testing.assert_array_equal(res.diagnostics["scpo_match"][failed[:k]], np.arange(k))
    # exact replay, kappa 1: the episode part of each replayed step is the reference's episode advantage
    ep_ref = gig.diagnostics["episode_adv"][0]
    np.testing.assert_allclose((res.advantages - gig.diagnostics["step_adv"])[failed[:k]], ep_ref, rtol=1e-12)


# ------------------------------------------------------------------ the matching rule and every option, worked by hand
def loop_match(s, f_len, r_len, tau, match):
    """The spec's monotone matching, one instance at a time in plain loops (docs/algorithms.md, SCPO step 4)."""
    j_star, cred, best, adv = [], [], [], []
    f = -1
    for t in range(f_len):
        cand = list(range(f + 1, r_len))
        if not cand:
            j_star.append(-1), cred.append(0.0), best.append(0.0), adv.append(0)
            continue
        best.append(max(s[t][j] for j in cand))
        if match == "argmax":
            j = max(cand, key=lambda c: (s[t][c], -c))
            ok = s[t][j] >= tau
        else:
            hits = [c for c in cand if s[t][c] >= tau]
            ok, j = bool(hits), (hits[0] if hits else -1)
        if ok:
            j_star.append(j), cred.append(s[t][j]), adv.append(j - f)
            f = j
        else:
            j_star.append(-1), cred.append(0.0), adv.append(0)
    return j_star, cred, best, adv


@pytest.mark.parametrize("match", ["argmax", "first"])
def test_monotone_match_equals_the_loop_definition(match):
    rng = np.random.default_rng(7)
    for _ in range(30):
        n, t_f, t_r = 3, int(rng.integers(1, 6)), int(rng.integers(1, 6))
        s = np.round(rng.random((n, t_f, t_r)), 1)  # rounded: ties and scores equal to tau happen
        f_len, r_len = rng.integers(1, t_f + 1, n), rng.integers(1, t_r + 1, n)
        j, cr, best, adv = monotone_match(s, f_len, r_len, tau=0.7, match=match)
        for i in range(n):
            want = loop_match(s[i], f_len[i], r_len[i], 0.7, match)
            got = (
                j[i, : f_len[i]].tolist(),
                cr[i, : f_len[i]].tolist(),
                best[i, : f_len[i]].tolist(),
                adv[i, : f_len[i]].tolist(),
            )
            assert got == (want[0], want[1], want[2], want[3]), (s[i], f_len[i], r_len[i])


def test_first_match_through_compute_advantages():
    b = batch_from([(0, ["A", "B", "C"], True), (0, ["X"], False)])
    table = {("X -> after X", "A -> after A"): 0.8, ("X -> after X", "B -> after B"): 0.95}
    first = compute_advantages("scpo", b, scorer=TableScorer(table), match="first", tau=0.7)
    best = compute_advantages("scpo", b, scorer=TableScorer(table), tau=0.7)
    assert first.diagnostics["scpo_match"][3] == 0 and first.diagnostics["scpo_score"][3] == 0.8
    assert best.diagnostics["scpo_match"][3] == 1 and best.diagnostics["scpo_score"][3] == 0.95
    # first, with the only candidate exactly at tau: credited
    at_tau = compute_advantages(
        "scpo", b, scorer=TableScorer({("X -> after X", "C -> after C"): 0.7}), match="first", tau=0.7
    )
    assert at_tau.diagnostics["scpo_match"][3] == 2


def test_returns_bonus_by_hand():
    from scpo.credit.scpo import returns_bonus

    credited = np.array([[1.0, 0.0, 0.8], [0.9, 0.0, 0.0]])
    advance = np.array([[1, 0, 2], [3, 0, 0]])
    got = returns_bonus(credited, advance, np.array([4, 3]), kappa_r=0.5, r_success=8.0)
    # b = kappa_r R (j* - f) / T_ref s
    np.testing.assert_allclose(
        got, [[0.5 * 8 * 1 / 4 * 1, 0, 0.5 * 8 * 2 / 4 * 0.8], [0.5 * 8 * 3 / 3 * 0.9, 0, 0]], rtol=1e-12
    )


def test_random_reference_draw_is_pinned_to_seed_and_group_uid():
    from scpo.batch import stable_uid

    b = batch_from(
        [(0, ["A", "B"], True), (0, ["C", "D"], True), (0, ["E", "F", "G"], True), (0, ["A", "D", "G"], False)]
    )
    # successes sorted by (length, texts): AB, CD, EFG; the draw is rng([seed, int(sha1 uid of the group, 16)]).
    # The failure A D G matches A (row 0) against AB, D (row 3) against CD, G (row 6) against EFG.
    expected_ref_rows = [[0, -1, -1], [-1, 3, -1], [-1, -1, 6]]
    uid = int(stable_uid("scpo-ref", "task0", length=8), 16)
    drawn = set()
    for seed in range(12):
        k = int(np.random.default_rng([seed, uid]).integers(3))
        drawn.add(k)
        res = compute_advantages("scpo", b, scorer=TableScorer(), reference="random", seed=seed)
        assert res.diagnostics["scpo_ref_row"][7:].tolist() == expected_ref_rows[k], seed
    assert drawn == {0, 1, 2}


def test_shortest_reference_weights_failures_by_their_return_gap():
    # S1 = (A, B) and S2 = (C, D) tie on length; F1 (R = 0) replays A, F2 (R = 5, not a success) replays C.
    # Total credit: S1 gives F1 (10 - 0) / sigma, S2 gives F2 (10 - 5) / sigma: S1 is the reference.
    b = RolloutBatch.from_columns(
        group_id=[0] * 8,
        traj_id=[0, 0, 1, 1, 2, 2, 3, 3],
        step=[0, 1] * 4,
        reward=[0, 10, 0, 10, 0, 0, 0, 5],
        action=["A", "B", "C", "D", "A", "Q", "C", "Q"],
        observation=["start", "after A", "start", "after C", "start", "after A", "start", "after C"],
        next_observation=["after A", "after B", "after C", "after D", "after A", "after Q", "after C", "after Q"],
        won=[True] * 4 + [False] * 4,
        group_uid=["task0"] * 8,
    )
    res = compute_advantages("scpo", b, scorer=TableScorer(), scale="none")
    np.testing.assert_array_equal(res.diagnostics["scpo_ref_row"][4:], [0, -1, -1, -1])
    # the gap of F2 to S1 is 10 - 5
    np.testing.assert_allclose(res.diagnostics["scpo_gap"][4:], [10, 10, 5, 5])


def test_shape_episode_adds_the_bonuses_to_the_failures_episode_return():
    b = batch_from([(0, ["A", "B"], True), (0, ["A", "D"], False)])
    res = compute_advantages("scpo", b, scorer=TableScorer(), mode="returns", shape_episode=True)
    gig = compute_advantages("gigpo", b)
    # F's bonus: A matches j = 0: 0.5 * 10 * 1 / 2 = 2.5 -> F's episode return 2.5; W's rows keep GiGPO's values
    s = np.array([10, 10, 2.5, 2.5])
    ep = norm(s)
    np.testing.assert_allclose(res.diagnostics["episode_adv"][2:], ep[2:], rtol=1e-12)
    np.testing.assert_array_equal(res.diagnostics["episode_adv"][:2], gig.diagnostics["episode_adv"][:2])
    np.testing.assert_array_equal(res.diagnostics["step_adv"][:2], gig.diagnostics["step_adv"][:2])
    np.testing.assert_array_equal(res.diagnostics["anchor_group_size"], gig.diagnostics["anchor_group_size"])


def test_returns_mode_with_similarity_anchors_uses_the_scorer():
    b = batch_from([(0, ["A", "B"], True), (0, ["A", "D"], False)])
    table = {("start", "after A"): 0.0}
    res = compute_advantages(
        "scpo", b, scorer=TableScorer(table), mode="returns", enable_similarity=True, similarity_thresh=0.9
    )
    plain = compute_advantages("scpo", b, scorer=TableScorer(table), mode="returns")
    np.testing.assert_allclose(res.advantages, plain.advantages, rtol=1e-12)  # nothing merges: same anchors


def test_random_reference_with_a_single_success():
    b = batch_from([(0, ["A", "B"], True), (0, ["A", "C"], False)])
    for seed in range(3):
        res = compute_advantages("scpo", b, scorer=TableScorer(), reference="random", seed=seed)
        assert res.diagnostics["scpo_ref_row"][2:].tolist() == [0, -1]


def test_gigpos_anchors_inside_scpo_follow_gigpos_similarity_scorer():
    """SCPO's base is GiGPO as configured: its similarity anchors use credit.gigpo.similarity_scorer, and SCPO's own
    scorer only when that names the same scorer (without a model of its own)."""
    from scpo.credit import CreditConfig
    from scpo.credit.scpo import anchor_scorer

    b = batch_from([(0, ["A", "B"], True), (0, ["X", "D"], False)])  # observations "after A" and "after X": 0.857
    table = TableScorer({("after X", "after A"): 0.99})  # ... which this scorer merges
    sim = {"enable_similarity": True, "similarity_thresh": 0.9}
    merged = compute_advantages("gigpo", b, scorer=table, **sim).diagnostics["step_adv"]
    apart = compute_advantages("gigpo", b).diagnostics["step_adv"]
    assert not np.allclose(merged, apart)
    cases = [
        ({"similarity_scorer": "lexical"}, merged),
        ({}, apart),
        ({"scorer_model": "m", "similarity_scorer": "lexical"}, apart),
    ]
    for options, expected in cases:
        res = compute_advantages("scpo", b, scorer=table, **sim, **options)
        np.testing.assert_allclose(res.diagnostics["step_adv"], expected, rtol=1e-12, err_msg=str(options))
    cfg = CreditConfig()
    assert anchor_scorer(cfg, table) is None  # exact anchors need no scorer
    on = cfg.model_copy(update={"gigpo": cfg.gigpo.model_copy(update={"enable_similarity": True})})
    assert anchor_scorer(on, table).name == "difflib" and anchor_scorer(on, table) is anchor_scorer(on, None)
