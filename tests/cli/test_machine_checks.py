"""What this machine cannot do is one line before anything is written: `train.device=cuda` and `rollout.engine=vllm`
without a GPU (no provenance.json left behind that would refuse the next plain run), the gpu profile on a machine with
no GPU (refused with its estimated time; `--set train.device=cpu` runs it anyway), and `scpo eval` with vLLM on a
CPU. torch is told it sees no GPU, so the tests mean the same on a GPU machine."""

from __future__ import annotations

import pytest
import torch

from scpo.config import load_config

from helpers import REPO
from helpers.runs import CORRIDOR_SETS, cli, one_line, train_cli


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_train_device_cuda_without_a_gpu_is_one_line_and_writes_nothing(tmp_path):
    result = train_cli(tmp_path / "run", "--set", "train.device=cuda")
    assert result.exit_code == 1, result.output
    assert "train.device='cuda' but torch sees no GPU" in one_line(result.stderr)
    assert not (tmp_path / "run").exists()


def test_vllm_without_a_gpu_is_one_line_and_the_next_plain_run_starts(tmp_path):
    run = tmp_path / "run"
    result = cli(
        "train", "--profile", "smoke", "--out", run, "--set", "policy.profile=smollm2-135m",
        "--set", "rollout.engine=vllm", "--set", "rollout.action_choice=generate",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "rollout.engine='vllm' needs a GPU" in one_line(result.stderr)
    assert not run.exists()  # no provenance.json: a plain run into the folder is not refused as "not empty"
    assert train_cli(run, iterations=1).exit_code == 0


def test_the_gpu_profile_without_a_gpu_is_refused_with_its_estimated_time(tmp_path):
    result = cli("train", "--profile", "gpu", "--out", tmp_path / "run")
    assert result.exit_code == 1, result.output
    line = one_line(result.stderr)
    assert line.startswith("--profile gpu on a machine with no GPU") and "estimated " in line and "H200" in line, line
    assert "--set train.device=cpu" in line and not (tmp_path / "run").exists()


def test_the_gpu_profile_on_a_cpu_runs_when_the_device_is_set_explicitly():
    from scpo.run.inputs import check_machine

    cfg = load_config(
        REPO / "params.yaml",
        profile="gpu",
        overrides={"train.device": "cpu", "rollout.engine": "transformers", "rollout.action_choice": "generate"},
    )
    check_machine(cfg, torch.device("cpu"))  # no error: the explicit device is the confirmation


def test_eval_with_vllm_on_a_cpu_is_one_line(tmp_path):
    run = tmp_path / "run"
    assert train_cli(run, iterations=1).exit_code == 0
    result = cli(
        "eval", "--profile", "smoke", "--checkpoint", run, "--out", tmp_path / "eval", *CORRIDOR_SETS,
        "--set", "rollout.engine=vllm", "--set", "policy.profile=smollm2-135m", "--force",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "rollout.engine='vllm' needs a GPU" in one_line(result.stderr)
    assert not (tmp_path / "eval").exists()
