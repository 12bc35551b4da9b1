"""The rollout file written with pyarrow alone (`scpo.importers.rollout_file`) reads back as `RolloutBatch.to_parquet`'s
does, every column and dtype, the policy's ragged columns included; its extra columns and record read back too."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.batch import RolloutBatch
from scpo.credit.synthetic import synthetic_batch
from scpo.importers.rollout_file import extra_column, import_record, iteration_file, write_rollout_file


def full_batch() -> RolloutBatch:
    b = synthetic_batch(n_groups=2, group_size=3, max_steps=4, seed=7)
    n = b.n_rows
    rng = np.random.default_rng(0)
    return RolloutBatch(
        **b.columns(),
        oracle_progress=rng.normal(size=n),
        state_description=[f"state {i}" for i in range(n)],
        next_state_description=[f"next {i}" for i in range(n)],
        trained_advantage=np.where(np.arange(n) == 3, np.nan, rng.normal(size=n)),
        prompt=[f"prompt {i}" for i in range(n)],
        prompt_ids=[[1, 2, i] for i in range(n)],
        response_ids=[[i] * (i % 3) for i in range(n)],
        candidate_ids=[None if i % 2 else [[1, 2], [3]] for i in range(n)],
        choice_logprob=[None if i % 2 else -0.5 * i for i in range(n)],
        sampler_logprobs=[[-0.1] * (i % 3) for i in range(n)],
    )


def test_the_file_reads_back_as_to_parquets_does(tmp_path):
    batch = full_batch()
    ours = RolloutBatch.read(write_rollout_file(batch, tmp_path / "a.parquet"))
    theirs = RolloutBatch.read(batch.to_parquet(tmp_path / "b.parquet"))
    assert set(ours.columns()) == set(theirs.columns()) == set(batch.columns())
    for name, col in theirs.columns().items():
        mine = ours.columns()[name]
        assert mine.dtype == col.dtype, name
        if col.dtype == object:
            assert mine.tolist() == col.tolist(), name
        else:
            np.testing.assert_array_equal(mine, col, err_msg=name)
    assert np.isnan(ours.trained_advantage[3]) and ours.candidate_ids[1] is None and ours.choice_logprob[1] is None


def test_extra_columns_and_the_record_read_back_and_never_shadow_a_column(tmp_path):
    batch = synthetic_batch(n_groups=2, group_size=2, max_steps=3, seed=1)
    path = write_rollout_file(
        batch,
        iteration_file(tmp_path, 12),
        extra={"verl_copies": np.arange(batch.n_rows)},
        record={"source": "x", "iteration": 12},
    )
    assert path == tmp_path / "rollouts" / "iter_0012.parquet" and not path.with_name(path.name + ".tmp").exists()
    np.testing.assert_array_equal(extra_column(path, "verl_copies"), np.arange(batch.n_rows))
    assert extra_column(path, "absent") is None
    assert import_record(path) == {"iteration": 12, "source": "x"}
    assert import_record(write_rollout_file(batch, tmp_path / "plain.parquet")) is None
    with pytest.raises(ValueError, match="'reward' is a RolloutBatch column"):
        write_rollout_file(batch, tmp_path / "c.parquet", extra={"reward": np.zeros(batch.n_rows)})
    with pytest.raises(ValueError, match="has 2 rows"):
        write_rollout_file(batch, tmp_path / "d.parquet", extra={"x": np.zeros(2)})


def test_the_trained_advantage_survives_trajectories_and_jsonl(tmp_path):
    batch = synthetic_batch(n_groups=2, group_size=2, max_steps=3, seed=2)
    batch = batch.with_column("trained_advantage", np.linspace(-1, 1, batch.n_rows))
    again = RolloutBatch.from_trajectories(batch.to_trajectories())
    np.testing.assert_array_equal(again.trained_advantage, batch.trained_advantage)
    from_jsonl = RolloutBatch.read(batch.to_jsonl(tmp_path / "b.jsonl"))  # pandas' JSON reader: last-digit rounding
    np.testing.assert_allclose(from_jsonl.trained_advantage, batch.trained_advantage, rtol=1e-14, atol=1e-15)
