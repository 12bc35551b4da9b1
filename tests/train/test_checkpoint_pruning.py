"""Evaluations never live where checkpoint pruning deletes (issue 59, case 4): `scpo eval --checkpoint
RUN/checkpoints/iter_0001` writes to RUN/evals/iter_0001/ by default, and pruning keeps a checkpoint holding files the
trainer did not write, saying so in one line."""

from __future__ import annotations

import json
from pathlib import Path

from scpo.run.checkpoint import finished_checkpoints, prune_checkpoints


def fake_checkpoint(run: Path, it: int) -> Path:
    """A finished checkpoint as the trainer leaves it: its files, then state.json listing them."""
    ckpt = run / "checkpoints" / f"iter_{it:04d}"
    (ckpt / "model").mkdir(parents=True)
    (ckpt / "model" / "model.safetensors").write_bytes(b"w" * 8)
    (ckpt / "history.csv").write_text("iteration\n0\n")
    files = {"model/model.safetensors": 8, "history.csv": 12}
    (ckpt / "state.json").write_text(json.dumps({"iterations_done": it, "files": files}))
    return ckpt


def test_pruning_keeps_a_checkpoint_holding_an_evaluation_and_says_so(tmp_path, capsys):
    run = tmp_path / "run"
    first, second, third = (fake_checkpoint(run, it) for it in (1, 2, 3))
    (first / "eval").mkdir()
    (first / "eval" / "eval.json").write_text("{}")  # `scpo eval --out RUN/checkpoints/iter_0001/eval`
    deleted = prune_checkpoints(run, keep=1)
    assert deleted == [second]
    assert finished_checkpoints(run) == [first, third]
    assert (first / "eval" / "eval.json").read_text() == "{}"
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"kept old checkpoint {first} (train.keep_checkpoints=1): it holds files the trainer did not write "
        "(eval/eval.json); move them out and delete it yourself"
    ]


def test_eval_writes_outside_checkpoints_by_default(tmp_path):
    from scpo.train.evaluate import default_eval_dir

    run = tmp_path / "run"
    assert default_eval_dir(run / "checkpoints" / "iter_0001") == run / "evals" / "iter_0001"
    assert default_eval_dir(run / "checkpoints" / "iter_0001" / "model") == run / "evals" / "iter_0001"
    assert default_eval_dir(run) == run / "eval"
    assert default_eval_dir(run / "model") == run / "model" / "eval"
