"""Kill a CPU training run with SIGKILL mid-iteration, resume it: its metrics equal an uninterrupted run's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]

# a training process on the corridor env; SLOW_STEP makes each env step sleep so the kill lands inside an iteration
SCRIPT = """
import sys, time
from scpo.config import load_config
from scpo.envs import corridor
from scpo.train.run import run_training

slow = float(sys.argv[3])
make_env = corridor.make_env
def slow_make_env(*a, **k):
    env = make_env(*a, **k)
    step = env.step
    def slow_step(action):
        time.sleep(slow)
        return step(action)
    env.step = slow_step
    return env
corridor.make_env = slow_make_env
ov = {"policy.tiny_hidden_size": 32, "policy.tiny_layers": 1, "policy.tiny_heads": 2, "policy.tiny_vocab_size": 300,
      "policy.max_new_tokens": 8, "env.name": "corridor", "env.corridor.max_steps": 4, "rollout.n_tasks": 2,
      "rollout.group_size": 3, "train.iterations": 3, "train.checkpoint_every": 1, "train.lr": 1e-3,
      "credit.method": "gigpo", "rollout.action_choice": "generate"}
cfg = load_config("params.yaml", profile="smoke", overrides=ov)
run_training(cfg, stage="rl", out_dir=sys.argv[1], resume=sys.argv[2] == "resume")
"""


def _train(run_dir: Path, mode: str, slow: float = 0.0) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TQDM_DISABLE": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(run_dir), mode, str(slow)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _metrics(run_dir: Path) -> pd.DataFrame:
    hist = pd.read_csv(run_dir / "history.csv")
    return hist[[c for c in hist.columns if not c.startswith("perf/") or c in ("perf/steps", "perf/response_tokens")]]


def test_sigkill_then_resume_equals_uninterrupted_run(tmp_path):
    reference, killed = tmp_path / "uninterrupted", tmp_path / "killed"
    proc = _train(reference, "fresh")
    victim = _train(killed, "fresh", slow=0.05)
    # wait until the victim's first checkpoint (1 iteration done) exists, then kill it inside a later iteration
    deadline = time.time() + 180
    while not (killed / "checkpoints" / "iter_0001" / "state.json").exists():
        assert victim.poll() is None, victim.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "the run never reached its second checkpoint"
        time.sleep(0.05)
    time.sleep(0.3)
    assert victim.poll() is None, "the run ended before it could be killed"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert not (killed / "summary.json").exists()
    assert not (killed / "checkpoints" / "iter_0003").exists()

    resumed = _train(killed, "resume")
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()[-2000:]
    # the killed run's lock was left behind; the resumed run takes it over and says whose it was
    assert f"took over the lock left by pid {victim.pid}" in resumed.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-2000:]
    a, b = _metrics(reference), _metrics(killed)
    assert a["iteration"].tolist() == b["iteration"].tolist() == [0, 1, 2]
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-6, atol=1e-9)
    assert (killed / "summary.json").exists()
