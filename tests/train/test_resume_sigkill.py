"""Kill a CPU training run with SIGKILL mid-iteration, resume it: its metrics equal an uninterrupted run's."""

from __future__ import annotations

import signal
import time

import pandas as pd

from helpers.runs import CORRIDOR, comparable_history, slow_corridor_run

RUN = {**CORRIDOR, "train.iterations": 3}


def test_sigkill_then_resume_equals_uninterrupted_run(tmp_path):
    reference, killed = tmp_path / "uninterrupted", tmp_path / "killed"
    proc = slow_corridor_run(reference, RUN)
    victim = slow_corridor_run(killed, RUN, sleep=0.05)  # each step sleeps: the kill lands mid-iteration
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

    resumed = slow_corridor_run(killed, RUN, resume=True)
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()[-2000:]
    # the killed run's lock was left behind; the resumed run takes it over and says whose it was
    assert f"took over the lock left by pid {victim.pid}" in resumed.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-2000:]
    a, b = comparable_history(reference), comparable_history(killed)
    assert a["iteration"].tolist() == b["iteration"].tolist() == [0, 1, 2]
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-6, atol=1e-9)
    assert (killed / "summary.json").exists()
