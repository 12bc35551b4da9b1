"""verl-agent's training batch as a rollout file (`scpo.importers.verl_agent`), on batches its trainer's code path makes
(tests/helpers/verl_agent_trainer.py: fields, dtypes, padding copies and reorder as verl-agent has them): the steps
in order, the copies found, and our GiGPO on the imported rollouts equal to verl-agent's GiGPO on the same rows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, compute_advantages
from scpo.importers.rollout_file import extra_column, import_record
from scpo.importers.verl_agent import VerlBatchError, action_of, write_rollouts

from helpers.verl_agent_trainer import gigpo_advantages, scripted_episodes, select, trainer_step

MODES = [("mean_std_norm", "std"), ("mean_norm", "none")]


def imported(step, tmp_path, **kwargs) -> tuple[RolloutBatch, np.ndarray, np.ndarray, object]:
    path = write_rollouts(step.batch, 7, tmp_path, tokenizer=step.tokenizer, env="alfworld", **kwargs)
    return RolloutBatch.read(path), extra_column(path, "verl_copies"), extra_column(path, "verl_row"), path


def batch_rows(step, verl_row: np.ndarray) -> np.ndarray:
    """The first row of the trainer's batch holding each collected row number."""
    row = step.batch.non_tensor_batch["scpo_row"]
    first = {}
    for i, r in enumerate(row):
        first.setdefault(int(r), i)
    return np.array([first[int(r)] for r in verl_row])


def gigpo(batch: RolloutBatch, scale: str, step_w: float = 1.0) -> np.ndarray:
    cfg = CreditConfig(norm={"scale": scale, "scale_by_env": {}}, gigpo={"step_advantage_w": step_w})
    return compute_advantages("gigpo", batch, cfg).advantages


@pytest.mark.parametrize("mode, scale", MODES)
def test_our_gigpo_on_the_imported_rollouts_equals_the_advantages_verl_agent_trained_with(tmp_path, mode, scale):
    # size_divisor 1: no padding copies, so the trained batch and the imported rollouts hold the same rows
    step = trainer_step(size_divisor=1, mode=mode, step_w=0.7, seed=3)
    rollouts, copies, _, _ = imported(step, tmp_path)
    assert rollouts.n_rows == step.rows_collected and copies.sum() == 0
    ours = gigpo(rollouts, scale, step_w=0.7)
    # against the float32 advantages verl-agent trained with (its returns and scores in float32 too) ...
    np.testing.assert_allclose(ours, rollouts.trained_advantage, rtol=1e-6, atol=1e-6)
    assert np.abs(ours).max() > 0.5  # the fixture has credit to compare
    # ... and, run in float64 end to end, to rounding
    exact = trainer_step(size_divisor=1, mode=mode, step_w=0.7, seed=3, dtype=torch.float64)
    rollouts64, _, verl_row, _ = imported(exact, tmp_path / "float64")
    np.testing.assert_allclose(
        gigpo(rollouts64, scale, step_w=0.7), exact.advantage64[batch_rows(exact, verl_row)], rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("mode, scale", MODES)
def test_padding_copies_are_dropped_and_counted_and_entered_verl_agents_statistics(tmp_path, mode, scale):
    step = trainer_step(size_divisor=32, mode=mode, seed=0, dtype=torch.float64)
    n_padded = len(step.batch.non_tensor_batch["uid"])
    rollouts, copies, verl_row, path = imported(step, tmp_path)
    assert n_padded % 32 == 0 and n_padded > step.rows_collected
    assert rollouts.n_rows == step.rows_collected and copies.sum() == n_padded - step.rows_collected
    assert import_record(path)["padding_copies"] == n_padded - step.rows_collected
    assert sorted(verl_row.tolist()) == list(range(step.rows_collected))
    rows = batch_rows(step, verl_row)
    # our GiGPO = verl-agent's GiGPO on the rows without their copies ...
    dedup = gigpo_advantages(select(step.batch, rows), epsilon=1e-6, step_w=1.0, remove_std=mode == "mean_norm")
    np.testing.assert_allclose(gigpo(rollouts, scale), dedup, rtol=0, atol=1e-12)
    # ... and the file's copy counts rebuild the batch verl-agent trained on: its GiGPO there is the trained column
    padded = select(step.batch, np.repeat(rows, 1 + copies))
    again = gigpo_advantages(padded, epsilon=1e-6, step_w=1.0, remove_std=mode == "mean_norm")
    first_of_each = np.r_[0, np.cumsum(1 + copies)[:-1]]
    np.testing.assert_allclose(again[first_of_each], rollouts.trained_advantage, rtol=1e-6, atol=1e-6)  # float32
    # the copies moved the group statistics: trained and recomputed advantages differ on this batch
    assert np.abs(rollouts.trained_advantage - dedup).max() > 0.01


def test_steps_come_back_in_order_with_their_texts_whatever_the_row_order(tmp_path):
    step = trainer_step(n_groups=3, group_n=5, max_steps=7, seed=11)
    rollouts, _, _, _ = imported(step, tmp_path)
    episodes = scripted_episodes(3, 5, 7, 11)
    assert rollouts.n_trajectories == len(episodes) and rollouts.n_groups == 3
    for k, rows in enumerate(rollouts.trajectory_rows()):
        e = episodes[k]  # trajectories in collection order: environment by environment
        assert list(rollouts.step[rows]) == list(range(len(e.obs)))
        assert list(rollouts.observation[rows]) == e.obs
        assert list(rollouts.next_observation[rows]) == [*e.obs[1:], ""]
        assert list(rollouts.reward[rows]) == e.rewards
        assert list(rollouts.valid[rows]) == e.valid
        assert list(rollouts.done[rows]) == [False] * (len(e.obs) - 1) + [True]
        assert set(rollouts.won[rows]) == {sum(e.rewards) > 0}
        assert list(rollouts.response[rows]) == e.answers  # special tokens (eos) skipped, as the env saw it
        assert list(rollouts.action[rows]) == [action_of(a) for a in e.answers]
        assert all(p.startswith("<|im_start|> user ") and o in p for p, o in zip(rollouts.prompt[rows], e.obs))
        assert len(set(rollouts.group_id[rows])) == 1 and rollouts.group_id[rows][0] == k // 5
    assert rollouts.env == "alfworld"


def test_an_unmarked_batch_is_refused_in_one_line(tmp_path):
    step = trainer_step(mark=False)
    with pytest.raises(VerlBatchError, match=r"call mark_rows\(batch\) before adjust_batch") as err:
        write_rollouts(step.batch, 1, tmp_path, tokenizer=step.tokenizer)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "rollouts").exists()


