"""GraphGPO against two groups worked by hand (shared observations, an unreachable state, an invalid step, a group
without success), its options, the state-description columns, and the per-environment gamma."""

from __future__ import annotations

import re

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, compute_advantages
from scpo.credit.graphgpo import hop_distances, path_returns

EPS = 1e-6


def norm(x):
    x = np.asarray(x, dtype=float)
    return (x - x.mean()) / (x.std(ddof=1) + EPS)


# group 0 (A):  a1 won    s0 -> s1 -> s2 -> (success)
#               a2 failed s0 -> s1 -> s3          (its second step invalid; s3 never reaches success)
#               a3 failed s0 -> s4 -> s2          (ends where a1 went on to win)
# group 1 (B):  b1 failed s0 -> s1 -> s2          (the same texts as group A, another graph)
#               b2 failed s0 -> s5                (its first step invalid)
TRAJS = [
    (0, ["s0", "s1", "s2"], ["s1", "s2", "end"], [0, 0, 10], [True, True, True]),
    (0, ["s0", "s1"], ["s1", "s3"], [0, 0], [True, False]),
    (0, ["s0", "s4"], ["s4", "s2"], [0, 0], [True, True]),
    (1, ["s0", "s1", "s2"], ["s1", "s2", "s9"], [0, 0, 0], [True, True, True]),
    (1, ["s0"], ["s5"], [0], [False]),
]


def batch(described: bool = False) -> RolloutBatch:
    cols = {k: [] for k in ("group_id", "traj_id", "step", "reward", "observation", "next_observation", "valid")}
    for t, (g, obs, nxt, rewards, valid) in enumerate(TRAJS):
        for i in range(len(obs)):
            cols["group_id"].append(g)
            cols["traj_id"].append(t)
            cols["step"].append(i)
            cols["reward"].append(rewards[i])
            cols["observation"].append("the room" if described else obs[i])
            cols["next_observation"].append("the room" if described else nxt[i])
            cols["valid"].append(valid[i])
    if described:  # the observations say nothing; the descriptions tell the states apart
        cols["state_description"] = [o for _, obs, _, _, _ in TRAJS for o in obs]
        cols["next_state_description"] = [n for _, _, nxt, _, _ in TRAJS for n in nxt]
    return RolloutBatch.from_columns(**cols)


# d in group A: success 0, s2 1, s1 2, s4 2, s0 3, s3 unreachable -> D_max + 1 = 4; group B has no success: all 1
D_NEXT = [2, 1, 0, 2, 4, 2, 1, 1, 1, 1, 1]
D_FROM = [3, 2, 1, 3, 2, 3, 2, 1, 1, 1, 1]
PEN = np.array([0, 0, 0, 0, 0.1, 0, 0, 0, 0, 0, 0.1])


def expected(gamma=0.1, scale="std", normalize_distance=False):
    exponent = np.array(D_NEXT, float) - (np.array(D_FROM, float) - 1 if normalize_distance else 0)
    returns = 10 * gamma**exponent
    step_score = returns - PEN
    n = (lambda x: norm(x)) if scale == "std" else (lambda x: np.asarray(x) - np.mean(x))
    step = np.zeros(11)
    # exact-state groups: A/s0 rows 0, 3, 5 ; A/s1 rows 1, 4 ; B/s0 rows 7, 10 ; every other state is a singleton
    for rows in ([0, 3, 5], [1, 4], [7, 10]):
        step[rows] = n(step_score[rows])
    episode = np.zeros(11)
    scores = np.array([10, 10, 10, 0, 0, 0, 0, 0, 0, 0, 0], float) - PEN
    episode[:7], episode[7:] = n(scores[:7]), n(scores[7:])
    return returns, step + episode


