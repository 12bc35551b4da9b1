"""The sync probes (`scpo.rollout.sync_probe`): distinct prompts, a few per generate call spread over the call, the
newest kept, answers scored past the format's opening tag; the mean |difference|, a NaN never passing."""

from __future__ import annotations

import math

import pytest

from scpo.rollout.sync_probe import SyncProbes, probe_tolerance

OPEN = (7, 8)  # the opening tag's token ids


def test_one_call_of_identical_prompts_gives_one_probe_per_distinct_prompt():
    """A task's 8 rollouts reset identically: 16 prompts of 2 tasks are 2 distinct prompts, 2 probes."""
    probes = SyncProbes(size=16, per_call=4, opening=OPEN)
    prompts = [[1, 2, 3]] * 8 + [[1, 2, 4]] * 8
    probes.offer(prompts, [[*OPEN, 10 + k, 20] for k in range(16)])
    assert [p.prompt_ids for p in probes.probes] == [(1, 2, 3), (1, 2, 4)]
    assert [p.answer_ids for p in probes.probes] == [(*OPEN, 10, 20), (*OPEN, 18, 20)]  # each prompt's first answer
    assert all(p.skip == 2 for p in probes.probes)


def test_probes_spread_over_a_call_and_the_newest_calls_are_kept():
    probes = SyncProbes(size=6, per_call=3, opening=OPEN)
    probes.offer([[k] for k in range(12)], [[5, 6]] * 12)  # 12 distinct prompts: 0, 4, 8 taken
    assert [p.prompt_ids for p in probes.probes] == [(0,), (4,), (8,)]
    probes.offer([[100 + k] for k in range(3)], [[5]] * 3)
    probes.offer([[200 + k] for k in range(3)], [[5]] * 3)  # a later step: the oldest leave
    assert [p.prompt_ids[0] for p in probes.probes] == [100, 101, 102, 200, 201, 202]
    probes.offer([[200], [201]], [[5]] * 2)  # already held: nothing new
    assert len(probes.probes) == 6 and probes.probes[0].prompt_ids == (100,)


def test_answers_are_compared_past_the_opening_tag_and_cut_to_answer_tokens():
    probes = SyncProbes(size=4, per_call=4, answer_tokens=2, opening=OPEN)
    probes.offer([[1], [2], [3]], [[*OPEN, 30, 31, 32], [*OPEN], [40, 41, 42]])
    assert [(p.answer_ids, p.skip) for p in probes.probes] == [((*OPEN, 30, 31), 2), ((40, 41), 0)]  # [2]: no token
    report = probes.compare([[0.0, 0.0, -1.0, -2.0], [-1.0, -1.5]], [[-5.0, -5.0, -1.2, -2.0], [-1.0, -1.0]])
    assert report["tokens"] == 4 and report["probes"] == 2
    assert report["mean_abs_diff"] == pytest.approx((0.2 + 0.0 + 0.0 + 0.5) / 4)  # the tag's positions not counted
    assert report["max_abs_diff"] == pytest.approx(0.5) and report["worst_probe_mean"] == pytest.approx(0.25)


def test_a_nan_logprob_never_passes():
    probes = SyncProbes(size=2, per_call=2)
    probes.offer([[1]], [[3, 4]])
    report = probes.compare([[float("nan"), -1.0]], [[-1.0, -1.0]])
    assert math.isinf(report["mean_abs_diff"]) and not report["mean_abs_diff"] <= 1.0


def test_tolerance_per_dtype():
    import torch

    assert probe_tolerance(torch.bfloat16) == 0.1 and probe_tolerance("float32") == 1e-3
    with pytest.raises(ValueError, match="int8"):
        probe_tolerance("int8")
