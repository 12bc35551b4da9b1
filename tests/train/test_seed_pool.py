"""A DVC stage's seeds side by side (scpo.train.seed_pool): the runs are the runs one after another would make, byte
for byte; a failing seed names itself; the method folder's manifest covers every seed."""

from __future__ import annotations

import json
import os

import pytest

from scpo.config import load_config
from scpo.train.seed_pool import SeedRunError, _captured, _side_by_side, evaluate_seeds, parse_seeds, train_seeds

from helpers.runs import CORRIDOR

SMALL = {
    **CORRIDOR,
    "train.iterations": 2,
    "train.rl_start": "base",
    "rollout.action_choice": "admissible",
    "eval.n_episodes": 3,
}


def _cfg(out):
    return load_config("params.yaml", profile="smoke", overrides={**SMALL, "train.out_dir": str(out)})


def _files(run):
    """Every file of a run that must not depend on how it was scheduled (timings and provenance excluded)."""
    return {
        p.relative_to(run).as_posix(): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file()
        and p.parts[-2:] != ("dvclive", "metrics.json")
        and p.name
        not in {"summary.json", "history.csv", "provenance.json", "state.json", "manifest.json", ".scpo.lock"}
        and "dvclive" not in p.relative_to(run).parts
    }


def test_parse_seeds():
    assert parse_seeds("0, 1,2", (7,)) == [0, 1, 2]
    assert parse_seeds("report", (4, 5)) == [4, 5]
    with pytest.raises(ValueError, match="'x' is not an integer"):
        parse_seeds("0,x", ())
    with pytest.raises(ValueError, match="names a seed twice"):
        parse_seeds("1,1", ())


@pytest.fixture(scope="module")
def pooled_and_serial(tmp_path_factory):
    pooled, serial = tmp_path_factory.mktemp("pooled"), tmp_path_factory.mktemp("serial")
    train_seeds(_cfg(pooled), [0, 1], workers=2)  # seed 0 in a spawned worker, seed 1 in this process, at once
    train_seeds(_cfg(serial), [0, 1], workers=1)  # in this process, one after another
    return pooled, serial


def test_seeds_side_by_side_equal_seeds_one_after_another(pooled_and_serial):
    pooled, serial = pooled_and_serial
    for seed in (0, 1):
        a, b = _files(pooled / f"corridor/gigpo/seed{seed}"), _files(serial / f"corridor/gigpo/seed{seed}")
        assert "model/model.safetensors" in a and any(k.startswith("rollouts/") for k in a)
        assert a.keys() == b.keys()
        assert [k for k in a if a[k] != b[k]] == []
    # the two seeds are different runs, and the method's manifest covers both
    assert (
        _files(pooled / "corridor/gigpo/seed0")["model/model.safetensors"]
        != _files(pooled / "corridor/gigpo/seed1")["model/model.safetensors"]
    )
    manifest = json.loads((pooled / "corridor/gigpo/manifest.json").read_text())
    assert sorted(manifest) == ["seed0/model", "seed0/rollouts", "seed1/model", "seed1/rollouts"]
    assert manifest == json.loads((serial / "corridor/gigpo/manifest.json").read_text())


def test_a_failing_seed_is_named_and_the_others_finish(tmp_path):
    (tmp_path / "corridor/gigpo/seed1").mkdir(parents=True)
    (tmp_path / "corridor/gigpo/seed1/notes.txt").write_text("an earlier user's file")
    with pytest.raises(SeedRunError, match=r"1 of 2 seeds failed; seed 1: .*not empty"):
        train_seeds(_cfg(tmp_path), [0, 1], workers=2)
    assert (tmp_path / "corridor/gigpo/seed0/model/model.safetensors").exists()
    assert (tmp_path / "corridor/gigpo/seed1/notes.txt").read_text() == "an earlier user's file"


def test_evaluate_seeds_writes_one_eval_per_seed(pooled_and_serial, tmp_path):
    pooled, _ = pooled_and_serial
    results = evaluate_seeds(_cfg(pooled), [0, 1], "gigpo", "corridor", tmp_path / "reports", workers=2)
    assert sorted(results) == [0, 1]
    for seed in (0, 1):
        saved = json.loads((tmp_path / f"reports/eval/corridor/gigpo/seed{seed}/eval.json").read_text())
        assert saved["splits"].keys() == results[seed]["splits"].keys() and saved["splits"]


def _which_process(seed: int, parent: int) -> tuple[dict, str]:
    """A seed's job for `_side_by_side`: the process it ran in; seed 13 kills the worker process that runs it."""
    if seed == 13 and os.getpid() != parent:
        os._exit(3)
    return {"pid": os.getpid()}, ""


def test_this_process_is_a_lane_and_the_workers_take_the_rest():
    me = os.getpid()
    out = _side_by_side(_which_process, [0, 1, 2, 3], 2, "lanes", lambda s, r: f"seed {s}", me)
    assert sorted(out) == [0, 1, 2, 3]
    assert out[0]["pid"] != me  # the first seed goes to the worker, the next to this process
    assert out[1]["pid"] == me
    # one lane: every seed here
    assert {r["pid"] for r in _side_by_side(_which_process, [0, 1], 1, "one", lambda s, r: "", me).values()} == {me}


def test_a_dead_worker_fails_its_seed_and_this_process_runs_the_rest():
    with pytest.raises(SeedRunError, match=r"1 of 3 seeds failed; seed 13: BrokenProcessPool"):
        _side_by_side(_which_process, [13, 0, 1], 2, "dead worker", lambda s, r: f"seed {s}", os.getpid())


def test_a_seed_in_this_process_draws_no_notebook_bars():
    from tqdm import notebook

    own = notebook.tqdm.__init__
    with _captured() as log:
        bar = notebook.tqdm(total=3, desc="inside a seed")
        bar.update(bar.total - bar.n)
        print("a note")
    assert bar.disable and not hasattr(bar, "container")  # no widget
    assert log.getvalue() == "a note\n"
    assert notebook.tqdm.__init__ is own
