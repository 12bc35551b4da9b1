"""Checkpoints load without pickle: state files round-trip exactly, a pickle planted in a run folder is refused in one
line without running, and a resumed run is bit-identical."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from scpo.cli import app
from scpo.config import load_config
from scpo.run.checkpoint import CheckpointError, read_training_state, rng_state, set_rng_state, write_training_state

from helpers.runs import CORRIDOR, comparable_history

SMOKE = CORRIDOR  # every iteration takes optimizer steps (skip_zero_advantage off): a non-trivial Adam state
CLI_SETS = [arg for k, v in SMOKE.items() for arg in ("--set", f"{k}={v}")]


class WritesAFile:
    """Unpickling this runs `exec`, which writes `marker`: what a crafted optimizer.pt / rng.pt would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').write('code ran')",)


def _plant(path: Path, marker: Path) -> None:
    torch.save({"state": WritesAFile(marker)}, path)  # a torch zip checkpoint whose pickle runs code on load


def _rl(out: Path, iterations: int, resume: bool = False) -> dict:
    from scpo.train.run import run_training

    cfg = load_config("params.yaml", profile="smoke", overrides={**SMOKE, "train.iterations": iterations})
    return run_training(cfg, stage="rl", out_dir=out, resume=resume)


def _resume_cli(run_dir: Path, iterations: int = 2):
    return CliRunner().invoke(
        app,
        [
            "train",
            "--profile",
            "smoke",
            "--stage",
            "rl",
            "--out",
            str(run_dir),
            "--resume",
            *CLI_SETS,
            "--set",
            f"train.iterations={iterations}",
        ],
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An uninterrupted 2-iteration run, and a run stopped after its iteration-1 checkpoint (to be resumed)."""
    root = tmp_path_factory.mktemp("runs")
    _rl(root / "uninterrupted", iterations=2)
    _rl(root / "stopped", iterations=1)
    return root


@pytest.fixture
def stopped(runs, tmp_path):
    """A fresh copy of the stopped run (tests plant files in it); it trains on the corridor test env."""
    return Path(shutil.copytree(runs / "stopped", tmp_path / "run"))


# ---- state files


def _adam_state() -> tuple[torch.optim.Optimizer, list[torch.nn.Parameter]]:
    params = [
        torch.nn.Parameter(torch.randn(3, 2)),
        torch.nn.Parameter(torch.randn(4, dtype=torch.bfloat16)),
        torch.nn.Parameter(torch.randn(5)),
    ]
    opt = torch.optim.AdamW([{"params": params[:2]}, {"params": params[2:], "lr": 0.5, "betas": (0.8, 0.95)}], lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        sum((p.float() ** 2).sum() for p in params[:2]).backward()  # the third parameter gets no gradient: no state
        opt.step()
    return opt, params


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_equal, a, b))
    return type(a) is type(b) and a == b


def test_optimizer_and_rng_state_files_round_trip_exactly(tmp_path):
    opt, params = _adam_state()
    state = opt.state_dict()
    assert set(state["state"]) == {0, 1} and state["param_groups"][1]["betas"] == (0.8, 0.95)
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.standard_normal()  # numpy caches a second Gaussian: has_gauss=1 and the cached value must survive
    write_training_state(tmp_path, state, rng_state())
    (tmp_path / "state.json").write_text('{"iterations_done": 7}')
    expected = (random.random(), np.random.standard_normal(), np.random.rand(), torch.rand(2))

    saved = read_training_state(tmp_path)
    opt_back, rng_back = saved.optimizer, saved.rng
    # int parameter keys, the betas tuple, the bfloat16 moment and the 0-d step tensors come back as they were
    assert _equal(opt_back, state)
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    set_rng_state(rng_back)
    got = (random.random(), np.random.standard_normal(), np.random.rand(), torch.rand(2))
    assert got[:3] == expected[:3] and torch.equal(got[3], expected[3])

    fresh = torch.optim.AdamW([{"params": params[:2]}, {"params": params[2:], "lr": 0.5, "betas": (0.8, 0.95)}], lr=0.1)
    assert saved.restore(fresh) == 7
    assert _equal(fresh.state_dict(), state)


def test_cuda_generator_states_are_saved_and_restored_per_device(tmp_path, monkeypatch):
    """torch.cuda stubbed (no GPU here) with two devices' states; restoring on a 1-GPU machine sets device 0 only."""
    states = [torch.arange(16, dtype=torch.uint8), torch.arange(16, 32, dtype=torch.uint8)]
    restored = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in states])
    write_training_state(tmp_path, {}, rng_state())
    (tmp_path / "state.json").write_text('{"iterations_done": 1}')
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: restored.append((device, state)))
    rng = read_training_state(tmp_path).rng
    assert len(rng["cuda"]) == 2 and all(map(torch.equal, rng["cuda"], states))
    set_rng_state(rng)
    assert len(restored) == 1 and restored[0][0] == 0 and torch.equal(restored[0][1], states[0])


