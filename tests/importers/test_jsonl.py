"""The steps JSONL importer (`scpo.importers.jsonl`): our rollouts through the plain schema come back with the same
credit from every estimator; every missing or malformed field is one line naming the file, the line and the field."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from scpo.credit import estimate, unmet_need
from scpo.credit.registry import method_spec
from scpo.credit.synthetic import synthetic_batch
from scpo.importers.jsonl import JsonlFormatError, read_iterations, steps_to_jsonl


def step(**fields) -> dict:
    base = {
        "group": "g",
        "trajectory": 0,
        "step": 0,
        "observation": "you are in the hall",
        "action": "go to desk 1",
        "reward": 0.0,
        "done": False,
        "won": False,
    }
    return {**base, **fields}


def write(path, rows) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def rollout_methods(batch) -> list[str]:
    from scpo.credit import available_methods

    return [m for m in available_methods() if unmet_need(m, batch) is None and not method_spec(m).policy_scores]


def test_our_rollouts_through_the_schema_get_the_same_credit_from_every_estimator(tmp_path):
    batch = synthetic_batch(n_groups=5, group_size=4, max_steps=9, n_states=6, seed=4)
    batch = batch.with_column("trained_advantage", np.linspace(-2, 2, batch.n_rows))
    with (tmp_path / "steps.jsonl").open("w") as fh:
        steps_to_jsonl(batch, fh, iteration=3)
    ((it, back),) = list(read_iterations(tmp_path / "steps.jsonl"))
    assert it == 3 and back.n_rows == batch.n_rows
    for col in ("group_id", "traj_id", "step", "reward", "won", "done", "valid", "observation", "action"):
        assert np.array_equal(getattr(back, col), getattr(batch, col)), col
    assert np.array_equal(back.next_observation, batch.next_observation)
    np.testing.assert_array_equal(back.trained_advantage, batch.trained_advantage)
    methods = rollout_methods(batch)
    assert {"grpo", "gigpo", "scpo", "g2po", "hgpo", "rloo", "graphgpo"} <= set(methods)
    ours, theirs = estimate(batch, methods, None), estimate(back, methods, None)
    for m in methods:
        np.testing.assert_array_equal(theirs[m].advantages, ours[m].advantages, err_msg=m)


def test_lines_in_any_order_and_the_optional_fields_defaulted(tmp_path):
    rows = [
        step(trajectory="a", step=1, observation="s1", reward=10.0, done=True, won=True),
        step(trajectory="b", step=0, observation="s0", valid=False),
        step(trajectory="a", step=0, observation="s0", won=True),
        step(trajectory="b", step=1, observation="s2"),
    ]
    write(tmp_path / "s.jsonl", rows)
    ((_, b),) = list(read_iterations(tmp_path / "s.jsonl"))
    assert list(b.traj_uid) == ["g/a", "g/a", "g/b", "g/b"] and list(b.step) == [0, 1, 0, 1]
    assert list(b.next_observation) == ["s1", "", "s2", ""]  # the next step's observation, "" after the last
    assert list(b.valid) == [True, True, False, True] and list(b.episode_return) == [10, 10, 0, 0]
    assert b.trained_advantage is None and b.prompt is None


def test_iterations_stream_one_at_a_time(tmp_path):
    batch = synthetic_batch(n_groups=2, group_size=3, max_steps=4, seed=1)
    with (tmp_path / "s.jsonl").open("w") as fh:
        steps_to_jsonl(batch, fh, iteration=0)
        steps_to_jsonl(batch, fh, iteration=1)
        fh.write("{broken\n")
    seen = []
    with pytest.raises(JsonlFormatError, match="not JSON"):
        for it, b in read_iterations(tmp_path / "s.jsonl"):
            seen.append((it, b.n_rows))
    assert seen == [(0, batch.n_rows)]  # iteration 0 was handed on before iteration 1's end was read


# each case: one file with one problem, the line it is on, and the words that name it
MALFORMED = {
    "not_json": (['{"group": "g", "trajectory": 0,'], 1, "not JSON"),
    "not_an_object": (["[1, 2, 3]"], 1, "expected a JSON object of step fields, got a list"),
    "missing_won": ([{k: v for k, v in step().items() if k != "won"}], 1, "missing field 'won'"),
    "reward_is_text": ([step(reward="ten")], 1, "field 'reward' is \"ten\" (a string); expected a finite number"),
    "reward_is_nan": (
        ['{"group":"g","trajectory":0,"step":0,"observation":"o","action":"a","reward":NaN,"done":false,"won":false}'],
        1,
        "field 'reward' is NaN (a number); expected a finite number",
    ),
    "negative_step": ([step(step=-1)], 1, "field 'step' is -1 (a number); expected an integer >= 0"),
    "done_is_yes": ([step(done="yes")], 1, "field 'done' is \"yes\" (a string); expected true or false"),
    "group_is_null": ([step(group=None)], 1, "field 'group' is null; expected a string or an integer"),
    "observation_is_a_list": ([step(observation=["a"])], 1, "field 'observation' is [\"a\"] (a list)"),
    "typo_in_a_name": ([{**step(), "rewrd": 1}], 1, "unknown field 'rewrd'; did you mean 'reward'?"),
    "step_twice": ([step(), step(step=1), step(step=1, done=True)], 3, "field 'step' is 1 again for trajectory 0"),
    "step_missing": ([step(), step(step=2, done=True)], 2, "has no step 1"),
    "won_disagrees": ([step(), step(step=1, won=True)], 2, "field 'won' is true, but false on line 1"),
    "done_too_early": ([step(done=True), step(step=1)], 1, "field 'done' is true on step 0"),
    "advantage_on_some_lines": ([step(advantage=0.5), step(trajectory=1)], 2, "missing field 'advantage'"),
    "iteration_again": (
        [step(iteration=0), step(iteration=1), step(iteration=0, trajectory=2)],
        3,
        "field 'iteration' is 0 again",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_file_is_one_line_naming_the_file_the_line_and_the_field(tmp_path, case):
    rows, line, words = MALFORMED[case]
    path = tmp_path / f"{case}.jsonl"
    write(path, rows)
    with pytest.raises(JsonlFormatError) as err:
        list(read_iterations(path))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}, line {line}: "), message
    assert words in message, message


def test_an_empty_file_and_one_that_is_not_utf8(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(JsonlFormatError, match=r"empty\.jsonl: no steps \(the file is empty\)"):
        list(read_iterations(tmp_path / "empty.jsonl"))
    (tmp_path / "latin.jsonl").write_bytes(b'{"observation": "caf\xe9"}\n')
    with pytest.raises(JsonlFormatError, match=r"latin\.jsonl, line 1: not UTF-8 text"):
        list(read_iterations(tmp_path / "latin.jsonl"))


def test_unknown_fields_far_from_the_schema_are_ignored_and_ids_may_be_numbers(tmp_path):
    rows = [step(group=7, trajectory=t, step=s, my_debug_info={"x": 1}) for t in range(2) for s in range(2)]
    random.Random(0).shuffle(rows)
    write(tmp_path / "s.jsonl", rows)
    ((_, b),) = list(read_iterations(tmp_path / "s.jsonl"))
    assert b.n_trajectories == 2 and set(b.group_uid) == {"7"} and list(b.step) == [0, 1, 0, 1]


def test_a_gzip_file_streams_the_same_batches_and_its_progress_adds_up_to_its_size(tmp_path):
    import gzip

    batch = synthetic_batch(n_groups=3, group_size=4, max_steps=6, seed=2)
    plain, packed = tmp_path / "s.jsonl", tmp_path / "s.jsonl.gz"
    with plain.open("w") as fh:
        for it in range(3):
            steps_to_jsonl(batch, fh, iteration=it)
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (plain, packed):
        read = []
        got = list(read_iterations(path, progress=read.append))
        assert [it for it, _ in got] == [0, 1, 2]
        assert sum(read) == path.stat().st_size and all(n >= 0 for n in read)
        for (_, b), (_, ref) in zip(got, read_iterations(plain)):
            for col in ("group_id", "traj_id", "step", "reward", "observation", "action"):
                assert np.array_equal(getattr(b, col), getattr(ref, col)), col


@pytest.mark.parametrize("damage", ["not_gzip", "cut_short"])
def test_a_damaged_gzip_file_is_one_line_naming_it(tmp_path, damage):
    import gzip

    batch = synthetic_batch(n_groups=2, group_size=3, max_steps=4, seed=1)
    plain = tmp_path / "s.jsonl"
    with plain.open("w") as fh:
        steps_to_jsonl(batch, fh, iteration=0)
    data = gzip.compress(plain.read_bytes())
    path = tmp_path / "s.jsonl.gz"
    path.write_bytes(plain.read_bytes() if damage == "not_gzip" else data[: len(data) // 2])
    with pytest.raises(JsonlFormatError) as err:
        list(read_iterations(path))
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: not a readable gzip file"), message
