"""Dynamic sampling against a fake collector: which groups are dropped, refills, the unfiltered last try, counters."""

from __future__ import annotations

import re

import pytest

from scpo.batch import RolloutBatch, Step, Trajectory
from scpo.train.dynamic_sampling import dynamic_sample, uniform_groups


def group(task: str, seed: int, returns: list[float]) -> list[Trajectory]:
    """One group: a trajectory per return (its one step's reward)."""
    return [
        Trajectory(task, seed, i, [Step("o", "a", r, "n", done=True)], won=r >= 10, env_name="fake")
        for i, r in enumerate(returns)
    ]


class FakeCollector:
    """Try k returns `plan[k]`: a list of groups (returns per trajectory), each a fresh task."""

    def __init__(self, plan):
        self.plan, self.calls = plan, []

    def __call__(self, k):
        self.calls.append(k)
        return [t for j, returns in enumerate(self.plan[k]) for t in group(f"task{k}-{j}", k, returns)]


def tasks(sample):
    return list(dict.fromkeys(t.task_id for t in sample.trajectories))


def test_uniform_groups_are_the_all_equal_ones():
    trajs = group("a", 0, [10, 10]) + group("b", 0, [0, 0, 0]) + group("c", 0, [0, 10]) + group("d", 0, [3.5, 3.5])
    assert {t.task_id for t in trajs if t.group_uid in uniform_groups(trajs)} == {"a", "b", "d"}


def test_drops_uniform_groups_and_refills_until_the_target():
    fake = FakeCollector([[[0, 10], [10, 10], [0, 0]], [[0, 0], [10, 0], [0, 10]], [[0, 10]]])
    out = dynamic_sample(fake, target_groups=3, max_tries=10)
    # try 1 keeps 1 of 3, try 2 keeps 2 of 3: 3 groups, no third try; nothing is cut
    assert fake.calls == [0, 1] and out.tries == 2
    assert tasks(out) == ["task0-0", "task1-1", "task1-2"]
    assert (out.groups_collected, out.groups_dropped, out.groups_kept) == (6, 3, 3)
    assert out.metrics() == {
        "dynamic_sampling/tries": 2.0,
        "dynamic_sampling/groups_collected": 6.0,
        "dynamic_sampling/groups_dropped": 3.0,
        "dynamic_sampling/groups_kept": 3.0,
    }
    assert len(RolloutBatch.from_trajectories(out.trajectories)) == 6  # whole groups, ready for credit


def test_the_batch_can_exceed_the_target_as_verl_agents():
    fake = FakeCollector([[[0, 10], [0, 10], [0, 10]]])
    out = dynamic_sample(fake, target_groups=2)
    assert out.tries == 1 and out.groups_kept == 3


def test_the_last_try_keeps_every_group():
    fake = FakeCollector([[[0, 0], [10, 10]], [[0, 0], [1, 2]], [[10, 10], [0, 0]]])
    out = dynamic_sample(fake, target_groups=4, max_tries=3)
    assert out.tries == 3 and fake.calls == [0, 1, 2]
    assert tasks(out) == ["task1-1", "task2-0", "task2-1"]  # try 3 is unfiltered: its uniform groups stay
    assert (out.groups_collected, out.groups_dropped) == (6, 3)
    one = dynamic_sample(FakeCollector([[[0, 0]]]), target_groups=1, max_tries=1)
    assert one.tries == 1 and one.groups_kept == 1 and one.groups_dropped == 0


def test_a_repeated_group_and_bad_arguments_are_errors():
    again = sorted(group(t, 0, [0, 10])[0].group_uid for t in ("t", "u"))
    message = (
        f"try 2 of dynamic sampling returned groups already in the batch ({again[0]}, {again[1]}): each try must draw "
        "fresh groups (other tasks, or another seed)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):  # the same tasks and seed twice
        dynamic_sample(lambda k: group("t", 0, [0, 10]) + group("u", 0, [0, 10]), target_groups=3)
    fake = FakeCollector([[[0, 10]]])
    with pytest.raises(ValueError, match="target_groups must be >= 1, got 0"):
        dynamic_sample(fake, target_groups=0)
    with pytest.raises(ValueError, match="max_tries must be >= 1, got 0"):
        dynamic_sample(fake, target_groups=1, max_tries=0)
    assert fake.calls == []


def test_ten_tries_by_default_and_a_one_trajectory_group_is_uniform():
    fake = FakeCollector([[[0, 0]]] * 9 + [[[0, 0], [5]]])
    out = dynamic_sample(fake, target_groups=1)
    assert fake.calls == list(range(10)) and out.tries == 10 and out.groups_dropped == 9
    assert uniform_groups(group("solo", 0, [10])) == {group("solo", 0, [10])[0].group_uid}
    assert tasks(out) == ["task9-0", "task9-1"]


def test_the_rl_loop_samples_dynamically_and_logs_the_counters(tmp_path):
    """With rollout.dynamic_sampling.enable the corridor run keeps only groups with unequal returns (or the last,
    unfiltered try), logs the counters, and every try drew fresh groups."""
    import pandas as pd

    from scpo.config import load_config
    from scpo.train.run import run_training

    from helpers.runs import CORRIDOR

    overrides = {
        **CORRIDOR,
        "train.iterations": 3,
        "rollout.dynamic_sampling.enable": True,
        "rollout.dynamic_sampling.max_tries": 3,
    }
    cfg = load_config("params.yaml", profile="smoke", overrides=overrides)
    run_training(cfg, stage="rl", out_dir=tmp_path / "run")
    hist = pd.read_csv(tmp_path / "run" / "history.csv")
    assert (hist["dynamic_sampling/tries"] >= 1).all() and (hist["dynamic_sampling/tries"] <= 3).all()
    kept, dropped = hist["dynamic_sampling/groups_kept"], hist["dynamic_sampling/groups_dropped"]
    assert (kept + dropped == hist["dynamic_sampling/groups_collected"]).all()
    # the batch holds the kept groups: a try that stops early has at least n_tasks kept groups
    done_early = hist["dynamic_sampling/tries"] < 3
    assert (kept[done_early] >= cfg.rollout.n_tasks).all()
    from scpo.batch import RolloutBatch

    rollouts = sorted((tmp_path / "run" / "rollouts").glob("iter_*.parquet"))
    assert [RolloutBatch.read(p).n_groups for p in rollouts] == kept.astype(int).tolist()
