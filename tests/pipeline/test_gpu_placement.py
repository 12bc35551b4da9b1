"""One run per GPU: on a machine with two (faked) visible GPUs a 2-seed stage and a 2-point sweep give each run its own
device through CUDA_VISIBLE_DEVICES (read back from the environment each worker ran with); `report.parallel_runs:
per_gpu` is the number of visible GPUs; more runs than GPUs, a GPU named twice, points that would all see every GPU,
and a second run on a GPU already held are each refused in one line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from scpo.config import load_config
from scpo.errors import PlacementError
from scpo.pipeline.devices import parallel_runs, visible_gpus
from scpo.pipeline.sweep import SweepError, run_sweep
from scpo.policy.placement import gpu_claim
from scpo.train.seed_pool import train_seeds

from helpers.notebooks import write_notebook
from helpers.runs import CORRIDOR


@pytest.fixture
def two_gpus(monkeypatch):
    """torch in this process sees two GPUs (CUDA_VISIBLE_DEVICES unset); spawned workers see none of them."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert visible_gpus() == ["0", "1"]


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert visible_gpus() == ["3", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []
    assert parallel_runs("per_gpu", []) == 1 and parallel_runs(3, []) == 3  # a CPU machine: as many as asked
    assert parallel_runs("per_gpu", ["3", "5"]) == 2 and parallel_runs(2, ["3", "5"]) == 2
    with pytest.raises(PlacementError, match=r"report.parallel_runs=3 but 2 GPU\(s\) are visible \(3,5\): two runs"):
        parallel_runs(3, ["3", "5"])


def test_a_two_seed_stage_puts_each_seed_on_its_own_gpu(two_gpus, tmp_path):
    """report.parallel_runs: per_gpu -> 2 workers, worker k with CUDA_VISIBLE_DEVICES = GPU k; each seed reports the
    device its process was given (the workers have no real GPU and train on the CPU)."""
    overrides = {
        **CORRIDOR,
        "train.iterations": 1,
        "train.rl_start": "base",
        "rollout.action_choice": "admissible",
        "train.out_dir": str(tmp_path),
        "report.parallel_runs": "per_gpu",
    }
    cfg = load_config("params.yaml", profile="smoke", overrides=overrides)
    summaries = train_seeds(cfg, [0, 1])
    devices = {seed: s["cuda_visible_devices"] for seed, s in summaries.items()}
    assert sorted(devices.values()) == ["0", "1"], devices
    assert all((tmp_path / f"corridor/gigpo/seed{k}/model/model.safetensors").exists() for k in (0, 1))
    too_many = cfg.model_copy(update={"report": cfg.report.model_copy(update={"parallel_runs": 3})})
    with pytest.raises(PlacementError, match="report.parallel_runs=3 but 2 GPU"):
        train_seeds(too_many, [0, 1, 2])


def _gpu_notebook(path):
    """A point that records the GPU it was given (CUDA_VISIBLE_DEVICES) in its summary."""
    return write_notebook(
        path,
        'x = 1\nsummary_json = ""',
        "import json, os, time\n"
        "time.sleep(2)  # both points run at once\n"
        "json.dump({'gpu': os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}, open(summary_json, 'w'))",
    )


def test_a_two_point_sweep_puts_each_point_on_its_own_gpu(two_gpus, tmp_path):
    notebook = _gpu_notebook(tmp_path / "nb.ipynb")
    summary = run_sweep(notebook, ["x=1,2"], tmp_path / "out", backend="local", gpus="auto")
    assert (summary["status"] == "ok").all()
    assert sorted(summary["result.gpu"].astype(str)) == ["0", "1"]
    with pytest.raises(SweepError, match=r"--jobs 2 without --gpus on a machine with 2 visible GPU\(s\)"):
        run_sweep(notebook, ["x=1,2"], tmp_path / "jobs", backend="local", jobs=2)
    with pytest.raises(SweepError, match="--gpus=0,0 names GPU 0 twice: two runs would share it"):
        run_sweep(notebook, ["x=1,2"], tmp_path / "twice", backend="local", gpus="0,0")
    assert not (tmp_path / "jobs").exists() and not (tmp_path / "twice").exists()


def test_a_second_run_on_a_held_gpu_is_refused(monkeypatch, tmp_path):
    """gpu_claim locks the GPU's UUID: a second claim (another run, or the same GPU under another
    CUDA_VISIBLE_DEVICES index) fails at once naming the holder; released, the GPU can be claimed again."""
    import os

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(uuid="GPU-test-0", name="fake"))
    device = torch.device("cuda", 0)
    with gpu_claim(device, tmp_path) as path:
        assert path.read_text() == f"pid {os.getpid()}"
        held = rf"GPU GPU-test-0 .* is in use by scpo run pid {os.getpid()}"
        with pytest.raises(PlacementError, match=held), gpu_claim(torch.device("cuda", 1), tmp_path):
            pass
    with gpu_claim(device, tmp_path):
        pass
    with gpu_claim(torch.device("cpu"), tmp_path) as nothing:
        assert nothing is None
    assert json.dumps(str(path))  # the lock file stays (an flock, not the file, marks a holder)