def test_a_state_file_holds_no_pickle(tmp_path):
    opt, _ = _adam_state()
    write_training_state(tmp_path, opt.state_dict(), rng_state())
    for name in ("optimizer.safetensors", "rng.safetensors"):
        raw = (tmp_path / name).read_bytes()
        header_len = int.from_bytes(raw[:8], "little")
        assert raw[8:9] == b"{" and b"\x80\x02" not in raw[: 8 + header_len]  # a JSON header, not a pickle stream


# ---- planted pickles


def test_resume_refuses_a_pickle_planted_in_the_state_files_in_one_line(stopped, tmp_path):
    ckpt = stopped / "checkpoints" / "iter_0001"
    marker = tmp_path / "pwned"
    for name in ("optimizer.safetensors", "rng.safetensors"):
        _plant(ckpt / name, marker)
    shutil.copy(ckpt / "rng.safetensors", tmp_path / "control.pt")
    summary = (stopped / "summary.json").read_text()

    result = _resume_cli(stopped)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "optimizer.safetensors is not an scpo state file" in lines[0], result.stderr
    assert not marker.exists()
    # nothing ran and the run's results are left as they were
    assert not (stopped / "checkpoints" / "iter_0002").exists() and (stopped / "summary.json").read_text() == summary
    assert len(pd.read_csv(stopped / "history.csv")) == 1

    torch.load(tmp_path / "control.pt", weights_only=False)  # control: the planted file really runs code when unpickled
    assert marker.read_text() == "code ran"


def test_resume_never_reads_pickles_in_place_of_the_state_files(stopped, tmp_path):
    """torch pickles (optimizer.pt, rng.pt) where the state files should be: the checkpoint is incomplete, the resume
    is refused in one line, and nothing is unpickled."""
    ckpt = stopped / "checkpoints" / "iter_0001"
    marker = tmp_path / "pwned"
    for name in ("optimizer", "rng"):
        (ckpt / f"{name}.safetensors").unlink()
        _plant(ckpt / f"{name}.pt", marker)

    result = _resume_cli(stopped)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "iter_0001" in lines[0] and "optimizer.safetensors" in lines[0], result.stderr
    assert not marker.exists()


def test_state_files_are_required_and_must_fit_the_optimizer(stopped):
    ckpt = stopped / "checkpoints" / "iter_0001"
    (ckpt / "rng.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"iter_0001 is not a complete checkpoint: rng.safetensors missing$"):
        read_training_state(ckpt)
    other = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))])
    write_training_state(ckpt, other.state_dict(), rng_state())  # one parameter group of one parameter: wrong run
    saved = read_training_state(ckpt)
    with pytest.raises(CheckpointError, match="does not fit this run") as err:
        saved.restore(torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2)) for _ in range(3)]))
    assert "\n" not in str(err.value)


# ---- resume is bit-identical


def _assert_same_outputs(a: Path, b: Path) -> None:
    pd.testing.assert_frame_equal(comparable_history(a), comparable_history(b), check_exact=True)
    for rel in (
        "model/model.safetensors",
        "checkpoints/iter_0002/model/model.safetensors",
        "checkpoints/iter_0002/optimizer.safetensors",
        "checkpoints/iter_0002/rng.safetensors",
    ):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_resumed_run_is_bit_identical_to_the_uninterrupted_run(runs, stopped):
    assert (stopped / "checkpoints" / "iter_0001" / "optimizer.safetensors").exists()
    assert not (stopped / "checkpoints" / "iter_0002").exists()
    _rl(stopped, iterations=2, resume=True)
    assert comparable_history(stopped)["iteration"].tolist() == [0, 1]
    _assert_same_outputs(runs / "uninterrupted", stopped)


def test_a_pickle_planted_as_the_model_weights_is_not_run(stopped, tmp_path):
    """The model folder is read by transformers: safetensors, or a `.bin` only through torch's weights-only loader (a
    guard on the library's behaviour, which scpo relies on)."""
    from scpo.policy import load_policy

    model_dir, marker = stopped / "checkpoints" / "iter_0001" / "model", tmp_path / "pwned"
    (model_dir / "model.safetensors").unlink()
    _plant(model_dir / "pytorch_model.bin", marker)
    with pytest.raises(Exception, match="Weights only load failed"):
        load_policy(model_dir)
    assert not marker.exists()
