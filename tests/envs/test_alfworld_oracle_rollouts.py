"""Rollout sources with oracle progress: the eps-noisy optimal policy, q labels of saved rollouts by replay, and the
optional oracle_progress column of RolloutBatch (files without it stay readable)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scpo.batch import RolloutBatch
from scpo.envs.alfworld import make_env
from scpo.envs.alfworld.oracle_rollouts import (
    PlannerPool,
    label_progress,
    noisy_optimal_rollouts,
)

TASKS = [
    "valid_unseen/pick_heat_then_place_in_recep-Apple-None-Fridge-10/trial_T20190906_182259_116320",
    "valid_unseen/pick_two_obj_and_place-CD-None-Safe-308/trial_T20190907_050942_897916",
]


@pytest.fixture(scope="module")
def pool(alfworld_data_root):
    return PlannerPool(alfworld_data_root.parent)


def _first(batch):
    return batch.step == 0


def test_eps_zero_is_optimal_every_step_is_progress(pool):
    b = noisy_optimal_rollouts(TASKS, [0], 0.0, group_size=2, data_root=pool.data_root, pool=pool, progress=False)
    assert b.won.all() and np.all(b.oracle_progress == 1.0)
    v0 = [pool.get(t).value(make_env(t, pool.data_root).engine) for t in TASKS]
    assert sorted(set(b.traj_len.tolist())) == sorted(set(v0))


def test_q_telescopes_and_groups_share_a_seed(pool):
    """sum_t q_t = V*(s_0) - V*(s_T) per trajectory (V*(s_T) = 0 when won); a seed reproduces its group; eps = 0.3 and
    0.6 make the same random draws, so every step eps = 0.3 took at random, eps = 0.6 took at random too."""
    a = noisy_optimal_rollouts(
        TASKS[:1], [5], 0.3, group_size=4, max_steps=20, data_root=pool.data_root, pool=pool, progress=False
    )
    again = noisy_optimal_rollouts(
        TASKS[:1], [5], 0.3, group_size=4, max_steps=20, data_root=pool.data_root, pool=pool, progress=False
    )
    assert list(a.action) == list(again.action) and len(set(a.group_uid)) == 1
    v0 = pool.get(TASKS[0]).value(make_env(TASKS[0], pool.data_root).engine)
    sums = np.bincount(a.traj_id, weights=a.oracle_progress)
    won = a.won[_first(a)]
    assert np.all(sums[won] == v0) and np.all(sums[~won] <= v0)
    assert (
        len(set(a.traj_uid)) == 4
        and len(set(map(tuple, np.split(a.action, np.flatnonzero(np.diff(a.traj_id)) + 1)))) > 1
    )


def test_label_progress_replays_saved_rollouts(pool, tmp_path):
    b = noisy_optimal_rollouts(
        TASKS, [1], 0.5, group_size=2, max_steps=12, data_root=pool.data_root, pool=pool, progress=False
    )
    path = b.select(np.ones(b.n_rows, bool)).to_parquet(tmp_path / "iter_0000.parquet")
    df = pd.read_parquet(path).drop(columns=["oracle_progress"])  # a file without the column
    df.to_parquet(path, index=False)
    old = RolloutBatch.read(path)
    assert old.oracle_progress is None
    labelled = label_progress(old, data_root=pool.data_root, pool=PlannerPool(pool.data_root), progress=False)
    np.testing.assert_array_equal(labelled.oracle_progress, b.oracle_progress)
    tampered = old.columns()
    tampered["next_observation"] = tampered["next_observation"].copy()
    tampered["next_observation"][1] = "You arrive at nowhere."
    with pytest.raises(ValueError, match="gave"):
        label_progress(RolloutBatch(**tampered), data_root=pool.data_root, pool=pool, progress=False)


def test_oracle_progress_column_round_trips(tmp_path):
    b = RolloutBatch.from_columns(
        group_id=[0, 0, 0], traj_id=[0, 0, 1], step=[0, 1, 0], reward=[0, 10, 0], oracle_progress=[1, 1, -1]
    )
    back = RolloutBatch.read(b.to_parquet(tmp_path / "x.parquet"))
    np.testing.assert_array_equal(back.oracle_progress, [1.0, 1.0, -1.0])
    assert back.select(np.array([True, False, True])).oracle_progress.tolist() == [1.0, -1.0]
    assert [s.oracle_progress for t in back.to_trajectories() for s in t.steps] == [1.0, 1.0, -1.0]
    assert RolloutBatch.from_columns(group_id=[0], traj_id=[0], step=[0], reward=[0]).oracle_progress is None
    with pytest.raises(ValueError, match="oracle_progress"):
        RolloutBatch.from_columns(group_id=[0, 0], traj_id=[0, 0], step=[0, 1], reward=[0, 0], oracle_progress=[1])
    trajs = back.to_trajectories()
    trajs[0].steps[0].oracle_progress = None
    with pytest.raises(ValueError, match="lack oracle_progress"):
        RolloutBatch.from_trajectories(trajs)


def test_noisy_optimal_steps_carry_the_prompt_a_policy_would_have_seen(pool):
    """Each step's prompt is the ALFWorld prompt built from the goal, the observation, the admissible commands and
    the last two steps, as the collector builds it."""
    from scpo.envs.alfworld import build_prompt, make_env

    batch = noisy_optimal_rollouts(
        TASKS[:1], [0], 0.3, group_size=2, max_steps=6, data_root=pool.data_root, pool=pool, progress=False
    )
    assert batch.has_prompts and not batch.has_tokens
    for rows in batch.trajectory_rows():
        env = make_env(str(batch.task_id[rows[0]]), pool.data_root, max_steps=100)
        obs, info = env.reset()
        history = []
        for t, r in enumerate(rows):
            assert obs == batch.observation[r]
            want = build_prompt(info["goal"], obs, list(info["admissible_commands"]), history, t, history_length=2)
            assert batch.prompt[r] == want
            history.append((obs, str(batch.action[r])))
            obs, _, _, info = env.step(str(batch.action[r]))


def test_hindsight_pooled_over_batches_and_workers_equals_scoring_each_row(pool):
    """hindsight_scores scores each distinct (prompt, final observation, action) once over all batches, with one or
    two worker processes; every row gets the value hindsight_logprob gives it scored alone."""
    from scpo.envs.prompting import action_answer
    from scpo.policy.hindsight import hindsight_logprob, hindsight_scores
    from scpo.policy.profiles import Policy
    from scpo.policy.tiny import build_tiny_model, train_tokenizer

    a = noisy_optimal_rollouts(
        TASKS[:1], [0], 0.2, group_size=3, max_steps=8, data_root=pool.data_root, pool=pool, progress=False
    )
    b = noisy_optimal_rollouts(
        TASKS[:1], [0], 0.5, group_size=3, max_steps=8, data_root=pool.data_root, pool=pool, progress=False
    )
    texts = [p + " " + act for x in (a, b) for p, act in zip(x.prompt, x.action)]
    tok = train_tokenizer(texts, vocab_size=400)
    policy = Policy(
        model=build_tiny_model(tok, hidden_size=16, layers=1, heads=2, seed=3).eval(), tokenizer=tok, profile="tiny"
    )
    one = hindsight_scores(policy, [a, b], progress=False)
    two = hindsight_scores(policy, [a, b], workers=2, progress=False)
    for x, got1, got2 in zip((a, b), one, two):
        answers = [
            tok(action_answer(act), add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for act in x.action
        ]
        cols = x.columns()
        cols.update(prompt_ids=[[]] * x.n_rows, response_ids=answers, candidate_ids=[None] * x.n_rows)
        with_answers = RolloutBatch(**cols)
        want = np.array(
            [
                hindsight_logprob(policy, with_answers.select(np.arange(x.n_rows) == r), max_prompt_tokens=1024)[0]
                for r in range(x.n_rows)
            ]
        )
        assert got1.shape == (x.n_rows,) and np.all(got1 < 0)
        np.testing.assert_allclose(got1, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got1, got2)
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        hindsight_scores(policy, [a], workers=0, progress=False)
