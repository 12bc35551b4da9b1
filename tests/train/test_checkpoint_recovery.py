"""A damaged checkpoint is named and skipped: --resume falls back to the newest complete one (saying so in one line) and
then continues exactly as the uninterrupted run; with none left it fails in one line. Only the newest
`train.keep_checkpoints` checkpoints are kept; the final model always."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from helpers.runs import comparable_history, fingerprint, one_line, train_cli


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """An uninterrupted 3-iteration run, and the same run stopped after 2 iterations (checkpoints iter_0001, 0002)."""
    root = tmp_path_factory.mktemp("recovery")
    for name, iterations in (("uninterrupted", 3), ("stopped", 2)):
        result = train_cli(root / name, iterations=iterations)
        assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def stopped(runs, tmp_path) -> Path:
    return Path(shutil.copytree(runs / "stopped", tmp_path / "run"))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    "damaged",
    ["model/model.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json", "model/tokenizer.json"],
)
def test_resume_names_a_truncated_file_and_falls_back_to_the_previous_checkpoint(runs, stopped, damaged):
    bad = stopped / "checkpoints" / "iter_0002" / damaged
    _truncate(bad)
    result = train_cli(stopped, "--resume", iterations=3)
    assert result.exit_code == 0, result.output
    note = [ln for ln in result.stderr.splitlines() if "cannot be restored" in ln]
    assert len(note) == 1 and str(bad) in note[0] and "resuming from iter_0001 instead" in note[0], result.stderr
    # the resumed run redid iteration 2 from iteration 1's checkpoint: the same as never having stopped
    pd.testing.assert_frame_equal(
        comparable_history(runs / "uninterrupted"), comparable_history(stopped), check_exact=False, rtol=1e-6, atol=1e-9
    )
    assert (stopped / "checkpoints" / "corrupt-iter_0002" / damaged).exists()  # set aside, not deleted


def test_resume_fails_in_one_line_when_no_checkpoint_is_complete(stopped):
    for ckpt in ("iter_0001", "iter_0002"):
        _truncate(stopped / "checkpoints" / ckpt / "model" / "model.safetensors")
    before = fingerprint(stopped)
    result = train_cli(stopped, "--resume", iterations=3)
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert line.startswith(f"no complete checkpoint to resume from in {stopped}: iter_0002: ")
    assert "iter_0001: " in line and "model.safetensors is not a readable safetensors file" in line
    assert fingerprint(stopped) == before


def test_only_the_newest_checkpoints_are_kept_and_the_final_model_always(tmp_path):
    result = train_cli(tmp_path / "kept2", "--set", "train.keep_checkpoints=2", iterations=4)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "kept2" / "checkpoints").iterdir()) == ["iter_0003", "iter_0004"]
    assert (tmp_path / "kept2" / "model" / "model.safetensors").exists()
    result = train_cli(tmp_path / "default", "--set", "train.checkpoint_every=1", iterations=5)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "default" / "checkpoints").iterdir()) == [
        "iter_0003",
        "iter_0004",
        "iter_0005",
    ]  # train.keep_checkpoints defaults to 3


def test_a_checkpoint_records_the_size_of_every_file(stopped):
    ckpt = stopped / "checkpoints" / "iter_0002"
    files = json.loads((ckpt / "state.json").read_text())["files"]
    assert {"model/model.safetensors", "model/tokenizer.json", "optimizer.safetensors", "rng.safetensors"} <= set(files)
    assert all((ckpt / rel).stat().st_size == size for rel, size in files.items())
