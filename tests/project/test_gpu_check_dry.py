"""The prepared GPU check (checks/gpu/run.sh) against the stand-in vLLM on the CPU (VLLM_CPU=0: the suite does not
build vLLM's CPU build; `run.sh --dry` does, checks/gpu/results/dry_cpu_vllm/): it passes with a correct sync, and
with each planted fault it fails, its verdict one line naming the stage and the reason, exit status 1: inside vLLM (the
weights never reach its model; its parameters change but it keeps generating from the old weights) and on this side of
it (the first decoder layer left out of the sync; a repetition penalty and a top-k in every request). The extrapolation
to a full iteration uses the gpu profile's sizes from params.yaml, not the check's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "checks" / "gpu"))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tmp_path_factory.mktemp("gpu_models")  # SmolLM2's tokenizer and the random Qwen2, built once


def _dry(out: Path, models: Path, plant: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "MODELS_DIR": str(models), "STAGES": "engine_v1", "ENV": "corridor",
           "VLLM_CPU": "0"}  # fmt: skip
    args = ["bash", str(ROOT / "checks/gpu/run.sh"), "--dry", *(["--plant", plant] if plant else []), str(out)]
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


PARAMETERS_DIFFER = r"engine_v1: vLLM weight sync check failed \(load_weights, v1 runner\): .*max \|diff\| [0-9.e-]+ "


@pytest.mark.slow
@pytest.mark.parametrize(
    "plant, reason",
    [
        (None, None),
        ("skipped_sync", PARAMETERS_DIFFER),
        ("stale_weights", r"engine_v1: vLLM weight sync check failed: after the sync vLLM's log-probs of \d+ sampled"),
        ("stale_layer", PARAMETERS_DIFFER),
        ("sampler_penalty", r"engine_v1: (on the same weights|after the sync) vLLM's sampler log-probs of its \d+"),
    ],
    ids=["correct_sync", "skipped_sync", "stale_weights", "stale_layer", "sampler_penalty"],
)
def test_dry_run_passes_a_correct_sync_and_fails_each_planted_fault_in_one_line(tmp_path, models, plant, reason):
    import re

    done = _dry(tmp_path / "out", models, plant)
    lines = done.stdout.strip().splitlines()
    verdicts = [x for x in lines if x.startswith("GPU check ")]
    assert len(verdicts) == 1 and lines[-1] == verdicts[0], done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "out" / "verdict.txt").read_text().strip() == verdicts[0]
    if plant is None:
        assert done.returncode == 0 and verdicts[0].startswith("GPU check passed: 1 stages exited 0"), verdicts[0]
    else:
        assert done.returncode == 1 and verdicts[0].startswith("GPU check FAILED: engine_v1: "), verdicts[0]
        assert re.search(reason, verdicts[0]), verdicts[0]


def test_the_verdict_judges_what_the_engine_did_not_catch(tmp_path):
    """A stage whose sync raised no error still fails when vLLM's parameters differ, when the update changed nothing,
    or when vLLM's answers after the sync trail its same-weights agreement; a stage that exited non-zero fails with the
    last line of its log."""
    from gpu_check import stage_failure, verdict

    good = {
        "stage": "engine",
        "sync_error": None,
        "after_sync_parameters": {"max_abs_diff": 0.0, "nan": 0, "tensors": 16, "unmatched": [], "unused": []},
        "update": {"trainer_before_vs_after": {"exact": 0.0}},
        "same_weights": {"greedy": {"first_token": 0.94}, "logprob_abs_diff": {"mean": 0.04, "tokens": 900}},
        "probe_tolerance": 0.1,
        "dtype": "bfloat16",
        "after_sync": {"first_token": 0.9, "n": 128},
        "after_sync_sampler": {"mean": 0.05, "tokens": 800},
        "before_sync": {"first_token": 0.2},
    }
    assert stage_failure("e", good) is None
    penalised = {**good, "same_weights": {**good["same_weights"], "logprob_abs_diff": {"mean": 0.4, "tokens": 900}}}
    assert "sampler log-probs of its 900 sampled tokens differ from the trainer's by 0.4 nats" in stage_failure(
        "e", penalised
    )
    diff = {**good, "after_sync_parameters": {**good["after_sync_parameters"], "max_abs_diff": 0.5}}
    assert "vLLM's parameters are not the trainer's: max |diff| 0.5" in stage_failure("e", diff)
    late = {**good, "after_sync_sampler": {"mean": 0.3, "tokens": 800}}
    late_line = "after the sync vLLM's sampler log-probs of its 800 sampled tokens differ from the updated trainer's"
    assert late_line + " by 0.3 nats" in stage_failure("e", late)
    still = {**good, "update": {"trainer_before_vs_after": {"exact": 1.0}}}
    assert "cannot be judged" in stage_failure("e", still)
    stale = {**good, "after_sync": {"first_token": 0.2, "n": 128}}
    assert "agree with the updated trainer's on 20% of 128 prompts, against 94%" in stage_failure("e", stale)
    (tmp_path / "rl_vllm.log").write_text("Traceback ...\nWeightSyncError: vLLM weight sync check failed: x\n")
    line = verdict([{"stage": "rl_vllm", "rc": 1}], {}, tmp_path)
    assert line == "GPU check FAILED: rl_vllm: exit 1: WeightSyncError: vLLM weight sync check failed: x"


def test_the_full_iteration_extrapolation_uses_the_gpu_profiles_sizes():
    """16 tasks x 8 rollouts x ALFWorld's 50 steps = 6,400 step-samples (WebShop: 15 steps), whatever the check's own
    --tasks / --group / --max-steps were."""
    from gpu_check import full_iteration_step_samples

    from scpo.config import load_config

    gpu = load_config(ROOT / "params.yaml", profile="gpu")
    full, note = full_iteration_step_samples("alfworld")
    assert full == gpu.rollout.n_tasks * gpu.rollout.group_size * gpu.env.alfworld.max_steps == 16 * 8 * 50
    assert "env.alfworld.max_steps=50" in note
    assert full_iteration_step_samples("corridor")[0] == 16 * 8 * gpu.env.corridor.max_steps