def test_graphgpo_by_hand():
    res = compute_advantages("graphgpo", batch())
    returns, adv = expected()
    np.testing.assert_array_equal(res.diagnostics["graph_distance"], D_NEXT)
    np.testing.assert_array_equal(res.diagnostics["graph_distance_from"], D_FROM)
    np.testing.assert_allclose(res.returns, returns, rtol=1e-12)
    np.testing.assert_allclose(res.advantages, adv, rtol=1e-12, atol=1e-12)
    # the spelled-out numbers of three rows: a2's invalid step into the dead end, a1's winning step, b2
    assert res.returns[4] == pytest.approx(10 * 0.1**4) and res.returns[2] == 10.0
    s1 = np.array([1.0, 10 * 0.1**4 - 0.1])
    assert res.diagnostics["step_adv"][4] == pytest.approx((s1[1] - s1.mean()) / (s1.std(ddof=1) + EPS))
    assert res.diagnostics["step_adv"][2] == 0.0  # s2 of group A: one step
    b_scores = np.array([0, 0, 0, -0.1])
    assert res.diagnostics["episode_adv"][10] == pytest.approx((-0.1 - b_scores.mean()) / (b_scores.std(ddof=1) + EPS))


def test_a_group_without_success_has_distance_one_and_only_the_penalty_moves_its_step_term():
    res = compute_advantages("graphgpo", batch())
    b = slice(7, 11)
    np.testing.assert_array_equal(res.diagnostics["graph_distance"][b], 1)
    np.testing.assert_allclose(res.returns[b], 1.0)  # 10 * 0.1^1 for every step
    a = 0.05 / (0.1 / np.sqrt(2) + EPS)  # steps of score 1.0 and 0.9 (b2's invalid one) from state s0
    np.testing.assert_allclose(res.diagnostics["step_adv"][[7, 10]], [a, -a], rtol=1e-12)
    np.testing.assert_array_equal(res.diagnostics["step_adv"][[8, 9]], 0.0)


def test_state_descriptions_replace_the_observations():
    plain, described = compute_advantages("graphgpo", batch()), compute_advantages("graphgpo", batch(described=True))
    np.testing.assert_array_equal(described.advantages, plain.advantages)
    # without the descriptions every state is "the room": one node, one anchor group per group
    flat = batch(described=True)
    flat.state_description = flat.next_state_description = None
    res = compute_advantages("graphgpo", flat)
    assert not np.allclose(res.advantages, plain.advantages)
    np.testing.assert_array_equal(res.diagnostics["anchor_group_size"], [7] * 7 + [4] * 4)


def test_one_description_column_without_the_other_is_an_error():
    b = batch(described=True)
    b.next_state_description = None
    with pytest.raises(ValueError, match="state_description / next_state_description without the other"):
        compute_advantages("graphgpo", b)


@pytest.mark.parametrize("gamma", [0.2, 0.5])
@pytest.mark.parametrize("scale", ["std", "none"])
def test_graphgpo_options(gamma, scale):
    res = compute_advantages("graphgpo", batch(), gamma=gamma, scale=scale)
    returns, adv = expected(gamma=gamma, scale=scale)
    np.testing.assert_allclose(res.returns, returns, rtol=1e-12)
    np.testing.assert_allclose(res.advantages, adv, rtol=1e-12, atol=1e-12)


def test_normalize_distance_uses_the_distance_gained():
    res = compute_advantages("graphgpo", batch(), normalize_distance=True)
    returns, adv = expected(normalize_distance=True)
    # a1: s0 (3) -> s1 (2): 10 gamma^0 ; a2's step into the dead end: s1 (2) -> s3 (4): 10 gamma^3
    assert res.returns[0] == pytest.approx(10.0) and res.returns[4] == pytest.approx(10 * 0.1**3)
    np.testing.assert_allclose(res.returns, returns, rtol=1e-12)
    np.testing.assert_allclose(res.advantages, adv, rtol=1e-12, atol=1e-12)


def test_weights_and_goal_value():
    res = compute_advantages("graphgpo", batch(), step_advantage_w=0.5, episode_advantage_w=0.0, goal_value=20.0)
    returns, _ = expected()
    np.testing.assert_allclose(res.returns, 2 * returns, rtol=1e-12)
    ref = compute_advantages("graphgpo", batch(), goal_value=20.0)
    np.testing.assert_allclose(res.advantages, 0.5 * ref.diagnostics["step_adv"], rtol=1e-12)


def test_a_one_row_group_keeps_its_episode_score():
    solo = RolloutBatch.from_columns(group_id=[0], traj_id=[0], step=[0], reward=[10.0], observation=["x"])
    res = compute_advantages("graphgpo", solo)
    assert res.diagnostics["episode_adv"][0] == pytest.approx(10 / (1 + EPS))
    assert res.diagnostics["step_adv"][0] == 0.0 and res.diagnostics["graph_distance"][0] == 0
    assert compute_advantages("graphgpo", solo, scale="none").advantages[0] == 10.0


