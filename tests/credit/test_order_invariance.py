"""Every estimator is invariant to the order of trajectories in the batch (within and across groups): a hypothesis
property over random batches with shared observations, mixed / all-failed / all-won groups and invalid steps."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scpo.batch import RolloutBatch
from scpo.credit import available_methods, compute_advantages

ROOMS = ["kitchen", "desk 1", "drawer 2", "fridge 1", "sink 1"]


@st.composite
def trajectories(draw):
    """(group, [(observation, action, next_observation)], won, [valid]) per trajectory."""
    out = []
    for g in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 5))):
            rooms = draw(st.lists(st.sampled_from(ROOMS), min_size=2, max_size=6))
            steps = [(f"g{g} at {a}", f"go to {b}", f"g{g} at {b}") for a, b in zip(rooms[:-1], rooms[1:])]
            valid = draw(st.lists(st.booleans(), min_size=len(steps), max_size=len(steps)))
            out.append((g, steps, draw(st.booleans()), [v or i % 3 for i, v in enumerate(valid)]))
    return out


def to_batch(trajs, order) -> RolloutBatch:
    cols = {
        k: []
        for k in (
            "group_id",
            "traj_id",
            "step",
            "reward",
            "observation",
            "action",
            "next_observation",
            "valid",
            "won",
            "group_uid",
            "oracle_progress",
            "policy_value",
            "exact_value",
            "critic_value",
        )
    }
    for new_id, i in enumerate(order):
        g, steps, won, valid = trajs[i]
        for t, (o, a, n) in enumerate(steps):
            cols["group_id"].append(g)
            cols["traj_id"].append(new_id)
            cols["step"].append(t)
            cols["reward"].append(10.0 if won and t == len(steps) - 1 else 0.0)
            cols["observation"].append(o)
            cols["action"].append(a)
            cols["next_observation"].append(n)
            cols["valid"].append(bool(valid[t]))
            cols["won"].append(won)
            cols["group_uid"].append(f"task{g}")
            cols["oracle_progress"].append(1.0 if a.endswith(("sink 1", "fridge 1")) else 0.0)  # a step's own content
            cols["policy_value"].append(float(len(o) % 11))  # a function of the state acted on
            cols["exact_value"].append(len(o) % 11 / 10)  # a probability, a function of the state acted on
            cols["critic_value"].append(float(len(o) % 7) - 3.0)  # a critic's value of the state acted on
    return RolloutBatch.from_columns(**cols)


def rows_of(trajs, order) -> list[np.ndarray]:
    """Per original trajectory, its rows in the batch built with `order`."""
    lengths = [len(trajs[i][1]) for i in order]
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    where = {i: np.arange(s, s + n) for i, s, n in zip(order, starts, lengths)}
    return [where[i] for i in range(len(trajs))]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(trajectories(), st.randoms(use_true_random=False), st.sampled_from(["std", "none"]))
def test_every_estimator_is_invariant_to_trajectory_order(trajs, rnd, scale):
    order = list(range(len(trajs)))
    shuffled = order[:]
    rnd.shuffle(shuffled)
    a, b = to_batch(trajs, order), to_batch(trajs, shuffled)
    ra, rb = rows_of(trajs, order), rows_of(trajs, shuffled)
    back = np.concatenate(rb)  # rows of b in a's row order
    lp = np.log(np.linspace(0.1, 0.9, a.n_rows))  # a per-row hindsight score for HCAPO, moved with its row
    duplicates = len({(t[0], tuple(t[1]), t[2], tuple(t[3])) for t in trajs}) < len(trajs)
    for method in available_methods():
        if method == "ppo" and a.n_rows < 2:  # whitening needs two entries (verl's unbiased variance)
            continue
        opts = {"whiten": "steps"} if method == "ppo" else {}  # these batches carry no answer tokens
        extra = {"hindsight_logprob": lp[np.argsort(back)]} if method == "hcapo" else {}
        own = {"hindsight_logprob": lp} if method == "hcapo" else {}
        res_a = compute_advantages(method, a, scale=scale, **own, **opts)
        res_b = compute_advantages(method, b, scale=scale, **extra, **opts)
        if method == "shuffled" and duplicates:  # identical trajectories of a group may exchange their values
            for g in np.unique(a.group_id):
                np.testing.assert_allclose(
                    np.sort(res_b.advantages[b.group_id == g]), np.sort(res_a.advantages[a.group_id == g]), atol=1e-9
                )
            continue
        np.testing.assert_allclose(
            res_b.advantages[back],
            res_a.advantages[np.concatenate(ra)],
            rtol=0,
            atol=1e-9,
            err_msg=f"{method} depends on the order of trajectories",
        )


OPTIONS = [
    ("graphgpo", {"normalize_distance": True}),
    ("graphgpo", {"gamma": 0.5, "episode_advantage_w": 0.0}),
    ("rloo", {"baseline_over": "trajectories"}),
    ("hgpo", {"version": "verl_agent", "base_group": True}),
    ("hgpo", {"version": "verl_agent", "alpha": 2.0, "history_length": 3}),
]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(trajectories(), st.randoms(use_true_random=False), st.booleans())
def test_field_methods_options_are_invariant_to_trajectory_order(trajs, rnd, described):
    """The options of GraphGPO, RLOO and the recipe's HGPO, and GraphGPO on state descriptions (a function of the
    step's own content, as an environment's are), do not depend on the order of trajectories either."""
    order = list(range(len(trajs)))
    shuffled = order[:]
    rnd.shuffle(shuffled)
    a, b = to_batch(trajs, order), to_batch(trajs, shuffled)
    if described:
        for batch in (a, b):
            batch.state_description = np.array([f"{o} | {x}" for o, x in zip(batch.observation, batch.action)], object)
            batch.next_state_description = np.array([f"{o} | next" for o in batch.next_observation], object)
    back = np.concatenate(rows_of(trajs, shuffled))
    ra = np.concatenate(rows_of(trajs, order))
    for method, options in OPTIONS:
        res_a, res_b = compute_advantages(method, a, **options), compute_advantages(method, b, **options)
        np.testing.assert_allclose(
            res_b.advantages[back], res_a.advantages[ra], rtol=0, atol=1e-9, err_msg=f"{method} {options}"
        )
