"""A run folder is never destroyed or mixed: every check runs before the folder is touched, a non-empty folder needs
--resume or --overwrite, --resume needs a checkpoint, and one writer at a time holds a folder (a second fails at once
naming the holder; a killed holder's lock is taken over)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from helpers.runs import CORRIDOR, fingerprint, one_line, slow_corridor_run, train_cli


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 2-iteration corridor run (copied by each test that aims a command at it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    result = train_cli(out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def run(finished, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(finished, tmp_path / "run"))


def test_a_misspelled_model_aimed_at_a_finished_run_leaves_it_intact(run):
    """A fresh start with a misspelled Hub name on a folder holding a finished run is refused as not empty; with
    --overwrite the model is checked first (offline, one line naming it); either way the run stays byte for byte."""
    before = fingerprint(run)
    bad = ("--set", "policy.profile=Qwen/Qwen2.5-1.5B-Instrct")
    result = train_cli(run, *bad)
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert f"run folder {run} is not empty" in line and "a finished run" in line
    assert "--resume" in line and "--overwrite" in line
    assert fingerprint(run) == before

    result = train_cli(run, *bad, "--overwrite")
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert "policy.profile='Qwen/Qwen2.5-1.5B-Instrct'" in line and "HF_HUB_OFFLINE" in line
    assert fingerprint(run) == before


def test_missing_data_with_overwrite_leaves_the_run_intact(run, tmp_path):
    before = fingerprint(run)
    result = train_cli(run, "--overwrite", "--set", "env.name=alfworld", "--set", f"data.root={tmp_path / 'nowhere'}")
    assert result.exit_code == 1
    assert "no ALFWorld games under" in one_line(result.stderr)
    assert fingerprint(run) == before


def test_overwrite_replaces_a_run_once_every_check_passed(run):
    old = (run / "provenance.json").read_text()
    result = train_cli(run, "--overwrite", "--set", "train.seed=3", iterations=1)
    assert result.exit_code == 0, result.output
    assert (run / "provenance.json").read_text() != old
    assert pd.read_csv(run / "history.csv")["iteration"].tolist() == [0]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["iter_0001"]  # nothing left of the old run


def test_resume_without_a_checkpoint_is_an_error(tmp_path):
    empty = tmp_path / "never_trained"
    result = train_cli(empty, "--resume")
    assert result.exit_code == 1
    assert f"nothing to resume in {empty}" in one_line(result.stderr)
    assert not empty.exists()


# ---- one writer at a time


def test_a_second_writer_fails_at_once_naming_the_first(tmp_path):
    """Of two `scpo train` on one folder, the second (fresh, --overwrite or --resume alike) fails at once, naming the
    first's pid, and the folder holds exactly the first run (no interleaved seeds in its checkpoints or dvclive
    steps)."""
    out = tmp_path / "run"
    first = slow_corridor_run(out, {**CORRIDOR, "train.iterations": 4, "train.seed": 0}, sleep=0.05)
    deadline = time.time() + 120
    while not (out / "provenance.json").exists():
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
        assert time.time() < deadline
        time.sleep(0.05)
    for extra in ((), ("--overwrite",), ("--resume",)):
        result = train_cli(out, "--set", "train.seed=1", *extra, iterations=4)
        assert result.exit_code == 1, (extra, result.output)
        assert f"run folder {out} is in use by pid {first.pid}" in one_line(result.stderr), extra
    assert first.wait(timeout=300) == 0, first.stderr.read().decode()[-2000:]
    assert pd.read_csv(out / "history.csv")["iteration"].tolist() == [0, 1, 2, 3]
    import json

    assert json.loads((out / "summary.json").read_text())["seed"] == 0
    for ckpt in (out / "checkpoints").glob("iter_*"):
        assert json.loads((ckpt / "state.json").read_text())["provenance"]["config"]["train"]["seed"] == 0
    assert not (out / ".scpo.lock").exists()  # a clean exit releases and removes the lock


def test_a_lock_left_by_a_dead_process_is_taken_over_with_a_message(tmp_path):
    from scpo.pipeline.folder_lock import LOCK_FILE, RunLock

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_FILE).write_text(
        f'{{"pid": {dead.pid}, "host": "here", "command": "scpo train", "since": "2026-01-01T00:00:00+00:00"}}'
    )
    with RunLock(tmp_path) as lock:
        assert lock.note is not None
        assert f"took over the lock left by pid {dead.pid}" in lock.note and "is no longer running" in lock.note
    with RunLock(tmp_path) as lock:  # released cleanly: nothing to report next time
        assert lock.note is None


def test_a_run_stopped_before_its_first_checkpoint_is_named_with_the_way_out_that_works(run):
    """Ctrl-C before the first checkpoint leaves provenance.json (and perhaps a history) but nothing to resume: a plain
    `train` must not send the user to --resume, nor --resume back to a plain `train`; both name --overwrite."""
    import shutil

    for name in ("checkpoints", "model", "summary.json", "manifest.json"):
        path = run / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    before = fingerprint(run)
    plain = train_cli(run, iterations=2)
    assert plain.exit_code == 1
    line = one_line(plain.stderr)
    assert "--resume" not in line and "replace it with --overwrite" in line and "before its first checkpoint" in line
    resumed = train_cli(run, "--resume", iterations=2)
    assert resumed.exit_code == 1
    line = one_line(resumed.stderr)
    assert "nothing to resume" in line and "start it again with --overwrite" in line, line
    assert fingerprint(run) == before
    assert train_cli(run, "--overwrite", iterations=1).exit_code == 0