def test_success_is_the_reward_sum_not_the_won_flag():
    b = batch()
    b.won[:] = False  # the won column says nothing; the reward sum of a1 is 10
    np.testing.assert_array_equal(compute_advantages("graphgpo", b).diagnostics["graph_distance"], D_NEXT)


def test_for_env_sets_the_recipes_gamma_and_keeps_std_on_webshop():
    cfg = CreditConfig()
    assert cfg.for_env("alfworld").graphgpo.gamma == 0.1 and cfg.for_env("webshop").graphgpo.gamma == 0.2
    assert cfg.for_env("corridor").graphgpo.gamma == cfg.graphgpo.gamma == 0.1
    web = cfg.for_env("webshop")
    assert web.norm.scale == "none" and web.graphgpo.scale == "std"  # GraphGPO's scripts: mean_std_norm everywhere
    res = compute_advantages("graphgpo", batch(), web)
    returns, adv = expected(gamma=0.2)
    np.testing.assert_allclose(res.returns, returns, rtol=1e-12)
    np.testing.assert_allclose(res.advantages, adv, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="gamma must be in"):
        CreditConfig.model_validate({"graphgpo": {"gamma_by_env": {"webshop": 1.5}}})


def test_hop_distances_on_a_chain_with_a_dead_end_and_a_cycle():
    # one group: 0 -> 1 -> 2 (goal), 3 -> 3 (a self-loop, unreachable), 4 -> 0
    state, nxt = np.array([0, 1, 3, 4]), np.array([1, 2, 3, 0])
    d_state, d_next = hop_distances(state, nxt, np.array([2]), np.zeros(4, dtype=np.int64))
    np.testing.assert_array_equal(d_state, [2, 1, 4, 3])  # d = [2, 1, 0, 4, 3] per node
    np.testing.assert_array_equal(d_next, [1, 0, 4, 2])
    np.testing.assert_allclose(
        path_returns(d_state, d_next, gamma=0.5, goal_value=10, normalize_distance=False),
        [5.0, 10.0, 10 * 0.5**4, 2.5],
    )


def test_similarity_merges_graph_nodes_in_order_of_appearance():
    """The one order-dependent option (as the recipe's canonicaliser): X ~ Y and Y ~ Z, but not X ~ Z. Met first, X
    founds a node that Y joins and Z does not; met first, Z founds the node Y joins."""
    x = "You are at the countertop 1 and you see a mug 1, a plate 2 and a fork 3."
    y = "You are at the countertop 1 and you see a mug 1, a plate 2 and a knife 3."
    z = "You are at the countertop 1 and you see a cup 1, a plate 2 and a knife 3."
    from difflib import SequenceMatcher

    ratio = lambda a, b: SequenceMatcher(None, a, b).ratio()  # noqa: E731
    assert min(ratio(y, x), ratio(x, y), ratio(y, z), ratio(z, y)) >= 0.94 and max(ratio(x, z), ratio(z, x)) < 0.94

    def group(first, second):
        # trajectory 1: first -> goal (won) ; trajectory 2: second -> y -> dead end
        return RolloutBatch.from_columns(
            group_id=[0, 0, 0],
            traj_id=[0, 1, 1],
            step=[0, 0, 1],
            reward=[10.0, 0, 0],
            observation=[first, second, y],
            next_observation=["won", y, "dead end"],
        )

    a = compute_advantages("graphgpo", group(x, z), enable_similarity=True, similarity_thresh=0.94)
    b = compute_advantages("graphgpo", group(z, x), enable_similarity=True, similarity_thresh=0.94)
    # x first: {x, y} one node at d 1, z its own node at d 2; z first: {z, y} at d 1, x at d 2
    np.testing.assert_array_equal(a.diagnostics["graph_distance_from"], [1, 2, 1])
    np.testing.assert_array_equal(b.diagnostics["graph_distance_from"], [1, 2, 1])
    swapped = RolloutBatch.from_columns(
        group_id=[0, 0, 0],
        traj_id=[0, 0, 1],
        step=[0, 1, 0],
        reward=[0, 0, 10.0],
        observation=[z, y, x],
        next_observation=[y, "dead end", "won"],
    )  # group(x, z) with its trajectories in the other order: z is met first now
    c = compute_advantages("graphgpo", swapped, enable_similarity=True, similarity_thresh=0.94)
    back = [2, 0, 1]  # rows of `swapped` in group(x, z)'s order
    assert not np.allclose(c.diagnostics["graph_distance_from"][back], a.diagnostics["graph_distance_from"])
    exact = compute_advantages("graphgpo", swapped)
    np.testing.assert_array_equal(
        exact.advantages[back], compute_advantages("graphgpo", group(x, z)).advantages
    )  # exact nodes: the order does not matter


