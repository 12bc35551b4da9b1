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


def _edit_tensors(model_file: Path, drop: str | None = None, add: str | None = None) -> None:
    """Rewrite a model's safetensors file without tensor `drop` and/or with an extra tensor `add` (a valid file: only
    the set of tensors differs, as in a copy cut by hand or a file from another model)."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(model_file)
    if drop is not None:
        del tensors[drop]
    if add is not None:
        tensors[add] = torch.zeros(3)
    save_file(tensors, model_file, metadata={"format": "pt"})


_DROPPED = "model.layers.0.mlp.up_proj.weight"


@pytest.mark.parametrize(
    ("drop", "add", "named"),
    [(_DROPPED, None, _DROPPED), (None, "extra.scale", "extra.scale")],
    ids=["missing", "extra"],
)
def test_resume_falls_back_when_the_newest_model_misses_or_adds_a_tensor(runs, stopped, drop, add, named):
    _edit_tensors(stopped / "checkpoints" / "iter_0002" / "model" / "model.safetensors", drop, add)
    result = train_cli(stopped, "--resume", iterations=3)
    assert result.exit_code == 0, result.output
    note = [ln for ln in result.stderr.splitlines() if "cannot be restored" in ln]
    assert len(note) == 1 and named in note[0] and "resuming from iter_0001 instead" in note[0], result.stderr
    assert "newly initialized" not in result.output
    pd.testing.assert_frame_equal(
        comparable_history(runs / "uninterrupted"), comparable_history(stopped), check_exact=False, rtol=1e-6, atol=1e-9
    )


def test_eval_of_a_model_missing_a_tensor_is_refused_in_one_line(stopped, tmp_path):
    from helpers.runs import cli

    ckpt = stopped / "checkpoints" / "iter_0002"
    _edit_tensors(ckpt / "model" / "model.safetensors", drop=_DROPPED)
    out = tmp_path / "eval"
    result = cli("eval", "--profile", "smoke", "--checkpoint", ckpt, "--out", out, "--set", "eval.n_episodes=1")
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert _DROPPED in line and "lacks 1 tensor" in line, line
    assert not (out / "eval.json").exists()


def test_load_policy_refuses_a_model_missing_or_adding_tensors(stopped, tmp_path):
    from scpo.errors import ExpectedError
    from scpo.policy import load_policy

    model = Path(shutil.copytree(stopped / "model", tmp_path / "model"))
    _edit_tensors(model / "model.safetensors", drop=_DROPPED, add="extra.scale")
    with pytest.raises(ExpectedError) as err:  # IncompleteModelError
        load_policy(model)
    assert _DROPPED in str(err.value) and "extra.scale" in str(err.value) and "\n" not in str(err.value)