def test_won_from_a_field_the_trainer_keeps_and_one_that_disagrees_within_a_trajectory(tmp_path):
    step = trainer_step(seed=5)
    nt = step.batch.non_tensor_batch
    nt["won"] = np.array([not (r > 0) for r in nt["episode_rewards"]], dtype=object)  # the opposite of the default
    rollouts, _, _, _ = imported(step, tmp_path, won="won")
    assert np.array_equal(rollouts.won, ~(rollouts.episode_return > 0))
    nt["won"][np.flatnonzero(nt["scpo_row"] == 1)] = not nt["won"][np.flatnonzero(nt["scpo_row"] == 1)[0]]
    with pytest.raises(VerlBatchError, match="won differs within one trajectory"):
        imported(step, tmp_path / "again", won="won")


def test_without_a_tokenizer_the_texts_are_empty_and_the_record_keeps_the_algorithm(tmp_path):
    step = trainer_step(seed=2)
    config = SimpleNamespace(algorithm={"adv_estimator": "gigpo", "gamma": 0.95, "gigpo": {"mode": "mean_std_norm"}})
    path = write_rollouts(step.batch, 12, tmp_path, config=config, prompts=False)
    rollouts = RolloutBatch.read(path)
    assert path.name == "iter_0012.parquet" and rollouts.prompt is None
    assert set(rollouts.response) == {""} and set(rollouts.action) == {""}
    assert import_record(path)["algorithm"] == config.algorithm
    assert import_record(path)["iteration"] == 12


def test_action_of_takes_the_first_action_tags_else_the_answer():
    assert action_of("<think>x</think><action> go to desk 1 </action>") == "go to desk 1"
    assert action_of("<ACTION>open fridge 1</ACTION> <action>b</action>") == "open fridge 1"
    assert action_of("  look  ") == "look"