def test_errors_stats_and_name():
    b = batch(described=True)
    b.next_state_description = None
    message = (
        "the batch has one of state_description / next_state_description without the other: GraphGPO needs both or "
        "neither (then it uses observation / next_observation)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        compute_advantages("graphgpo", b)
    res = compute_advantages("graphgpo", batch())
    assert res.method == "graphgpo"
    assert res.stats["frac_singleton_anchor_steps"] == pytest.approx(4 / 11)  # A/s2, A/s4, B/s1, B/s2
    assert res.stats["mean_graph_distance"] == pytest.approx(np.mean(D_NEXT))
    assert res.stats["frac_mixed_groups"] == 0.5 and res.stats["frac_all_failed_groups"] == 0.5


def test_a_partial_reward_is_a_success():
    """The recipe's test is the reward sum > 0, so a trajectory whose rewards sum to 0.5 reaches the goal node."""
    b = RolloutBatch.from_columns(
        group_id=[0, 0], traj_id=[0, 1], step=[0, 0], reward=[0.5, 0.0], observation=["a", "a"]
    )
    res = compute_advantages("graphgpo", b)
    np.testing.assert_array_equal(res.diagnostics["graph_distance"], [0, 2])  # "a" reaches success in one hop
    np.testing.assert_allclose(res.returns, [10.0, 10 * 0.1**2])
    assert res.stats["frac_singleton_anchor_steps"] == 0.0  # both steps act on "a"


def test_nodes_are_exact_texts_unless_similarity_is_on():
    long = "You arrive at countertop 1. On the countertop 1, you see a mug 1, a plate 2, a fork 3 and a spoon "
    a, b = long + "4.", long + "5."
    from difflib import SequenceMatcher

    assert SequenceMatcher(None, b, a).ratio() >= 0.95
    trajs = RolloutBatch.from_columns(
        group_id=[0, 0], traj_id=[0, 1], step=[0, 0], reward=[10.0, 0.0], observation=[a, b], next_observation=["", a]
    )
    # exact: b -> a, a -> success: d(b) = 2 ; merged: {a, b} one node at d = 1
    np.testing.assert_array_equal(compute_advantages("graphgpo", trajs).diagnostics["graph_distance_from"], [1, 2])
    merged = compute_advantages("graphgpo", trajs, enable_similarity=True).diagnostics["graph_distance_from"]
    np.testing.assert_array_equal(merged, [1, 1])


def test_epsilon_enters_both_terms():
    eps = 0.1
    res = compute_advantages("graphgpo", batch(), epsilon=eps)
    returns = expected()[0]
    step_score = returns - PEN

    def n(x):
        x = np.asarray(x, dtype=float)
        return (x - x.mean()) / (x.std(ddof=1) + eps)

    step = np.zeros(11)
    for rows in ([0, 3, 5], [1, 4], [7, 10]):
        step[rows] = n(step_score[rows])
    scores = np.array([10, 10, 10, 0, 0, 0, 0, 0, 0, 0, 0], float) - PEN
    np.testing.assert_allclose(res.advantages, step + np.r_[n(scores[:7]), n(scores[7:])], rtol=1e-12, atol=1e-12)
    solo = RolloutBatch.from_columns(group_id=[0], traj_id=[0], step=[0], reward=[10.0], observation=["x"])
    assert compute_advantages("graphgpo", solo, epsilon=eps).advantages[0] == pytest.approx(10 / (1 + eps))
