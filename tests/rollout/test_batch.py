"""The rollout data model: deterministic ids, columnar layout, file round trips."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch, Step, Trajectory, rows_by_trajectory, stable_uid


def _traj(task: str, seed: int, index: int, rewards: list[float], valid: list[bool] | None = None) -> Trajectory:
    valid = valid or [True] * len(rewards)
    steps = [
        Step(
            observation=f"{task} obs {t}",
            action=f"act {t}",
            reward=r,
            next_observation=f"{task} obs {t + 1}",
            valid=v,
            done=t == len(rewards) - 1,
            response=f"<action>act {t}</action>",
        )
        for t, (r, v) in enumerate(zip(rewards, valid))
    ]
    return Trajectory(
        task_id=task,
        seed=seed,
        index=index,
        steps=steps,
        won=sum(rewards) > 0,
        task_score=1.0 if sum(rewards) > 0 else 0.0,
        task_type="pick",
        env_name="alfworld",
    )


def test_ids_are_deterministic_and_distinguish_groups():
    a, b = _traj("t1", 0, 0, [0, 10]), _traj("t1", 0, 0, [0, 10])
    assert a.group_uid == b.group_uid and a.traj_uid == b.traj_uid
    assert _traj("t1", 1, 0, [0]).group_uid != a.group_uid
    assert _traj("t1", 0, 1, [0]).traj_uid != a.traj_uid
    assert stable_uid("x", 1) == stable_uid("x", 1) != stable_uid("x", 2)


def test_from_trajectories_is_columnar_and_row_aligned():
    trajs = [_traj("t1", 0, 0, [0, 0, 10]), _traj("t1", 0, 1, [0, 0]), _traj("t2", 0, 0, [0])]
    b = RolloutBatch.from_trajectories(trajs)
    assert b.n_rows == 6 and b.n_groups == 2 and b.n_trajectories == 3
    np.testing.assert_array_equal(b.group_id, [0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(b.traj_id, [0, 0, 0, 1, 1, 2])
    np.testing.assert_array_equal(b.step, [0, 1, 2, 0, 1, 0])
    np.testing.assert_array_equal(b.traj_len, [3, 3, 3, 2, 2, 1])
    np.testing.assert_array_equal(b.episode_return, [10, 10, 10, 0, 0, 0])
    np.testing.assert_array_equal(b.won, [True] * 3 + [False] * 3)
    assert b.observation[4] == "t1 obs 1" and b.next_observation[4] == "t1 obs 2"


def test_empty_trajectory_and_ragged_columns_are_rejected():
    with pytest.raises(ValueError, match="has no steps"):
        RolloutBatch.from_trajectories([Trajectory("t", 0, 0, [])])
    with pytest.raises(ValueError, match="column 'reward' has 1 rows, expected 2"):
        b = RolloutBatch.from_columns(group_id=[0, 0], traj_id=[0, 0], step=[0, 1], reward=[0, 1])
        RolloutBatch(**{**b.columns(), "reward": np.zeros(1)})


def test_from_columns_derives_returns_lengths_and_done():
    b = RolloutBatch.from_columns(group_id=[0, 0, 0], traj_id=[0, 0, 1], step=[0, 1, 0], reward=[1.0, 2.0, 0.0])
    np.testing.assert_array_equal(b.episode_return, [3.0, 3.0, 0.0])
    np.testing.assert_array_equal(b.traj_len, [2, 2, 1])
    np.testing.assert_array_equal(b.done, [False, True, True])
    with pytest.raises(ValueError, match="unknown RolloutBatch columns"):
        RolloutBatch.from_columns(group_id=[0], traj_id=[0], step=[0], reward=[0], rewrad=[0])


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_file_round_trip_keeps_every_column(tmp_path, suffix):
    trajs = [_traj("t1", 3, 0, [0, 10], valid=[False, True]), _traj("t1", 3, 1, [0, 0, 0])]
    b = RolloutBatch.from_trajectories(trajs)
    path = b.to_parquet(tmp_path / f"r{suffix}") if suffix == ".parquet" else b.to_jsonl(tmp_path / f"r{suffix}")
    back = RolloutBatch.read(path)
    for name, col in b.columns().items():
        np.testing.assert_array_equal(getattr(back, name), col, err_msg=name)
        assert getattr(back, name).dtype == col.dtype, name
    again = back.to_trajectories()
    assert [len(t) for t in again] == [2, 3] and [t.index for t in again] == [0, 1]
    assert again[0].steps[0].valid is False and again[0].traj_uid == trajs[0].traj_uid


def test_read_rejects_unknown_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no rollout file"):
        RolloutBatch.read(tmp_path / "missing.parquet")
    (tmp_path / "x.csv").write_text("a\n")
    with pytest.raises(ValueError, match="unknown rollout file type '.csv'"):
        RolloutBatch.read(tmp_path / "x.csv")


def test_with_column_sets_an_optional_column_that_files_keep(tmp_path):
    batch = RolloutBatch.from_trajectories([_traj("t", 0, 0, [0.0, 10.0])])
    labelled = batch.with_column("policy_value", [5, 10])
    assert batch.policy_value is None  # a copy: the batch itself is unchanged
    assert labelled.policy_value.dtype == np.float64 and labelled.policy_value.tolist() == [5.0, 10.0]
    again = RolloutBatch.read(labelled.to_parquet(tmp_path / "b.parquet"))
    assert again.policy_value.tolist() == [5.0, 10.0]
    assert [s.policy_value for t in again.to_trajectories() for s in t.steps] == [5.0, 10.0]
    with pytest.raises(ValueError, match="'reward' is not an optional column; those are oracle_progress, policy_value"):
        batch.with_column("reward", [0, 0])


def test_rows_by_trajectory_groups_rows_in_step_order():
    # rows of trajectories 7 and 3, shuffled: 3 has steps 0, 1 at rows 4, 1; 7 has steps 0, 1, 2 at rows 2, 0, 3
    traj_id = np.array([7, 3, 7, 7, 3])
    step = np.array([1, 1, 0, 2, 0])
    got = rows_by_trajectory(traj_id, step)
    assert [r.tolist() for r in got] == [[4, 1], [2, 0, 3]]
    assert rows_by_trajectory(np.array([], dtype=int), np.array([], dtype=int)) == []


def test_trajectory_rows_follow_the_batch_and_round_trip():
    batch = RolloutBatch.from_trajectories([_traj("a", 0, 1, [0.0, 0.0, 1.0]), _traj("a", 0, 0, [0.0, 0.0])])
    rows = batch.trajectory_rows()
    assert sorted(np.concatenate(rows).tolist()) == list(range(batch.n_rows))  # every row once
    assert np.all(np.diff([batch.traj_id[r[0]] for r in rows]) > 0)
    for r in rows:
        assert len(set(batch.traj_id[r])) == 1 and batch.step[r].tolist() == list(range(len(r)))
    assert sorted(len(t.steps) for t in batch.to_trajectories()) == [2, 3]
